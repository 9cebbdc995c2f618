"""Servers on 127.0.0.1 that answer what no real one does: a header number of thousands
of digits (past what Python's ``int()`` reads), a Hub size past what a float holds, a
body that trickles in a byte at a time just inside the read timeout. Each is one
lockpipe error naming the server, or an answer taken as if the number were absent;
before, each was a traceback, or a read that lasted as long as the server liked."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import FetchError, LockpipeError, RegistryError
from lockpipe.lock.model import Payload
from lockpipe.refresh.api import Api
from lockpipe.refresh.archive import fetch_unpinned
from lockpipe.refresh.payloads import refresh_payload
from lockpipe.registry.transport import Registry
from tests.httpfake import FakeHandler, FakeServer
from tests.integration.payload_servers import entry, make_lock

pytestmark = pytest.mark.integration
DIGITS = "9" * 5000
DATA = b"{}" * 100
SIZE_REFUSED = (
    r"^payloads.m: the Hub's tree entry for 'm.gguf' has no size and sha256 as the Hub "
    r"gives them \(size 1000+… \([\d,]+ characters\), "
)


class Odd(FakeServer):
    """FAKE: answers every GET as ``mode`` says; ``seen`` counts the requests."""

    def __init__(self, mode: str) -> None:
        super().__init__(_Handler)
        self.mode, self.seen = mode, 0


class _Handler(FakeHandler):
    server: Odd

    def do_GET(self) -> None:
        srv = self.server
        with srv.lock:
            srv.seen += 1
            first = srv.seen == 1
        if srv.mode == "range":  # a 206 whose Content-Range total has 5000 digits
            end = len(DATA) - 1
            self.send_bytes(206, DATA, {"Content-Range": f"bytes 0-{end}/{DIGITS}"})
        elif srv.mode == "retry-after" and first:
            self.send_bytes(429, b"", {"Retry-After": DIGITS})
        elif srv.mode == "ratelimit":
            self.send_bytes(200, b"{}", {"ratelimit-remaining": f"{DIGITS};w=21600"})
        elif srv.mode == "hub-size":
            doc: Any = {"sha": "c" * 40}
            if "/revision/" not in self.path:
                doc = [{"type": "file", "path": "m.gguf", "size": 10**400,
                        "lfs": {"oid": "d" * 64}}]  # fmt: skip
            self.send_json(200, doc)
        elif srv.mode in ("trickle", "error-trickle"):
            # 60 bytes, one every 0.4 s, under a 0.5 s read timeout: a 200's, or the body of
            # a 404, which is not wanted
            self.send_response(200 if srv.mode == "trickle" else 404)
            self.send_header("Content-Length", "60")
            self.end_headers()
            try:
                for _ in range(60):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.4)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif srv.mode == "slow-headers":  # one header's value, a byte every 0.4 s, no end
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                for _ in range(60):
                    self.wfile.write(b"a")
                    self.wfile.flush()
                    time.sleep(0.4)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif srv.mode == "gzip":
            body = gzip.compress(json.dumps({"ok": 1}).encode())
            self.send_bytes(200, body, {"Content-Encoding": "gzip"})
        else:
            self.send_bytes(200, b"{}")


def _server(mode: str) -> Iterator[Odd]:
    server = Odd(mode)
    yield server
    server.stop()


@pytest.fixture
def range_server() -> Iterator[Odd]:
    yield from _server("range")


def test_a_content_range_of_thousands_of_digits_is_a_broken_range_support(
    range_server: Odd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    make_lock(tmp_path, {"m": entry(DATA, filename="m.json")})
    monkeypatch.setenv("HF_ENDPOINT", range_server.url)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    lock, store = tmp_path / "locks" / "digests.json", tmp_path / "store"
    assert main(["payloads", "--lock", str(lock), "--store", str(store)]) == 8
    err = capsys.readouterr().err
    assert f"{range_server.url}/org/model/resolve/" in err
    assert "the server's Range support is broken" in err and DIGITS not in err


def test_an_unpinned_archive_with_such_a_content_range_is_a_fetch_error(
    range_server: Odd, tmp_path: Path
) -> None:
    with pytest.raises(LockpipeError, match="the server's Range support is broken"):
        fetch_unpinned(f"{range_server.url}/a.tar.gz", tmp_path)


@pytest.mark.parametrize("mode", ["retry-after", "ratelimit"])
def test_a_registry_header_of_thousands_of_digits_is_as_none(mode: str) -> None:
    server = Odd(mode)
    try:
        reg = Registry(server.host, scheme="http", credential=None)
        reg.transport.sleep = lambda _: None
        assert reg.request("GET", "lib/x", "manifests/latest").status_code == 200
    finally:
        server.stop()
    assert server.seen == (2 if mode == "retry-after" else 1)


def test_a_hub_size_past_what_a_float_holds_is_not_a_size(tmp_path: Path) -> None:
    server = Odd("hub-size")
    hub = Api(base=server.url, name="the Hub", refused="set HF_TOKEN")
    p = Payload.one_file(name="m", repository="o/n", revision="a" * 40, filename="m.gguf",
                         size=1000, sha256="b" * 64, role="model", format="gguf",
                         expect={})  # fmt: skip
    try:
        with pytest.raises(FetchError, match=SIZE_REFUSED):
            refresh_payload(p, hub)
    finally:
        server.stop()


def _trickled(mode: str) -> tuple[str, str, float]:
    """(the server's host, the error, seconds it took) of a manifest GET from an Odd server
    in ``mode``, with a read timeout of 0.5 s."""
    server = Odd(mode)
    reg = Registry(server.host, scheme="http", credential=None, timeout=0.5)
    start = time.monotonic()
    try:
        with pytest.raises(RegistryError) as err:
            reg.request("GET", "lib/x", "manifests/latest")
    finally:
        server.stop()
    return server.host, str(err.value), time.monotonic() - start


def test_a_body_trickling_in_is_cut_off_at_the_answers_deadline() -> None:
    host, error, took = _trickled("trickle")
    assert took < 10  # 4 read timeouts, not the trickle's 24 s
    assert error.startswith(
        f"GET {host}/lib/x manifests/latest: http://{host}/v2/lib/x/manifests/latest "
        "did not finish its answer in 2 s ("
    )


def test_an_error_body_trickling_in_is_dropped_at_its_deadline() -> None:
    """An error's body is read only so that its connection can be used again: before, it
    was read for as long as the server went on (24 s here). (A redirect's body is read by
    requests itself, inside the deadline of the hop's status and headers.)"""
    server = Odd("error-trickle")
    reg = Registry(server.host, scheme="http", credential=None, timeout=0.5)
    start = time.monotonic()
    try:
        with pytest.raises(RegistryError, match="404"):
            reg.request("GET", "lib/x", "manifests/latest")
    finally:
        server.stop()
    assert time.monotonic() - start < 8  # 4 read timeouts, not the trickle's 24 s


def test_headers_trickling_in_are_cut_off_at_their_deadline() -> None:
    """requests' read timeout is per read of the socket: a status line and headers sent a
    byte at a time held the request open for as long as the server went on (24 s here)."""
    _, error, took = _trickled("slow-headers")
    # each try ends after 4 read timeouts (2 s), not the trickle's 24 s: 5 tries, not 120 s
    assert took < 60
    assert "unreachable (ReadTimeout) after 5 tries" in error, error


def test_a_gzipped_answer_is_still_read_decoded() -> None:
    server = Odd("gzip")
    api = Api(base=server.url, name="GitHub's API", refused="set GITHUB_TOKEN", token=None,
              no_token="set GITHUB_TOKEN", sleep=lambda _: None)  # fmt: skip
    try:
        assert api.get("repos/o/r", "sources.x") == {"ok": 1}
    finally:
        server.stop()
