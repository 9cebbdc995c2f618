"""A failing build is blamed on a lock's base only when pulling that base failed.

Every engine echoes the FROM line, the base's pinned digest in it, before it runs a
step: a RUN that fails after it must be reported as the build's own failure, not as
"the digest is wrong" (which sent users to edit a correct lock). Real engines, the
loopback registry's busybox base; a base pinned to a digest the registry does not
hold is still blamed on its lock entry.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import BuildError
from tests.lockfactory import make_repo, on_base, usable_engine

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
FAILING_RUN = "ARG BASE\nFROM ${BASE}\nRUN echo step-ran; exit 7\n"
ENGINES = [pytest.param(name, marks=getattr(pytest.mark, name))
           for name in ("buildah", "podman", "docker")]  # fmt: skip


def _build(
    tmp_path: Path, engine: str, document: dict[str, Any], recipe: str
) -> subprocess.CompletedProcess[str]:
    usable_engine(engine)
    lock = make_repo(tmp_path, document, recipe)
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "build", "app", "--engine", engine, "--lock",
         str(lock), "--state", str(tmp_path / "state"), "--force"],
        env=dict(os.environ), capture_output=True, text=True, cwd=REPO, timeout=300,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize("engine", ENGINES)
def test_a_failing_run_step_is_not_blamed_on_the_base(
    engine: str, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    document = on_base(busybox_base, f"localhost/lockpipe-test/blame-{engine}:1")
    out = _build(tmp_path, engine, document, FAILING_RUN)
    assert out.returncode == BuildError.return_code, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "bases.busybox" not in out.stderr, out.stderr
    assert "the digest is wrong" not in out.stderr, out.stderr
    assert "step-ran" in out.stderr, out.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_a_base_the_registry_does_not_hold_is_blamed_on_its_lock_entry(
    engine: str, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    gone = (busybox_base[0], "sha256:" + "0" * 63 + "1")
    document = on_base(gone, f"localhost/lockpipe-test/blame-{engine}:1")
    out = _build(tmp_path, engine, document, FAILING_RUN)
    assert out.returncode == BuildError.return_code, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "bases.busybox: the engine could not pull" in out.stderr, out.stderr
    assert "step-ran" not in out.stderr, out.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_a_base_whose_registry_refuses_connections_says_so(
    engine: str, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    with socket.socket() as held:  # a port bound and never listened on: connection refused
        held.bind(("127.0.0.1", 0))
        ref = f"127.0.0.1:{held.getsockname()[1]}/lockpipe-test/busybox:1"
        unheld = "sha256:" + "0" * 63 + "2"  # held by no storage here: the engine must pull it
        document = on_base((ref, unheld), f"localhost/lockpipe-test/blame-{engine}:1")
        out = _build(tmp_path, engine, document, FAILING_RUN)
    assert out.returncode == BuildError.return_code, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert f"bases.busybox: the registry of {ref}@" in out.stderr, out.stderr
    assert "cannot be reached from this host" in out.stderr, out.stderr
