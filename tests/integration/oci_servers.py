"""A registry behind a rate-capped nginx, and the other OCI clients, for the payload OCI tests.

:class:`CappedRegistry` is loopback nginx proxying to a real ``docker-registry``
(distribution 2.8) with ``limit_rate`` per connection, as the download
benchmark caps its HTTP server; blob GETs keep their Range support through it.
"""

from __future__ import annotations

from pathlib import Path

from tests.httpfake import FakeHandler, FakeServer
from tests.integration.payload_servers import NginxProc


class CappedRegistry(NginxProc):
    """nginx on a free port in front of ``upstream`` (host:port), ``rate`` per connection.

    The 1 MiB proxy buffers are what makes the cap bind from a response's first byte. nginx
    paces a response by sleeping ``bytes sent x 1000 / rate`` whole milliseconds after each
    send; with the default 4-8 KiB proxy buffers every send is too small for one millisecond
    at 50m, so only the allowance of one second's bytes per request held: a ranged GET of
    up to ~50 MiB went at full speed (nginx 1.22: 32 MiB in 0.05 s at 50m, 0.6 s with
    these buffers; a 253 MB single stream 3.9 s instead of 4.8).
    """

    def __init__(self, folder: Path, upstream: str, rate: str) -> None:
        server = f"""location / {{
      proxy_pass http://{upstream}; proxy_http_version 1.1; proxy_set_header Host $http_host;
      proxy_buffering on; proxy_max_temp_file_size 0; proxy_request_buffering off;
      proxy_buffers 4 1m; proxy_busy_buffers_size 1m;
      limit_rate {rate};
    }}"""
        super().__init__(folder, server, "client_max_body_size 0;")


def blob_data_path(storage: Path, digest: str) -> Path:
    """Where distribution's filesystem driver keeps a blob's bytes."""
    hexd = digest.removeprefix("sha256:")
    return storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


class Relay(FakeServer):
    """A relay to the registry at ``upstream`` that can refuse chunked uploads (PATCH -> 405,
    as registries without chunk support answer), refuse DELETE (400: a registry that keeps
    abandoned uploads to expire them) or drop ``Range`` from every request (a front that
    serves whole blobs only); ``seen``: (method, status) of each request."""

    def __init__(
        self, upstream: str, *, refuse_patch: bool = False, refuse_delete: bool = False,
        drop_range: bool = False,
    ):  # fmt: skip
        super().__init__(_RelayHandler)
        self.upstream, self.refuse_patch, self.drop_range = upstream, refuse_patch, drop_range
        self.refuse_delete = refuse_delete
        self.seen: list[tuple[str, int]] = []


class _RelayHandler(FakeHandler):
    server: Relay

    def relay(self) -> None:
        body = self.read_body()
        if self.command == "PATCH" and self.server.refuse_patch:
            self.server.seen.append(("PATCH", 405))
            self.send_bytes(405, b'{"errors":[{"code":"UNSUPPORTED"}]}')
            return
        if self.command == "DELETE" and self.server.refuse_delete:
            self.server.seen.append(("DELETE", 400))
            self.send_bytes(400, b'{"errors":[{"code":"UNSUPPORTED"}]}')
            return
        answer = self.forward(
            self.server.upstream, body, {"Range": None} if self.server.drop_range else None
        )
        self.server.seen.append((self.command, answer.status_code))
        self.send_answer(answer)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = relay
