"""Runs that share a store (issue 18, items 7 and 8): locks per blob, not per store, and
snapshot folders that hold exactly what the lock lists.

Real ``lockpipe payloads`` processes against a real HTTP server on 127.0.0.1 that
holds a download half-way until the test lets it go (so runs overlap for certain,
not by timing), and the FAKE Hub of tests/integration/fake_hub.py serving the real
all-MiniLM-L6-v2 snapshot.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.payloads.run import run_payloads
from lockpipe.payloads.store import VerifyCache, payload_path
from tests.httpfake import FakeHandler, FakeServer
from tests.integration.fake_hub import FakeHub, entry_from_tree
from tests.integration.payload_servers import entry, make_lock
from tests.integration.test_payload_snapshot import (  # noqa: F401  (fixtures)
    REPO,
    REV,
    hub,
    minilm,
    options,
    tree,
)

pytestmark = pytest.mark.integration
MiB = 1 << 20


class HoldServer(FakeServer):
    """Serves files as the Hub's resolve URLs do, honouring Range; a file named in
    ``hold`` gets all but the end of each answer's body, the rest only once ``release`` is
    set: a download that stays in progress for as long as a test needs. ``sent`` counts
    the body bytes sent per file."""

    def __init__(self) -> None:
        super().__init__(_HoldHandler)
        self.files: dict[str, bytes] = {}
        self.hold: set[str] = set()
        self.release = threading.Event()
        self.sent: Counter[str] = Counter()


class _HoldHandler(FakeHandler):
    server: HoldServer

    def do_GET(self) -> None:
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        data = self.server.files.get(name)
        if data is None:
            return self.send_bytes(404, b"")
        start, end, status, extra = 0, len(data), 200, {}
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match:
            start, status = int(match[1]), 206
            end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
            extra = {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"}
        body = data[start:end]
        self.send_response(status)
        for key, value in {**extra, "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        # all but the last 64 KiB: the client's 1 MiB reads get whole chunks before the pause
        half = max(0, len(body) - 64 * 1024) if name in self.server.hold else len(body)
        for n, part in enumerate((body[:half], body[half:])):
            if n == 1 and part:
                self.wfile.flush()
                self.server.release.wait(60)
            self.wfile.write(part)
            with self.server.lock:
                self.server.sent[name] += len(part)
        return None


@pytest.fixture
def held() -> Iterator[HoldServer]:
    server = HoldServer()
    yield server
    server.release.set()
    server.stop()


def _cli(lock: Path, store: Path, endpoint: str, *names: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HOME": str(store.parent)}
    env.pop("HF_HUB_OFFLINE", None)
    cmd = [sys.executable, "-m", "lockpipe", "payloads", "--jsonl", "--connections", "2",
           "--lock", str(lock), "--store", str(store), *names]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _in_progress(held: HoldServer, name: str, run: subprocess.Popen[str]) -> None:
    """Wait until ``run`` holds the blob's lock (it takes it before its first request) and
    the server has sent it bytes of ``name``."""
    deadline = time.monotonic() + 30
    while not held.sent[name] and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.02)
    assert held.sent[name] and run.poll() is None


def _done(out: str) -> dict[str, str]:
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {e["file"]: e["status"] for e in events if e["event"] == "done"}


def test_a_run_does_not_wait_behind_another_runs_download_of_other_blobs(
    held: HoldServer, tmp_path: Path
) -> None:
    big, have, new = os.urandom(4 * MiB), os.urandom(1 * MiB), os.urandom(256 * 1024)
    held.files = {"big.bin": big, "have.bin": have, "new.bin": new}
    lock = make_lock(tmp_path, {"big": entry(big, "big.bin"), "have": entry(have, "have.bin"),
                                "new": entry(new, "new.bin")})  # fmt: skip
    store = tmp_path / "store"
    first = _cli(lock.path, store, held.url, "have")
    assert first.wait(timeout=60) == 0, first.communicate()
    held.hold = {"big.bin"}
    slow = _cli(lock.path, store, held.url, "big")  # stays in progress until released
    _in_progress(held, "big.bin", slow)
    quick = _cli(lock.path, store, held.url, "have", "new")
    try:
        out, err = quick.communicate(timeout=60)  # the old store-wide lock: waits forever
    finally:
        held.release.set()
    assert quick.returncode == 0, err
    assert _done(out) == {"have": "cached", "new": "downloaded"}
    assert "waiting" not in out + err
    assert slow.wait(timeout=60) == 0, slow.communicate()
    for name, data in (("big", big), ("have", have), ("new", new)):
        got = hashlib.sha256(payload_path(store, lock.payloads[name]).read_bytes()).hexdigest()
        assert got == hashlib.sha256(data).hexdigest()


def test_two_runs_of_one_blob_fetch_it_once_and_the_second_says_it_waited(
    held: HoldServer, tmp_path: Path
) -> None:
    data = os.urandom(4 * MiB)
    held.files, held.hold = {"shared.bin": data}, {"shared.bin"}
    lock = make_lock(tmp_path, {"s": entry(data, "shared.bin")})
    store = tmp_path / "store"
    a = _cli(lock.path, store, held.url)
    _in_progress(held, "shared.bin", a)
    b = _cli(lock.path, store, held.url)
    assert b.stdout is not None
    first = b.stdout.readline()  # b finds the blob locked, says so, and waits
    assert f"waiting for pid {a.pid}" in first, (first, b.communicate())
    time.sleep(0.5)
    assert b.poll() is None  # still waiting, not fetching: the server saw one request only
    held.release.set()
    (out_a, err_a), (out_b, err_b) = a.communicate(timeout=60), b.communicate(timeout=60)
    assert a.returncode == 0 and b.returncode == 0, (err_a, err_b)
    assert _done(out_a) == {"s": "downloaded"} and _done(out_b) == {"s": "cached"}
    assert held.sent["shared.bin"] == len(data)  # once: b neither fetched nor wrote it
    blob = payload_path(store, lock.payloads["s"])
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == lock.payloads["s"].sha256
    assert not [*store.rglob("*.lockpipe-partial"), *store.rglob("*.lockpipe-journal")]


def test_runs_sharing_a_store_keep_each_others_verification_entries(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    (tmp_path / "b").write_bytes(b"b")
    one, two = VerifyCache(tmp_path), VerifyCache(tmp_path)  # two runs, read at their start
    one.record(tmp_path / "a", "sha-a")
    two.record(tmp_path / "b", "sha-b")
    one.save()
    two.save()  # used to write only its own view, dropping "a"
    again = VerifyCache(tmp_path)
    assert again.lookup(tmp_path / "a", (tmp_path / "a").stat()) == "sha-a"
    assert again.lookup(tmp_path / "b", (tmp_path / "b").stat()) == "sha-b"
    reader = VerifyCache(tmp_path)  # a run that read the file before another placed "c"
    (tmp_path / "c").write_bytes(b"c")
    writer = VerifyCache(tmp_path)
    writer.record(tmp_path / "c", "sha-c")
    writer.save()
    assert reader.lookup(tmp_path / "c", (tmp_path / "c").stat()) == "sha-c"


def test_a_snapshot_folder_holds_exactly_what_the_lock_lists(
    hub: FakeHub,  # noqa: F811
    tmp_path: Path,
) -> None:
    listing = tree(hub, REPO)
    dropped = "README.md"
    assert any(e["path"] == dropped for e in listing)
    full = make_lock(tmp_path, {"m": entry_from_tree(listing, REPO, REV)})
    run_payloads(full, [], options(tmp_path, hub))
    folder = payload_path(tmp_path / "store", full.payloads["m"])
    (folder / "pytorch_model.bin").write_bytes(b"written by another HF-cache tool")
    (folder / "onnx").mkdir()
    (folder / "onnx" / "model.onnx").write_bytes(b"not verified")
    os.symlink("../../blobs/nothing", folder / "1_Pooling" / "extra.json")
    os.symlink("/etc", folder / "linked-folder")
    fewer = make_lock(tmp_path, {"m": entry_from_tree(listing, REPO, REV, skip=(dropped,))})
    [result] = run_payloads(fewer, [], options(tmp_path, hub))
    held = sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_symlink() or p.is_file()
    )
    assert held == sorted(f.path for f in fewer.payloads["m"].files)
    assert result.status == "cached" and dropped not in held
    assert (folder.parents[1] / "blobs").is_dir() and Path("/etc").is_dir()  # blobs, /etc stay
