"""A registry behind a rate-capped nginx, and the other OCI clients, for the payload OCI tests.

:class:`CappedRegistry` is loopback nginx proxying to a real ``docker-registry``
(distribution 2.8) with ``limit_rate`` per connection, as the download
benchmark caps its HTTP server; blob GETs keep their Range support through it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from tests.httpfake import FakeHandler, FakeServer
from tests.integration.payload_servers import nginx_binary
from tests.registry_servers import free_port


class CappedRegistry:
    """nginx on a free port in front of ``upstream`` (host:port), ``rate`` per connection."""

    def __init__(self, folder: Path, upstream: str, rate: str) -> None:
        binary = nginx_binary()
        if binary is None:
            raise FileNotFoundError("nginx")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tmp").mkdir(exist_ok=True)
        self.folder, self.port = folder, free_port()
        user = "user root;" if os.geteuid() == 0 else ""
        conf = f"""
{user}
worker_processes 2;
error_log {folder}/error.log;
pid {folder}/nginx.pid;
events {{ worker_connections 512; }}
http {{
  log_format sizes '$request_method $uri $status $body_bytes_sent';
  access_log {folder}/access.log sizes;
  client_body_temp_path {folder}/tmp/body; proxy_temp_path {folder}/tmp/proxy;
  fastcgi_temp_path {folder}/tmp/fcgi; uwsgi_temp_path {folder}/tmp/uwsgi;
  scgi_temp_path {folder}/tmp/scgi;
  keepalive_requests 100000; client_max_body_size 0;
  server {{
    listen 127.0.0.1:{self.port};
    location / {{
      proxy_pass http://{upstream}; proxy_http_version 1.1; proxy_set_header Host $http_host;
      proxy_buffering on; proxy_max_temp_file_size 0; proxy_request_buffering off;
      limit_rate {rate};
    }}
  }}
}}
"""
        (folder / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [binary, "-c", str(folder / "nginx.conf"), "-p", str(folder), "-g", "daemon off;"],
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not start; see {folder / 'error.log'}")

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def served(self) -> list[tuple[str, str, int, int]]:
        """(method, uri, status, body bytes) of every request so far."""
        out = []
        log = self.folder / "access.log"
        for line in log.read_text().splitlines() if log.exists() else []:
            method, uri, status, sent = line.split()
            out.append((method, uri, int(status), int(sent)))
        return out

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def blob_data_path(storage: Path, digest: str) -> Path:
    """Where distribution's filesystem driver keeps a blob's bytes."""
    hexd = digest.removeprefix("sha256:")
    return storage / "docker/registry/v2/blobs/sha256" / hexd[:2] / hexd / "data"


class Relay(FakeServer):
    """A relay to the registry at ``upstream`` that can refuse chunked uploads (PATCH -> 405,
    as registries without chunk support answer) or drop ``Range`` from every request (a
    front that serves whole blobs only); ``seen``: (method, status) of each request."""

    def __init__(self, upstream: str, *, refuse_patch: bool = False, drop_range: bool = False):
        super().__init__(_RelayHandler)
        self.upstream, self.refuse_patch, self.drop_range = upstream, refuse_patch, drop_range
        self.seen: list[tuple[str, int]] = []


class _RelayHandler(FakeHandler):
    server: Relay

    def relay(self) -> None:
        body = self.read_body()
        if self.command == "PATCH" and self.server.refuse_patch:
            self.server.seen.append(("PATCH", 405))
            self.send_bytes(405, b'{"errors":[{"code":"UNSUPPORTED"}]}')
            return
        answer = self.forward(
            self.server.upstream, body, {"Range": None} if self.server.drop_range else None
        )
        self.server.seen.append((self.command, answer.status_code))
        self.send_answer(answer)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = relay
