"""What a --mirror's refusals are called, against a real HTTP server on 127.0.0.1 (a FAKE
mirror): a 403 is the mirror's, not a gated Hub repository's, and a resumed file whose
mirror now holds fewer bytes than the lock pins is an integrity error, as in a fresh run,
not "HTTP 416; check the URL" (issue 18)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import FetchError, LockpipeError
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.settings import Tuning
from tests.httpfake import FakeHandler, FakeServer
from tests.integration.payload_servers import entry, make_lock

pytestmark = pytest.mark.integration
DATA = bytes(range(256)) * (3_000_000 // 256)
TUNING = Tuning(
    connections=1,
    backoff=0.01,
    retries=1,
    retries_per_piece=0,
    timeout=(1.0, 2.0),
    journal_every=0.05,
)


class Mirror(FakeServer):
    """FAKE mirror of ``DATA``. ``mode``: ``403`` refuses everything; ``drop`` sends the
    first 300,000 bytes of the file, then closes, and answers 503 from any other start;
    ``short`` holds the first 1,000 bytes
    only, with Range as HTTP has it (416 and ``bytes */1000`` past its end)."""

    def __init__(self) -> None:
        super().__init__(_Mirror)
        self.mode = "403"


class _Mirror(FakeHandler):
    server: Mirror

    def do_GET(self) -> None:
        mode = self.server.mode
        if mode == "403":
            return self.send_bytes(403, b"forbidden")
        data = DATA[:1000] if mode == "short" else DATA
        asked = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "bytes=0-")
        assert asked is not None
        start, end = int(asked[1]), min(int(asked[2] or len(data) - 1), len(data) - 1)
        if mode == "drop" and start:
            return self.send_bytes(503, b"")
        if start >= len(data):
            return self.send_bytes(416, b"", {"Content-Range": f"bytes */{len(data)}"})
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        part = data[start : end + 1]
        self.wfile.write(part[:300_000] if mode == "drop" else part)
        self.close_connection = mode == "drop"


@pytest.fixture
def mirror() -> Iterator[Mirror]:
    server = Mirror()
    yield server
    server.stop()


def _run(tmp: Path, mirror: Mirror, data: bytes, filename: str) -> None:
    lock = make_lock(tmp, {"w": entry(data, filename)})
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HOME": str(tmp)}  # no Hub behind it
    run_payloads(lock, [], Options(store=tmp / "store", output="quiet", env=env,
                                   mirror=mirror.url, tuning=TUNING))  # fmt: skip


def test_a_mirror_that_forbids_the_file_is_named_not_the_hubs_gate(
    mirror: Mirror, tmp_path: Path
) -> None:
    """Before: 'HTTP 403; the repository is gated or private: accept its conditions at
    http://MIRROR/… with the account that owns the token' (no token goes to a mirror)."""
    with pytest.raises(FetchError) as caught:
        _run(tmp_path, mirror, b'{"a": 1}\n', "config.json")
    said = str(caught.value)
    assert "HTTP 403; the mirror forbids this file" in said, said
    assert "gated" not in said and "token" not in said


def test_a_resume_from_a_mirror_now_shorter_names_the_sizes_as_a_fresh_run_does(
    mirror: Mirror, tmp_path: Path
) -> None:
    """Run 1 keeps 300,000 bytes of 2,999,808; the mirror then holds 1,000. Before: runs 2
    and 3 said 'HTTP 416; the server refused the request; check the URL'; a fresh run
    names the sizes. (The resumed bytes stay for the next source: the file's sha256
    judges them at the end, as for any candidate that fails.)"""
    mirror.mode = "drop"
    with pytest.raises(FetchError):
        _run(tmp_path, mirror, DATA, "w.bin")
    assert list((tmp_path / "store").rglob("*.lockpipe-journal")), "run 1 kept no journal"
    mirror.mode = "short"
    with pytest.raises(LockpipeError) as caught:
        _run(tmp_path, mirror, DATA, "w.bin")
    said = str(caught.value)
    assert f"w.bin serves 1,000 bytes, the lock pins {len(DATA):,}" in said, said
    assert "416" not in said
