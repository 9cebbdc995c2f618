"""Port clearing: the /proc parser on literal text, then real sockets on 127.0.0.1."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.smoke.ports import (
    PortBusy,
    format_table,
    free_port,
    holders,
    parse_proc_net_tcp,
    read_sockets,
    wait_port_clear,
)

# A listener on 127.0.0.1:7771, an accepted connection, the client side of another
# connection to 7771, and a TIME_WAIT left by the server side.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1E5B 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1
   1: 0100007F:1E5B 0100007F:D1F2 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1
   2: 0100007F:D1F4 0100007F:1E5B 01 00000000:00000000 00:00000000 00000000  1000        0 4444 1
   3: 0100007F:1E5B 0100007F:D1F0 06 00000000:00000000 03:00001770 00000000     0        0 0 3
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue
   0: 00000000000000000000000000000000:1E5B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5151 1
   1: 0000000000000000FFFF00000100007F:1E5C 0000000000000000FFFF00000100007F:A000 06 00000000:00000000 00:00000000 00000000     0        0 0 1
"""  # noqa: E501


def test_parse_ipv4_states_and_ports() -> None:
    socks = parse_proc_net_tcp(TCP, byteorder="little")
    assert [(s.state, s.endpoint(), s.endpoint(remote=True), s.inode) for s in socks] == [
        ("LISTEN", "127.0.0.1:7771", "0.0.0.0:0", 4242),
        ("ESTABLISHED", "127.0.0.1:7771", "127.0.0.1:53746", 4343),
        ("ESTABLISHED", "127.0.0.1:53748", "127.0.0.1:7771", 4444),
        ("TIME_WAIT", "127.0.0.1:7771", "127.0.0.1:53744", 0),
    ]
    # the client side of a connection to 7771 does not stop a bind of 7771
    assert [s.inode for s in holders(7771, socks)] == [4242, 4343, 0]


def test_parse_ipv6_and_mapped_ipv4() -> None:
    socks = parse_proc_net_tcp(TCP6, byteorder="little")
    assert socks[0].endpoint() == "[::]:7771" and socks[0].state == "LISTEN"
    assert socks[1].endpoint() == "127.0.0.1:7772" and socks[1].state == "TIME_WAIT"


def test_table_names_owner_or_kernel() -> None:
    socks = holders(7771, parse_proc_net_tcp(TCP, byteorder="little"))
    table = format_table(socks, {4242: "pid 12 (llama-server)"})
    lines = table.splitlines()
    assert lines[0].split() == ["STATE", "LOCAL", "REMOTE", "OWNER"]
    assert lines[1].split()[:3] == ["LISTEN", "127.0.0.1:7771", "0.0.0.0:0"]
    assert lines[1].endswith("pid 12 (llama-server)")
    assert lines[2].endswith("uid 1000, inode 4343")
    assert lines[3].endswith("kernel (no process)")


def test_wait_times_out_with_a_fake_clock(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP)
    now = [0.0]
    naps: list[float] = []

    def nap(s: float) -> None:
        naps.append(s)
        now[0] += s

    with pytest.raises(PortBusy) as err:
        wait_port_clear(7771, 1.0, 0.3, proc=tmp_path, clock=lambda: now[0], sleep=nap)
    assert naps == [0.3, 0.3, 0.3, pytest.approx(0.1)]  # never sleeps past the deadline
    assert "LISTEN" in str(err.value) and "TIME_WAIT" in str(err.value)
    assert len(err.value.sockets) == 3
    assert wait_port_clear(7772, 1.0, proc=tmp_path, clock=lambda: 0.0) == 0.0


# ---- real sockets ----------------------------------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s
    s.close()


@pytest.mark.integration
def test_listener_makes_it_wait_then_fail_with_the_table(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(PortBusy) as err:
        wait_port_clear(port, 0.5, 0.1)
    assert time.monotonic() - start >= 0.5
    msg = str(err.value)
    assert f"port {port} is still in use after" in msg
    assert re.search(rf"^  LISTEN +127\.0\.0\.1:{port} +0\.0\.0\.0:0 ", msg, re.M)
    assert f"pid {os.getpid()} (" in msg  # the owner: this test process
    assert "stop what holds it" in msg and err.value.return_code == 13


@pytest.mark.integration
def test_closing_the_listener_clears_the_wait(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    threading.Timer(0.3, listener.close).start()
    waited = wait_port_clear(port, 2.0, 0.05)
    assert 0.25 <= waited < 2.0
    assert holders(port, read_sockets()) == []


def _state(port: int) -> list[str]:
    return [s.state for s in holders(port, read_sockets())]


@pytest.mark.integration
def test_time_wait_from_a_server_side_close_is_reported() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = server.accept()
    accepted.close()  # the server closes first: its side will end in TIME_WAIT
    client.close()
    server.close()
    deadline = time.monotonic() + 1.0
    while _state(port) != ["TIME_WAIT"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _state(port) == ["TIME_WAIT"]
    # TIME_WAIT lasts 60 s on Linux: a 1 s wait must report it, owned by the kernel
    with pytest.raises(PortBusy) as err:
        wait_port_clear(port, 1.0, 0.2)
    assert re.search(rf"^  TIME_WAIT +127\.0\.0\.1:{port} ", str(err.value), re.M)
    assert "kernel (no process)" in str(err.value)
    assert "go by themselves within 60 s" in str(err.value)
    assert "stop what holds it" not in str(err.value)


@pytest.mark.integration
def test_free_port_is_bindable() -> None:
    port = free_port()
    assert wait_port_clear(port, 0.1) < 0.1
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
