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


class FakeServer(ThreadingHTTPServer):
    """``handler`` answering on 127.0.0.1 at ``port`` (a free one by default), in a daemon
    thread, until :meth:`stop`.

    It serves from the end of this ``__init__``; a subclass sets its state right
    after, before anyone can know the port to call it. ``lock`` is there for
    state that handler threads change together.
    """

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler], port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.lock = threading.Lock()
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: where it listens, as a registry reference names a host."""
        return f"127.0.0.1:{self.server_address[1]}"

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
