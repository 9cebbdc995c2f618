"""Is a TCP port free to bind? Read from /proc/net/tcp{,6}; wait for it, or say who holds it.

The fleet's 2026-09-16 restore failed because a new server tried to bind a port about a
second after the old one stopped: its sockets were still there. So a smoke run waits
until no socket on the port remains (listener, accepted connection, TIME_WAIT), and if
one never goes, fails with the socket table and its owners.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lockpipe.errors import PortError

# include/net/tcp_states.h
STATES = {
    1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
    6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING",
    12: "NEW_SYN_RECV",
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TcpSocket:
    local: str  # address as a person writes it
    local_port: int
    remote: str
    remote_port: int
    state: str
    uid: int
    inode: int  # 0 when no process owns it (TIME_WAIT, embryonic)

    def endpoint(self, remote: bool = False) -> str:
        addr, port = (self.remote, self.remote_port) if remote else (self.local, self.local_port)
        return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def _address(hexaddr: str, byteorder: str) -> str:
    raw = bytes.fromhex(hexaddr)
    # The kernel prints each 32-bit word of the address in host byte order.
    if byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    addr = ipaddress.ip_address(raw)
    mapped = getattr(addr, "ipv4_mapped", None)
    return str(mapped or addr)


def parse_proc_net_tcp(text: str, byteorder: str = sys.byteorder) -> list[TcpSocket]:
    """Every socket in the text of /proc/net/tcp or /proc/net/tcp6; the header is skipped."""
    out = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10:
            continue
        (la, lp), (ra, rp) = f[1].split(":"), f[2].split(":")
        state = int(f[3], 16)
        out.append(
            TcpSocket(
                local=_address(la, byteorder), local_port=int(lp, 16),
                remote=_address(ra, byteorder), remote_port=int(rp, 16),
                state=STATES.get(state, f"0x{state:02X}"), uid=int(f[7]), inode=int(f[9]),
            )
        )  # fmt: skip
    return out


def holders(port: int, sockets: Iterable[TcpSocket]) -> list[TcpSocket]:
    """The sockets bound to local ``port``: the ones that make a new bind() fail.

    A client's connection *to* the port holds an ephemeral local port, not this one.
    """
    return [s for s in sockets if s.local_port == port]


def read_sockets(proc: Path = Path("/proc")) -> list[TcpSocket]:
    """Every TCP socket (IPv4 and IPv6) in this network namespace."""
    out: list[TcpSocket] = []
    for name in ("tcp", "tcp6"):
        try:
            out += parse_proc_net_tcp((proc / "net" / name).read_text())
        except FileNotFoundError:  # no IPv6 in this kernel
            continue
    return out


def socket_owners(inodes: Iterable[int], proc: Path = Path("/proc")) -> dict[int, str]:
    """``pid N (command)`` per socket inode, for the processes this user may inspect."""
    wanted = {f"socket:[{i}]": i for i in inodes if i}
    found: dict[int, str] = {}
    if not wanted:
        return found
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                inode = wanted.get(os.readlink(fd))
                if inode is not None and inode not in found:
                    # a process is named after its executable's file: any bytes
                    comm = (pid_dir / "comm").read_bytes().decode(errors="backslashreplace")
                    comm = comm.strip()
                    found[inode] = f"pid {pid_dir.name} ({comm})"
        except OSError:  # gone, or another user's: best effort
            continue
    return found


def format_table(sockets: Iterable[TcpSocket], owners: Mapping[int, str]) -> str:
    """The socket table, one line per socket, aligned, with a header."""
    rows = [("STATE", "LOCAL", "REMOTE", "OWNER")]
    for s in sockets:
        owner = owners.get(s.inode) or (
            "kernel (no process)" if s.inode == 0 else f"uid {s.uid}, inode {s.inode}"
        )
        rows.append((s.state, s.endpoint(), s.endpoint(remote=True), owner))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(
        "  " + "  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3]
        for r in rows
    )


class PortBusy(PortError):
    """A port stayed in use past the wait; carries the sockets that held it."""

    def __init__(self, port: int, waited: float, sockets: list[TcpSocket], table: str) -> None:
        self.port, self.sockets = port, sockets
        fixes = []
        if any(s.state != "TIME_WAIT" for s in sockets):
            fixes.append(
                "stop what holds it (the owner above: its container, its service, or kill "
                "the pid), or serve on another port"
            )
        if any(s.state == "TIME_WAIT" for s in sockets):
            fixes.append(
                "TIME_WAIT sockets belong to the kernel and go by themselves within 60 s "
                "on Linux: wait longer, or serve on another port"
            )
        super().__init__(
            f"port {port} is still in use after {waited:.1f} s, so a server cannot bind "
            f"it:\n{table}\nfix: " + "; ".join(fixes)
        )


def wait_port_clear(
    port: int,
    timeout: float,
    poll: float = 0.2,
    *,
    proc: Path = Path("/proc"),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Return the seconds waited once no socket is bound to ``port``; PortBusy at ``timeout``."""
    start = clock()
    while True:
        held = holders(port, read_sockets(proc))
        waited = clock() - start
        if not held:
            return waited
        if waited >= timeout:
            owners = socket_owners((s.inode for s in held), proc)
            raise PortBusy(port, waited, held, format_table(held, owners))
        sleep(min(poll, max(timeout - waited, 0.0)))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing is bound to now (the kernel's pick; another process may race)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
