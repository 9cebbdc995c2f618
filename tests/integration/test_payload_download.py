"""The downloader against real loopback servers: nginx, and a server that misbehaves."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import DiskSpaceError, IntegrityError, LockError, LockpipeError
from lockpipe.payloads.download import download_url
from lockpipe.payloads.errors import HTTPFatal
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.settings import MiB, Tuning
from lockpipe.payloads.store import payload_path
from tests.httpfake import FakeHandler, FakeServer
from tests.integration.payload_servers import (
    TOKEN,
    FaultServer,
    Nginx,
    entry,
    make_lock,
    nginx_binary,
    publish,
)
from tests.policy import scratch, unavailable

pytestmark = pytest.mark.integration
FAST = Tuning(connections=4, piece=1 * MiB, backoff=0.01, timeout=(2.0, 5.0), journal_every=0.1)
DATA = os.urandom(6 * MiB + 12345)


@pytest.fixture(scope="module")
def fault() -> Iterator[FaultServer]:
    cdn = FaultServer("127.0.0.2")
    srv = FaultServer("127.0.0.1", cdn=cdn.url)
    for s in (srv, cdn):
        s.files["model.bin"] = DATA
    yield srv
    srv.shutdown()
    cdn.shutdown()


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    if nginx_binary() is None:
        unavailable("nginx is not installed (apt-get install nginx)")
    with scratch(tmp_path_factory, "nginx") as work:
        server = Nginx(work, rate="20m")
        yield server
        server.stop()


def options(tmp: Path, endpoint: str, **more: Any) -> Options:
    env = {"HF_ENDPOINT": endpoint, "HOME": str(tmp)}  # no token file under this HOME
    return Options(store=tmp / "store", output="quiet", tuning=FAST, connections=4, env=env, **more)


def lock_for(tmp: Path, **more: Any) -> Any:
    return make_lock(tmp, {"m": entry(DATA, **more)})


def test_parallel_ranged_download_places_a_verified_read_only_file(
    nginx: Nginx, tmp_path: Path
) -> None:
    data = os.urandom(24 * MiB + 7)
    publish(nginx.www, data, "big.bin")
    lock = make_lock(tmp_path, {"big": entry(data, "big.bin")})
    [result] = run_payloads(lock, [], options(tmp_path, nginx.url))
    path = payload_path(tmp_path / "store", lock.payloads["big"])
    assert result.status == "downloaded" and result.path == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == lock.payloads["big"].sha256
    assert path.is_symlink() and path.resolve().name == lock.payloads["big"].sha256
    assert not os.access(path.resolve(), os.W_OK) or os.geteuid() == 0
    assert path.resolve().stat().st_mode & 0o222 == 0
    ranged = [r for r in nginx.served() if r[1].endswith("/big.bin") and r[2] == 206]
    assert len(ranged) >= 4  # one file, several ranged connections
    assert not list(path.resolve().parent.glob("*.lockpipe-*"))


def test_rerun_uses_the_cache_and_detects_a_changed_file(nginx: Nginx, tmp_path: Path) -> None:
    publish(nginx.www, DATA)
    lock = lock_for(tmp_path)
    run_payloads(lock, [], options(tmp_path, nginx.url))
    before = len(nginx.served())
    [again] = run_payloads(lock, [], options(tmp_path, nginx.url))
    assert again.status == "cached" and len(nginx.served()) == before
    [forced] = run_payloads(lock, ["m"], options(tmp_path, nginx.url, verify=True))
    assert forced.status == "re-hashed"
    blob = again.path.resolve()
    blob.chmod(0o644)
    with blob.open("r+b") as fh:  # corrupt one byte in place: same inode and size
        fh.seek(100)
        fh.write(bytes([DATA[100] ^ 0xFF]))
    [fixed] = run_payloads(lock, [], options(tmp_path, nginx.url))
    assert fixed.status == "downloaded" and len(nginx.served()) > before
    assert fixed.path.read_bytes() == DATA


@pytest.mark.parametrize("mode", ["ok", "drop", "norange", "flaky", "redirect"])
def test_faults_that_end_in_a_verified_file(fault: FaultServer, tmp_path: Path, mode: str) -> None:
    before = fault.per_file[(mode, "model.bin")]  # the server is the module's: count this run's
    [result] = run_payloads(lock_for(tmp_path), [], options(tmp_path, f"{fault.url}/{mode}"))
    assert result.path.read_bytes() == DATA
    if mode == "norange":
        assert fault.per_file[("norange", "model.bin")] - before == 1  # one stream, not N


def test_a_flipped_byte_never_reaches_the_final_path(fault: FaultServer, tmp_path: Path) -> None:
    lock = lock_for(tmp_path)
    with pytest.raises(IntegrityError) as err:
        run_payloads(lock, [], options(tmp_path, f"{fault.url}/flip"))
    message = str(err.value)
    assert "payloads.m" in message and lock.payloads["m"].sha256 in message
    assert "received" in message and "/flip/" in message
    assert not payload_path(tmp_path / "store", lock.payloads["m"]).exists()
    assert not list((tmp_path / "store").rglob("blobs/*"))  # neither blob nor partial is kept


@pytest.mark.parametrize(
    ("mode", "status", "fix"),
    [
        ("auth", 401, "HF_TOKEN"),
        ("gated", 403, "accept its conditions"),
        ("missing", 404, "revision"),
    ],
)
def test_client_errors_fail_at_once_with_the_fix(
    fault: FaultServer, tmp_path: Path, mode: str, status: int, fix: str
) -> None:
    before = fault.per_file[(mode, "model.bin")]
    with pytest.raises(HTTPFatal) as err:
        run_payloads(lock_for(tmp_path), [], options(tmp_path, f"{fault.url}/{mode}"))
    assert err.value.status == status and fix in str(err.value) and "payloads.m" in str(err.value)
    assert fault.per_file[(mode, "model.bin")] - before == 1  # no retries


def test_the_token_reaches_the_hub_but_never_the_cdn(fault: FaultServer, tmp_path: Path) -> None:
    opts = options(tmp_path, f"{fault.url}/auth")
    opts = Options(**{**opts.__dict__, "env": {**opts.env, "HF_TOKEN": TOKEN}})
    cdn_seen = len(fault.auth_seen)
    [result] = run_payloads(lock_for(tmp_path), [], opts)
    assert result.path.read_bytes() == DATA
    assert f"Bearer {TOKEN}" in fault.auth_seen[cdn_seen:]


def test_cdn_never_sees_a_token(tmp_path: Path) -> None:
    cdn = FaultServer("127.0.0.2")
    hub = FaultServer("127.0.0.1", cdn=cdn.url)
    hub.files["model.bin"] = cdn.files["model.bin"] = DATA
    opts = options(tmp_path, f"{hub.url}/auth")
    opts = Options(**{**opts.__dict__, "env": {**opts.env, "HF_TOKEN": TOKEN}})
    run_payloads(lock_for(tmp_path), [], opts)
    assert cdn.auth_seen and all(a is None for a in cdn.auth_seen)
    assert all(a == f"Bearer {TOKEN}" for a in hub.auth_seen)
    hub.shutdown()
    cdn.shutdown()


def test_mirror_first_then_upstream(fault: FaultServer, tmp_path: Path) -> None:
    mirror = FaultServer("127.0.0.1")
    mirror.files["model.bin"] = DATA
    host = fault.url.removeprefix("http://")
    opts = options(tmp_path, f"{fault.url}/missing", mirror=f"{mirror.url}/ok")
    [result] = run_payloads(lock_for(tmp_path), [], opts)  # upstream would 404
    assert result.path.read_bytes() == DATA and mirror.requests["ok"] >= 1
    assert host  # the mirror path is {mirror}/{upstream host}/{upstream path}
    empty = FaultServer("127.0.0.1")  # knows no files: 404, then upstream serves
    opts = options(tmp_path / "2", f"{fault.url}/ok", mirror=f"{empty.url}/ok")
    [result] = run_payloads(lock_for(tmp_path / "2"), [], opts)
    assert result.path.read_bytes() == DATA and empty.requests["ok"] == 1
    mirror.shutdown()
    empty.shutdown()


def test_not_enough_space_fails_before_any_request(fault: FaultServer, tmp_path: Path) -> None:
    huge = {**entry(DATA), "size": 1 << 60}
    lock = make_lock(tmp_path, {"huge": huge})
    before = sum(fault.requests.values())
    with pytest.raises(DiskSpaceError, match=r"GB free, .* still to fetch .*huge"):
        run_payloads(lock, [], options(tmp_path, f"{fault.url}/ok"))
    assert sum(fault.requests.values()) == before


def test_unpinned_payloads_are_refused(tmp_path: Path) -> None:
    unpinned = {k: v for k, v in entry(DATA).items() if k not in ("size", "sha256")}
    lock = make_lock(tmp_path, {"pinned": entry(DATA), "loose": unpinned})
    with pytest.raises(
        LockError, match=r"(?s)payloads\.loose: no size, sha256 .*pin it from the publisher"
    ):
        run_payloads(lock, [], options(tmp_path, "http://127.0.0.1:9"))


def test_source_archive_without_size_or_range(fault: FaultServer, tmp_path: Path) -> None:
    sha = hashlib.sha256(DATA).hexdigest()
    dest = tmp_path / "cache" / sha
    got = download_url(f"{fault.url}/norange/x/archive/model.bin", sha, dest, connections=4)
    assert got.read_bytes() == DATA
    with pytest.raises(LockpipeError, match="sha256 mismatch"):
        download_url(f"{fault.url}/flip/x/model.bin", sha, tmp_path / "other" / sha)


def test_cli_reports_errors_without_a_traceback(fault: FaultServer, tmp_path: Path) -> None:
    lock = lock_for(tmp_path)
    env = {**os.environ, "HF_ENDPOINT": f"{fault.url}/missing", "HOME": str(tmp_path)}
    cmd = [
        sys.executable,
        "-m",
        "lockpipe",
        "payloads",
        "--quiet",
        "--lock",
        str(lock.path),
        "--store",
        str(tmp_path / "store"),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    assert done.returncode != 0 and "HTTP 404" in done.stderr
    assert "Traceback" not in done.stderr and TOKEN not in done.stderr


class _Claims(FakeServer):
    """Serves ``data``; while ``lying``, a ranged GET from byte 0 gets its first 100 bytes
    under a Content-Range total of 99,999, and every other GET a 404."""

    def __init__(self, data: bytes) -> None:
        super().__init__(_ClaimsHandler)
        self.data, self.lying, self.ranged = data, True, False


class _ClaimsHandler(FakeHandler):
    server: _Claims

    def do_GET(self) -> None:
        srv, data = self.server, self.server.data
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if srv.lying:
            if match and match[1] == "0":
                self.send_bytes(206, data[:100], {"Content-Range": "bytes 0-99/99999"})
            else:
                self.send_bytes(404, b"")
        elif srv.ranged and match:
            start = int(match[1])
            end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
            self.send_bytes(206, data[start:end],
                            {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"})  # fmt: skip
        else:
            self.send_bytes(200, data)


@pytest.mark.parametrize("ranged", [False, True])
def test_a_size_a_server_only_claimed_is_not_taken_for_the_locks(
    tmp_path: Path, ranged: bool
) -> None:
    """A source archive pins no size. A server once claimed 99,999 bytes (206 total) and
    failed; the journal kept that claim as the size, and the next run called the true
    5,000 bytes 'the lock pins 99,999' (exit 9, re-pin the entry). Only a pinned size is
    the lock's: a claim the next answer contradicts discards the partial and starts over."""
    data = os.urandom(5000)
    sha = hashlib.sha256(data).hexdigest()
    dest = tmp_path / "cache" / sha
    server = _Claims(data)
    try:
        with pytest.raises(HTTPFatal):
            download_url(f"{server.url}/a.tgz", sha, dest)
        journal = dest.with_name(dest.name + ".lockpipe-journal")
        assert '"size": 99999' in journal.read_text()  # what the server claimed, and 100 bytes
        server.lying, server.ranged = False, ranged
        assert download_url(f"{server.url}/a.tgz", sha, dest).read_bytes() == data
    finally:
        server.stop()
    assert not journal.exists()


def test_a_compressed_answer_is_named_and_the_next_source_serves(
    fault: FaultServer, tmp_path: Path
) -> None:
    """A server that gzips the file though asked for identity: its bytes' sha256 was a
    mismatch blamed on the lock ('the lock may pin the wrong file') (issue 18)."""
    with pytest.raises(HTTPFatal) as err:
        run_payloads(lock_for(tmp_path), [], options(tmp_path, f"{fault.url}/gzip"))
    said = str(err.value)
    assert "answered with Content-Encoding 'gzip', though asked for the file's own bytes" in said
    assert "the lock may pin the wrong file" not in said
    opts = options(tmp_path / "2", f"{fault.url}/ok", mirror=f"{fault.url}/gzip")
    [result] = run_payloads(lock_for(tmp_path / "2"), [], opts)
    assert result.path.read_bytes() == DATA


def test_a_token_outside_latin1_is_named_as_the_token_without_showing_it(
    fault: FaultServer, tmp_path: Path
) -> None:
    """http.client's UnicodeEncodeError for the Authorization header was read as a bad URL:
    'not a URL that can be fetched (… can't encode character '\\u20ac' in position 10…)',
    a character of the secret and its place (issue 18)."""
    opts = options(tmp_path, f"{fault.url}/auth")
    opts = Options(**{**opts.__dict__, "env": {**opts.env, "HF_TOKEN": "hf_abc\u20acdef"}})
    with pytest.raises(HTTPFatal) as err:
        run_payloads(lock_for(tmp_path), [], opts)
    said = str(err.value)
    assert "a request header is not valid: check that HF_TOKEN" in said
    assert "\u20ac" not in said and "20ac" not in said and "not a URL" not in said
