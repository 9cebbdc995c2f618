"""The quadlet ``.container`` of one serving target: pure, from resolved inputs.

Everything the host decides (the image's entrypoint and LD_LIBRARY_PATH, the GPU nodes and
driver libraries, podman's version) arrives resolved in :class:`DeployInputs`, so the
same inputs always give the same bytes (the golden files under tests/data/deploy).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lockpipe.deploy import keys
from lockpipe.deploy.unit import (
    Entry,
    Unit,
    label,
    quote_arg,
    quote_args,
    sections,
    verbatim,
)
from lockpipe.errors import DeployError
from lockpipe.smoke.gpu import GpuAttach
from lockpipe.smoke.runner import STORE_IN_CONTAINER

DEFAULT_BIND = "127.0.0.1"
DEFAULT_START_TIMEOUT = 900  # seconds: a 27B GGUF or a vLLM compile + CUDA graphs, from cold
DEFAULT_PORT_WAIT = 90  # seconds ExecStartPre waits for the port's old sockets to go
# ExecStartPre's port wait, run by the host's /bin/sh: until no TCP socket is bound to
# port $1 (listener, accepted connection, TIME_WAIT; the local address column of
# /proc/net/tcp{,6}, as lockpipe.smoke.ports reads it), at most $2 seconds. Nothing of
# lockpipe's runs when the unit starts, so a rebuilt or removed venv cannot break it.
WAIT_PORT_SH = (
    'hex=$(printf %04X "$1"); n=0; '
    'while grep -Eq "^ *[0-9]+: [0-9A-F]+:$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null; do '
    '[ "$n" -lt "$2" ] || { echo "port $1 still in use after $2 s (ss -tanp sport = :$1)" >&2; '
    "exit 1; }; n=$((n + 1)); sleep 1; done"
)


@dataclass(frozen=True, kw_only=True)
class Health:
    cmd: str
    interval: str = "30s"
    timeout: str = "10s"
    retries: int = 3
    start_period: str = "600s"  # model load: failures inside it do not count


@dataclass(frozen=True, kw_only=True)
class DeployInputs:
    name: str  # unit and container name
    description: str
    image: str  # pinned: a bare image ID or ref@sha256:digest, never a tag
    provenance: tuple[str, ...]  # header comment lines: where the pin came from
    command: tuple[str, ...]  # the serve command, payload placeholders already resolved
    image_entrypoint: tuple[str, ...] | None  # None: not known, so always set Entrypoint
    port: int
    podman: keys.Version
    health: Health
    bind: str = DEFAULT_BIND
    store: Path | None = None  # the payload store, mounted read-only at /store
    mounts: tuple[Entry, ...] = ()  # Mount= of each payload's .artifact unit (deploy.artifact)
    gpu: GpuAttach | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    start_timeout: int = DEFAULT_START_TIMEOUT
    port_wait: int = DEFAULT_PORT_WAIT


def split_entrypoint(
    command: Sequence[str], image_entrypoint: Sequence[str] | None
) -> tuple[str | None, tuple[str, ...]]:
    """(Entrypoint to set or None, Exec args): keep the image's entrypoint when the command
    starts with it (same words, or the same program by basename), as the smoke run does."""
    if image_entrypoint:
        ep = tuple(image_entrypoint)
        if tuple(command[: len(ep)]) == ep:
            return None, tuple(command[len(ep) :])
        if len(ep) == 1 and posixpath.basename(ep[0]) == posixpath.basename(command[0]):
            return None, tuple(command[1:])
    return command[0], tuple(command[1:])


def health_for(runtime: str, port: int) -> str:
    """The default HealthCmd, run inside the container with /bin/sh (an assumption about the
    image, which cannot be checked offline: pass --health-cmd where it does not hold).

    vLLM: the vllm/vllm-openai base installs curl. llama.cpp: our runtime images are
    CUDA/Ubuntu without curl or wget (the build turns LLAMA_CURL off), so bash's /dev/tcp.
    """
    url = f"http://127.0.0.1:{port}/health"
    if runtime == "llama.cpp":
        return (f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && printf \"GET /health "
                "HTTP/1.0\\r\\n\\r\\n\" >&3 && head -n1 <&3 | grep -q \" 200\"'")  # fmt: skip
    return f"curl -fsS -o /dev/null {url}"


def _host(bind: str) -> str:
    """The host part of PublishPort=: an IPv6 address in brackets."""
    return f"[{bind}]" if ":" in bind else bind


def _store_volume(store: Path) -> str:
    """Volume= of the payload store, refused where the unit cannot carry its path intact:
    podman's --volume, which quadlet makes of it, ends the host path at the first ':' (the
    smoke run's --mount takes one), so podman would refuse the unit at every start; and
    quadlet copies the path as it is into RequiresMountsFor=, which systemd splits into
    words at whitespace and reads quotes and backslashes in (``/srv/my store``: 'path is
    not absolute, ignoring: store'), so the store's mount would not be waited for."""
    text = str(store)
    if ":" in text:
        why = ("has a ':' in its path, which the unit's Volume= (podman --volume) reads as the "
               "end of the host path, so podman would refuse the unit at every start")  # fmt: skip
    elif any(c.isspace() or c in "\"'\\$" for c in text):
        why = ("has whitespace, a quote, a backslash or a '$' in its path, which quadlet "
               "copies into RequiresMountsFor= as it is (a '$' as '$$', which systemd does "
               "not undo there) and systemd splits at whitespace, so the unit would not "
               "wait for the store's mount")  # fmt: skip
    else:
        return verbatim(f"{store}:{STORE_IN_CONTAINER}:ro", "--store")
    raise DeployError(
        f"the payload store {store} {why}; move the store to a folder whose path has none, "
        "and pass that as --store"
    )


def _env_line(name: str, value: str) -> str:
    return quote_arg(f"{name}={value}")


def container_entries(i: DeployInputs) -> list[Entry]:
    # No command (an external image): its own entrypoint and command run untouched.
    entry, args = split_entrypoint(i.command, i.image_entrypoint) if i.command else (None, ())
    out: list[Entry] = [("Image", verbatim(i.image, "--image")),
                        ("ContainerName", verbatim(i.name, "the target name"))]  # fmt: skip
    if entry is not None:
        if i.podman >= (keys.since("Entrypoint") or (5, 0)):
            out.append(("Entrypoint", verbatim(entry, f"targets.{i.name}.serve.command[0]")))
        else:  # quadlet before 5.0 has no Entrypoint=
            out.append(("PodmanArgs", quote_arg(f"--entrypoint={entry}")))
    if args:
        out.append(("Exec", quote_args(args, f"targets.{i.name}.serve.command")))
    out.append(("PublishPort", verbatim(f"{_host(i.bind)}:{i.port}:{i.port}", "--bind")))
    if i.store is not None:
        out.append(("Volume", _store_volume(i.store)))
    out += list(i.mounts)
    if i.gpu is not None:
        out += [("AddDevice", verbatim(d, "a GPU device")) for d in i.gpu.devices]
        out += [("Volume", verbatim(f"{m.source}:{m.target}:ro", "a GPU driver file"))
                for m in i.gpu.mounts]  # fmt: skip
    env = {**i.env, **(i.gpu.env if i.gpu is not None else {})}
    out += [("Environment", _env_line(k, v)) for k, v in sorted(env.items())]
    h = i.health
    health = [("HealthCmd", h.cmd), ("HealthInterval", h.interval), ("HealthTimeout", h.timeout),
              ("HealthRetries", str(h.retries)), ("HealthStartPeriod", h.start_period)]  # fmt: skip
    if i.podman >= (keys.since("HealthCmd") or (4, 5)):
        out += [(k, verbatim(v, "--health-cmd" if k == "HealthCmd" else k)) for k, v in health]
    else:  # quadlet 4.4 has no Health* keys: the same podman run flags
        flag = {"StartPeriod": "start-period"}
        flags = [f"--health-{flag.get(k[6:], k[6:].lower())}={v}" for k, v in health]
        out.append(("PodmanArgs", quote_args(flags)))
    if i.podman >= keys.VALUE_SINCE[("Notify", "healthy")]:
        # The unit turns active only when /health answers: TimeoutStartSec covers the load.
        out.append(("Notify", "healthy"))
    return out


def render_quadlet(i: DeployInputs) -> Unit:
    """The ``.container`` unit; validated against podman ``i.podman``'s quadlet keys."""
    container = container_entries(i)
    keys.check(container, i.podman, f"{i.name}.container")
    wait = quote_args(["/bin/sh", "-c", WAIT_PORT_SH, "wait-port", str(i.port), str(i.port_wait)])
    return Unit(
        header=i.provenance,
        sections=sections(
            ("Unit", [("Description", label(i.description)), ("After", "network-online.target")]),
            ("Container", container),
            (
                "Service",
                [
                    ("ExecStartPre", wait),
                    ("Restart", "on-failure"),
                    ("RestartSec", "10"),
                    ("TimeoutStartSec", str(i.start_timeout + i.port_wait)),
                ],
            ),
            ("Install", [("WantedBy", "default.target")]),
        ),
    )
