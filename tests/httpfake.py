"""The plumbing the test suite's FAKE HTTP servers share; no fake's behaviour lives here.

A FAKE (of GitHub's API, of the Hub, a recording proxy) subclasses
:class:`FakeServer` for its state and :class:`FakeHandler` for its answers:

    class FakeX(FakeServer):
        def __init__(self) -> None:
            super().__init__(_Handler)  # serving from here on, at ``self.url``
            self.seen: list[str] = []

    class _Handler(FakeHandler):
        server: FakeX

        def do_GET(self) -> None:
            self.send_json(200, {"ok": True})
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

HOP_BY_HOP = ("connection", "content-length", "transfer-encoding")


class FakeServer(ThreadingHTTPServer):
    """``handler`` answering on ``address`` (127.0.0.1; 127.0.0.2 is loopback too, and
    another host to a client) at ``port`` (a free one by default), in a daemon thread,
    until :meth:`stop`.

    It serves from the end of this ``__init__``; a subclass sets its state right
    after, before anyone can know the port to call it. ``lock`` is there for
    state that handler threads change together.
    """

    daemon_threads = True

    def __init__(
        self, handler: type[BaseHTTPRequestHandler], port: int = 0, address: str = "127.0.0.1"
    ) -> None:
        super().__init__((address, port), handler)
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: where it listens, as a registry reference names a host."""
        return f"{self.server_address[0]!s}:{self.server_address[1]}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class FakeHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 (keep-alive) without the per-request log lines on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_bytes(
        self, status: int, body: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        """``status``, ``headers`` in their order, ``Content-Length``, then ``body``.

        A HEAD is answered as HTTP says: the headers a GET would get, and no body (one
        written anyway would be read as the start of the next response on a kept-alive
        connection).
        """
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, doc: Any, headers: Mapping[str, str] | None = None) -> None:
        """``doc`` as JSON, after ``headers`` and a JSON ``Content-Type``."""
        json_type = {"Content-Type": "application/json; charset=utf-8"}
        self.send_bytes(status, json.dumps(doc).encode(), {**(headers or {}), **json_type})

    def read_body(self) -> bytes | None:
        """The request body, by Content-Length or chunked (blob PATCHes stream in chunks)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            out = b""
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return out
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else None

    def forward(
        self, upstream: str, body: bytes | None, headers: Mapping[str, str | None] | None = None
    ) -> requests.Response:
        """This request sent on to ``upstream`` (``host:port``) with ``body``; its answer.

        The request's headers go along, Host too (a registry builds its upload
        Locations from it, so they point back here), ``headers`` replacing any of the
        same name (None: dropped). Redirects come back as they are.
        """
        replaced = {k.lower() for k in headers or {}}
        sent = {k: ", ".join(self.headers.get_all(k) or []) for k in set(self.headers.keys())
                if k.lower() not in (*HOP_BY_HOP, *replaced)}  # fmt: skip
        return requests.request(self.command, f"http://{upstream}{self.path}",
                                headers={**sent, **(headers or {})}, data=body, timeout=60,
                                allow_redirects=False)  # fmt: skip

    def send_answer(
        self, answer: requests.Response, headers: Mapping[str, str] | None = None
    ) -> None:
        """``answer`` relayed: its status, headers (``headers`` replacing) and body."""
        drop = {*HOP_BY_HOP, *(k.lower() for k in headers or {})}
        out = {k: v for k, v in answer.headers.items() if k.lower() not in drop}
        # requests reads no body for HEAD: its content is b"", so none is written.
        self.send_bytes(answer.status_code, answer.content, {**out, **(headers or {})})
