"""refresh-digests on Hugging Face payloads against the FAKE Hub (tests/integration/fake_hub.py),
and on pip against a FAKE package index: both real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import DriftError, FetchError
from tests.integration.fake_hub import FakeHub, git_blob_id
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
OLD, NEW = "a" * 40, "b" * 40
HF_TOKEN = "hf_fake_gated_token"
CONFIG = b'{"model_type": "test"}\n'


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[FakeHub]:
    server = FakeHub()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes(CONFIG)
    (model / "model.safetensors").write_bytes(b"w" * 2000)
    (model / "m.gguf").write_bytes(b"g" * 1000)
    server.add("org/model", model, NEW, lfs=("m.gguf",)).date = "2026-11-20T00:00:00.000Z"
    server.past[("org/model", OLD)] = "2026-11-01T00:00:00.000Z"
    yield server
    server.stop()


def _lock(tmp_path: Path, **more: Any) -> Path:
    document = doc()
    document["payloads"] = {
        "snap": {"repository": "org/model", "revision": OLD, "role": "model",
                 "files": {"config.json": {}, "model.safetensors": {
                     "size": 1000, "sha256": hashlib.sha256(b"v" * 1000).hexdigest()}}},
        "one": {"repository": "org/model", "revision": NEW, "role": "model",
                "filename": "m.gguf", "format": "gguf"},
        **more,
    }  # fmt: skip
    return make_repo(tmp_path / "checkout", document)


def refresh(lock: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), "HF_TOKEN_PATH": "/nonexistent", **env}
    if "HF_TOKEN" not in env:
        full.pop("HF_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock), *args],
        cwd=REPO, text=True, capture_output=True, check=False, env=full,
    )  # fmt: skip


def test_a_moved_branch_pins_the_revision_and_every_named_file(
    hub: FakeHub, tmp_path: Path
) -> None:
    lock = _lock(tmp_path)
    md = tmp_path / "r.md"
    result = refresh(lock, "--kind", "payloads", "--report-md", str(md), HF_ENDPOINT=hub.url)
    assert result.returncode == 0, result.stderr
    payloads = json.loads(lock.read_text())["payloads"]
    snap = payloads["snap"]
    assert snap["revision"] == NEW
    assert snap["files"] == {
        # kept in git: its git id from the tree, its sha256 from the bytes (for registries)
        "config.json": {
            "size": len(CONFIG),
            "git_sha1": git_blob_id(CONFIG),
            "sha256": hashlib.sha256(CONFIG).hexdigest(),
        },
        "model.safetensors": {"size": 2000, "sha256": hashlib.sha256(b"w" * 2000).hexdigest()},
    }
    # the single file was at the right revision already: its unpinned size and sha256 are pinned
    one = payloads["one"]
    assert (one["size"], one["sha256"]) == (1000, hashlib.sha256(b"g" * 1000).hexdigest())
    report = md.read_text()
    assert f"[commit {NEW[:12]}]({hub.url}/org/model/commit/{NEW})" in report
    assert "- pinned revision: 2026-11-01T00:00:00.000Z" in report
    assert "(size-jump): model.safetensors: size 1,000 -\\> 2,000 B (+100.0 %)" in report
    assert "backwards" not in report


def test_a_branch_reset_to_an_older_commit_is_warned_about(hub: FakeHub, tmp_path: Path) -> None:
    hub.past[("org/model", OLD)] = "2026-12-01T00:00:00.000Z"  # the pinned one is newer
    lock = _lock(tmp_path)
    md = tmp_path / "r.md"
    result = refresh(lock, "snap", "--report-md", str(md), HF_ENDPOINT=hub.url)
    assert result.returncode == 0, result.stderr
    assert "(backwards): revision bbbbbbbbbbbb" in md.read_text()


@pytest.mark.parametrize(
    ("new", "pinned"),
    [("\ud800", "2026-11-01T00:00:00.000Z"), ("2026-11-20T00:00:00.000Z", "\udcff"),
     ("2026-11-20T00:00:00.000Z", "~ not a date")],
)  # fmt: skip
def test_a_last_modified_that_is_not_a_date_reads_as_unknown(
    new: str, pinned: str, hub: FakeHub, tmp_path: Path
) -> None:
    """A lone surrogate (JSON's "\\ud800") as the Hub's lastModified crashed the report
    with UnicodeEncodeError's traceback when it was written (issue 18 review), and free
    text compared as a date ("~" sorts after "2"): a revision "reset" backwards. A date is
    for the reviewer, never a pin: one that is not an ISO 8601 time reads as unknown."""
    hub.repos["org/model"].date = new
    hub.past[("org/model", OLD)] = pinned
    lock = _lock(tmp_path)
    js = tmp_path / "r.json"
    result = refresh(lock, "--kind", "payloads", "--report-md", "-", "--report-json", str(js),
                     HF_ENDPOINT=hub.url)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    snap = [c for c in json.loads(js.read_text())["changes"] if c["name"] == "snap"]
    dates = dict(snap[0]["dates"])
    assert "unknown" in dates.values() and set(dates.values()) <= {new, pinned, "unknown"}
    assert f"- {'new' if new != '2026-11-20T00:00:00.000Z' else 'pinned'} revision: unknown" in (
        result.stdout
    )
    assert "backwards" not in result.stdout
    assert json.loads(lock.read_text())["payloads"]["snap"]["revision"] == NEW


def test_a_gated_repository_needs_hf_token_and_says_so(hub: FakeHub, tmp_path: Path) -> None:
    hub.gated["org/model"] = HF_TOKEN
    lock = _lock(tmp_path)
    before = lock.read_bytes()
    refused = refresh(lock, "--kind", "payloads", HF_ENDPOINT=hub.url)
    assert refused.returncode == FetchError.return_code, refused.stderr
    assert "gated or private: set HF_TOKEN and accept the repository's licence" in refused.stderr
    assert "Traceback" not in refused.stderr and lock.read_bytes() == before
    allowed = refresh(lock, "--kind", "payloads", HF_ENDPOINT=hub.url, HF_TOKEN=HF_TOKEN)
    assert allowed.returncode == 0, allowed.stderr
    assert HF_TOKEN not in allowed.stderr + allowed.stdout + lock.read_text()


def test_hf_hub_offline_asks_the_hub_nothing_and_says_why(hub: FakeHub, tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    before = lock.read_bytes()
    result = refresh(lock, "--kind", "payloads", HF_ENDPOINT=hub.url, HF_HUB_OFFLINE="1")
    assert result.returncode == FetchError.return_code, result.stderr
    assert "HF_HUB_OFFLINE is set, so the Hub at" in result.stderr and "unset" in result.stderr
    assert hub.requests == [] and lock.read_bytes() == before  # no network at all
    assert "Traceback" not in result.stderr


def test_a_file_the_revision_lacks_fails_and_writes_nothing(hub: FakeHub, tmp_path: Path) -> None:
    lock = _lock(tmp_path, gone={"repository": "org/model", "revision": NEW, "role": "model",
                                 "files": {"tokenizer.json": {}}})  # fmt: skip
    before = lock.read_bytes()
    result = refresh(lock, "--kind", "payloads", HF_ENDPOINT=hub.url)
    assert result.returncode == FetchError.return_code, result.stderr
    assert "payloads.gone: tokenizer.json not in org/model at main" in result.stderr
    assert lock.read_bytes() == before


def test_every_page_of_a_paged_tree_listing_is_read(hub: FakeHub, tmp_path: Path) -> None:
    hub.page_size = 1  # three files: three pages, the pinned ones on the later ones
    lock = _lock(tmp_path)
    result = refresh(lock, "--kind", "payloads", HF_ENDPOINT=hub.url)
    assert result.returncode == 0, result.stderr
    snap = json.loads(lock.read_text())["payloads"]["snap"]
    assert set(snap["files"]) == {"config.json", "model.safetensors"}
    pages = [r for r in hub.requests if r == f"/api/models/org/model/tree/{NEW}"]
    assert len(pages) >= 2 * 3  # each payload read all three pages


def test_a_payload_follows_its_own_branch_not_main(hub: FakeHub, tmp_path: Path) -> None:
    hub.branches["org/model"] = {"q4-release"}
    lock = _lock(tmp_path)
    document = json.loads(lock.read_text())
    document["payloads"]["snap"]["follow"] = "q4-release"
    lock.write_text(json.dumps(document))
    md = tmp_path / "r.md"
    result = refresh(lock, "snap", "--report-md", str(md), HF_ENDPOINT=hub.url)
    assert result.returncode == 0, result.stderr
    revisions = [r for r in hub.requests if "/revision/" in r]
    assert "/api/models/org/model/revision/q4-release" in revisions
    assert "/api/models/org/model/revision/main" not in revisions
    assert "org/model@q4-release" in md.read_text()
    entry = json.loads(lock.read_text())["payloads"]["snap"]
    assert (entry["follow"], entry["revision"]) == ("q4-release", NEW)
    # a branch the Hub does not have is an error naming it, never a silent move to main
    document = json.loads(lock.read_text())
    document["payloads"]["snap"]["follow"] = "gone-branch"
    lock.write_text(json.dumps(document))
    before = lock.read_bytes()
    missing = refresh(lock, "snap", HF_ENDPOINT=hub.url)
    assert missing.returncode == FetchError.return_code, missing.stderr
    assert "revision/gone-branch not found (404)" in missing.stderr
    assert lock.read_bytes() == before


class FakePyPI(ThreadingHTTPServer):
    """A FAKE package index on 127.0.0.1: /pypi/{name}/json with info.version, as PyPI's."""

    daemon_threads = True

    def __init__(self, latest: dict[str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _PyPIHandler)
        self.latest = latest
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _PyPIHandler(BaseHTTPRequestHandler):
    server: FakePyPI

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        name = self.path.removeprefix("/pypi/").removesuffix("/json")
        found = name in self.server.latest
        body = json.dumps({"info": {"version": self.server.latest[name]}} if found else {}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _pip_checkout(tmp_path: Path, requirements: str) -> Path:
    """A checkout whose target app installs pip.app, images/app/requirements.txt; its lock."""
    document = doc()
    document["pip"] = {"app": {"file": "images/app/requirements.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["app"]
    ctx = tmp_path / "checkout" / "images" / "app"
    ctx.mkdir(parents=True)
    (ctx / "requirements.txt").write_text(requirements)
    return make_repo(tmp_path / "checkout", document)


def test_pip_reports_newer_releases_and_never_moves_them(tmp_path: Path) -> None:
    index = FakePyPI({"requests": "2.32.3", "idna": "3.7"})
    try:
        lock = _pip_checkout(
            tmp_path,
            f"requests==2.0.0 --hash=sha256:{'1' * 64}\nidna==3.7 --hash=sha256:{'2' * 64}\n",
        )
        ctx = tmp_path / "checkout" / "images" / "app"
        before = lock.read_bytes()
        host, port = index.server_address[:2]
        js = tmp_path / "r.json"
        index_url = f"http://{host!s}:{port}"
        check = refresh(lock, "--kind", "pip", "--check", "--report-json", str(js),
                        LOCKPIPE_PYPI=index_url)  # fmt: skip
        assert check.returncode == 0, check.stderr  # newer releases are reported, not drift
        assert not js.exists()  # --check writes nothing, not even its report
        result = refresh(lock, "--kind", "pip", "--dry-run", "--report-json", str(js),
                         LOCKPIPE_PYPI=index_url)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "pip.app: requests 2.0.0 pinned, 2.32.3 released (not moved)" in result.stdout
        (newer,) = json.loads(js.read_text())["newer"]
        assert (newer["package"], newer["latest"]) == ("requests", "2.32.3")
        assert lock.read_bytes() == before
        # a requirements file edited after the lock is drift: --check fails, nothing written
        req = ctx / "requirements.txt"
        req.write_text(req.read_text() + f"six==1.16.0 --hash=sha256:{'3' * 64}\n")
        drift = refresh(lock, "--kind", "pip", "--check", LOCKPIPE_PYPI=index_url)
        assert drift.returncode == DriftError.return_code, drift.stderr
        assert "pip.app: images/app/requirements.txt has sha256" in drift.stderr
        assert "run nox -s lock first" in drift.stderr and "Traceback" not in drift.stderr
        assert lock.read_bytes() == before
    finally:
        index.shutdown()
        index.server_close()


def test_a_latest_release_too_long_to_be_a_version_is_no_traceback(tmp_path: Path) -> None:
    """The index's info.version of 5000 digits: packaging's int() raised a plain ValueError
    (past 4300 digits), a traceback; it is compared as a string, as any non-version is."""
    index = FakePyPI({"requests": "9" * 5000})
    try:
        lock = _pip_checkout(tmp_path, f"requests==2.0.0 --hash=sha256:{'1' * 64}\n")
        host, port = index.server_address[:2]
        js = tmp_path / "r.json"
        result = refresh(lock, "--kind", "pip", "--dry-run", "--report-json", str(js),
                         LOCKPIPE_PYPI=f"http://{host!s}:{port}")  # fmt: skip
    finally:
        index.shutdown()
        index.server_close()
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    (newer,) = json.loads(js.read_text())["newer"]
    assert (newer["package"], newer["pinned"]) == ("requests", "2.0.0")
