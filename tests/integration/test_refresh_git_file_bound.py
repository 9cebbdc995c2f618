"""refresh-digests --kind payloads when the Hub's tree says a file kept in git (no lfs entry)
is huge: the FAKE Hub (tests/integration/fake_hub.py) on 127.0.0.1 lists config.json with
2**62 bytes and serves it as a 200 of zeros with no length (it stops after STOP_AFTER bytes,
so a fetch without a bound fails here instead of filling the disk). Before, any size under
2**63 was taken and the file fetched into a temporary folder to hash it, its zeros written
until the disk was full; now a git-kept file past MAX_GIT_FILE (64 MiB) is one error naming
the entry, its size and HF_ENDPOINT, and nothing is fetched."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.fake_hub import FakeHub, Repo, RepoFile, _Handler
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
COMMIT = "b" * 40
CLAIM = 2**62
STOP_AFTER = 64 << 20


class _Endless(_Handler):
    """FAKE: every file is a 200 of zeros, no Content-Length, closed after STOP_AFTER."""

    def _file(self, repo: Repo, f: RepoFile, head: bool) -> None:
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = bytes(1 << 20)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(0 if head else STOP_AFTER // len(chunk)):
                self.wfile.write(chunk)


def test_a_huge_file_kept_in_git_is_refused_before_it_is_fetched(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes(b"{}\n")
    hub = FakeHub()
    hub.RequestHandlerClass = _Endless
    repo = hub.add("org/model", model, COMMIT)
    repo.files["config.json"] = dataclasses.replace(repo.files["config.json"], size=CLAIM)
    document = doc()
    document["payloads"] = {"snap": {"repository": "org/model", "revision": "a" * 40,
                                     "role": "model", "files": {"config.json": {}}}}  # fmt: skip
    lock = make_repo(tmp_path / "checkout", document)
    before = lock.read_text()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_TOKEN_PATH": "/nonexistent",
           "HF_ENDPOINT": hub.url, "TMPDIR": str(tmp), "HOME": str(tmp_path / "home"),
           "LOCKPIPE_CACHE": str(tmp_path / "cache")}  # fmt: skip
    env.pop("HF_TOKEN", None)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock),
             "--kind", "payloads"],
            cwd=REPO, text=True, capture_output=True, check=False, env=env, timeout=90,
        )  # fmt: skip
    finally:
        hub.stop()
    assert run.returncode == 8, run.stderr
    assert "payloads.snap: the Hub's tree lists 'config.json' as kept in git" in run.stderr
    assert f"with {CLAIM:,} bytes, more than the {64 << 20:,} bytes" in run.stderr
    assert "HF_ENDPOINT" in run.stderr and "Traceback" not in run.stderr
    assert not [p for p in hub.requests if "/resolve/" in p]  # nothing was fetched
    assert lock.read_text() == before
