"""refresh-digests against the real loopback registry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import RegistryError
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def refresh(lock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipeline", "refresh-digests", "--lock", str(lock), *args],
        cwd=REPO, text=True, capture_output=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def test_a_moved_tag_is_written_with_its_origin_and_a_current_fingerprint(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, digest = busybox_base
    document = doc()
    document["bases"]["busybox"] = {"ref": ref, "digest": "sha256:" + "0" * 64}
    lock = make_repo(tmp_path, document)

    check = refresh(lock, "--check")
    assert check.returncode == 3 and "1 base digest(s) moved" in check.stderr

    result = refresh(lock)
    assert result.returncode == 0, result.stderr
    assert f"bases.busybox: {ref} sha256:{'0' * 64} -> {digest}" in result.stderr
    written = json.loads(lock.read_text())
    assert written["bases"]["busybox"]["digest"] == digest
    assert written["bases"]["busybox"]["origin"]["source"].startswith("registry 127.0.0.1:5000")
    assert refresh(lock, "--check").returncode == 0
    lock_check = subprocess.run(
        [sys.executable, "-m", "pipeline", "lock", "--check", "--lock", str(lock)],
        cwd=REPO, capture_output=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert lock_check.returncode == 0


def test_a_dead_registry_names_the_ref_and_writes_nothing(tmp_path: Path) -> None:
    document = doc()
    document["bases"]["busybox"]["ref"] = "127.0.0.1:9/lockpipe-test/busybox:1"
    lock = make_repo(tmp_path, document)
    before = lock.read_text()
    result = refresh(lock)
    assert result.returncode == RegistryError.return_code  # 18: the one table
    assert (
        "bases.busybox: 127.0.0.1:9/lockpipe-test/busybox:1: registry 127.0.0.1:9 unreachable"
        in (result.stderr)
    )
    assert "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert lock.read_text() == before


def test_a_refresh_with_nothing_moved_writes_nothing(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, digest = busybox_base
    document = doc()
    document["bases"]["busybox"] = {
        "ref": ref, "digest": digest,
        "origin": {"source": "pushed by the test", "seen": "2026-01-01", "note": "keep me"},
    }  # fmt: skip
    lock = make_repo(tmp_path, document)
    before = lock.read_text()
    result = refresh(lock)
    assert result.returncode == 0, result.stderr
    assert "every base digest is current; nothing written" in result.stderr
    assert lock.read_text() == before
