"""The registry the demo's bases go to: one that answers, or one started for the run.

``127.0.0.1:5000`` is used when an OCI registry answers there (``.ci/start-services``
starts one); otherwise Debian's ``docker-registry`` is started on it for the run, its
storage under the demo's folder, so the next run finds the same bases. ``--registry
HOST:PORT`` names another, which must answer.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from lockpipe import cmd
from lockpipe.demo.plan import REGISTRY
from lockpipe.errors import RegistryError
from lockpipe.http import NoAnswer, Session, follow
from lockpipe.log import echo

CONFIG = """\
version: 0.1
storage:
  filesystem:
    rootdirectory: {root}
http:
  addr: {addr}
"""


def status(
    method: str, url: str, timeout: float, headers: dict[str, str] | None = None
) -> tuple[int, requests.structures.CaseInsensitiveDict[str]] | NoAnswer:
    """The status and headers ``url`` answers (its body left unread), or the
    :class:`~lockpipe.http.NoAnswer` that says why none came: through lockpipe's HTTP
    rules, so an answer that trickles or never ends is bounded, and ``~/.netrc`` sends
    nothing."""
    with Session() as session:
        try:
            answer = follow(session, method, url, origin=url, auth=None, headers=headers,
                            timeout=timeout, stream=True)  # fmt: skip
        except NoAnswer as exc:
            return exc
        answer.response.close()
        return answer.status, answer.response.headers


def answers(registry: str) -> bool:
    """Whether an OCI registry answers ``/v2/`` at ``registry`` over plain HTTP."""
    got = status("GET", f"http://{registry}/v2/", 3)
    return not isinstance(got, NoAnswer) and got[0] in (200, 401)


def _port_taken(registry: str) -> bool:
    got = status("GET", f"http://{registry}/", 3)
    return not (isinstance(got, NoAnswer) and isinstance(got.cause, requests.ConnectionError))


@contextlib.contextmanager
def demo_registry(requested: str | None, work: Path) -> Iterator[str]:
    """The registry to push to (``HOST:PORT``); one this started is stopped on exit."""
    if requested is not None:
        if not answers(requested):
            raise RegistryError(f"--registry {requested}: no OCI registry answers at "
                                f"http://{requested}/v2/; start it, or leave --registry out "
                                f"to use {REGISTRY}")  # fmt: skip
        yield requested
        return
    if answers(REGISTRY):
        yield REGISTRY
        return
    if _port_taken(REGISTRY):
        raise RegistryError(f"{REGISTRY} is taken by something that is not an OCI registry: "
                            "stop it, or pass --registry HOST:PORT")  # fmt: skip
    binary = shutil.which("docker-registry")
    if binary is None:
        raise RegistryError(f"no OCI registry answers at {REGISTRY} and docker-registry is not "
                            "installed: apt-get install docker-registry, or pass --registry "
                            "HOST:PORT")  # fmt: skip
    with _started(binary, work / "registry") as registry:
        yield registry


@contextlib.contextmanager
def _started(binary: str, root: Path) -> Iterator[str]:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(CONFIG.format(root=root / "storage", addr=REGISTRY))
    log = root / "registry.log"
    echo(f"starting docker-registry on {REGISTRY} for this run (storage {root}, log {log})")
    with log.open("a") as out:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=out, stderr=out,
                                stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)  # fmt: skip
    try:
        for _ in range(100):
            if answers(REGISTRY):
                break
            if proc.poll() is not None:
                raise RegistryError(f"docker-registry exited with {proc.returncode} before it "
                                    f"answered on {REGISTRY}; see {log}")  # fmt: skip
            time.sleep(0.1)
        else:
            raise RegistryError(f"docker-registry did not answer on {REGISTRY} in 10 s; see {log}")
        yield REGISTRY
    finally:
        cmd.kill_group(proc)  # SIGINT, SIGTERM, SIGKILL: it never outlives the run
