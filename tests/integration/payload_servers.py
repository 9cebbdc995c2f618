"""Loopback servers for the payload tests and benchmark: nginx and a fault server.

``Nginx`` runs the Debian nginx with its own config in a temporary folder, on
a free port, with an optional per-connection ``limit_rate`` under /capped/.
``FaultServer`` misbehaves on purpose, chosen by the first path segment:

    /ok/…        serves the file, honouring Range
    /drop/…      sends half of the first ``drops`` bodies per file, then hangs up
    /norange/…   ignores Range (200 with the whole file)
    /flip/…      one byte of the body is wrong
    /flaky/…     503 for the first ``failures`` requests per file, then serves
    /alternate/… 503 for every other request per file (the first one fails)
    /coin/…      503 for a ``fail_rate`` share of requests, at random
    /throttle/…  429 with ``Retry-After: retry_after`` for the first ``throttles``
                 requests per file, then serves
    /down/…      503 for every request
    /auth/…      401 without ``Bearer TOKEN``; with it, a 302 to the CDN host
    /gated/…     403
    /missing/…   404
    /redirect/…  302 to the CDN host (127.0.0.2), as the Hub does
    /signed/…    302 to the CDN's /gated/ with a signed query (``SIGNATURE`` in it), as
                 the Hub's Xet and S3 CDNs sign their URLs: the CDN then answers 403

Files are looked up by their last path component in ``files``. The CDN is a
second FaultServer on 127.0.0.2; it records every Authorization header seen.
``times`` keeps when each request per (mode, file) came, for tests of waits.
"""

from __future__ import annotations

import gzip
import os
import random
import re
import shutil
import socket
import subprocess
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TOKEN = "hf_test_token_do_not_log"
SIGNATURE = "f00dfeedsignaturedonotlog"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class _Handler(BaseHTTPRequestHandler):
    server: FaultServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
        pass

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_GET(self, head: bool = False) -> None:
        srv = self.server
        mode, _, rest = self.path.split("?")[0].lstrip("/").partition("/")
        name = rest.rsplit("/", 1)[-1]
        with srv.lock:
            srv.requests[mode] += 1
            srv.auth_seen.append(self.headers.get("Authorization"))
            count = srv.per_file[(mode, name)] = srv.per_file[(mode, name)] + 1
            srv.times.setdefault((mode, name), []).append(time.monotonic())
            coin = srv.random.random() < srv.fail_rate
        if mode == "missing" or name not in srv.files:
            return self._status(404)
        if mode == "gated":
            return self._status(403)
        if (
            (mode == "flaky" and count <= srv.failures)
            or (mode == "alternate" and count % 2 == 1)
            or (mode == "coin" and coin)
            or mode == "down"
        ):
            return self._status(503)
        if mode == "throttle" and count <= srv.throttles:
            return self._status(429, {"Retry-After": srv.retry_after})
        if mode == "signed":
            self.send_response(302)
            self.send_header("Location", f"{srv.cdn}/gated/{rest}?X-Amz-Algorithm=AWS4-HMAC-"
                             f"SHA256&X-Amz-Credential=AKIAFAKE%2F20261202&X-Amz-Expires=3600"
                             f"&X-Amz-Signature={SIGNATURE}&Key-Pair-Id=K2FAKE")  # fmt: skip
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if mode in ("auth", "redirect"):
            if mode == "auth" and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._status(401)
            self.send_response(302)
            self.send_header("Location", f"{srv.cdn}/ok/{rest}?signed=1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        data = srv.files[name]
        if mode == "flip":
            data = (
                data[: len(data) // 2]
                + bytes([data[len(data) // 2] ^ 1])
                + data[len(data) // 2 + 1 :]
            )
        if mode == "gzip":  # compresses though asked for identity, Range ignored
            packed = gzip.compress(data, mtime=0)
            self.send_response(200)
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(packed)))
            self.end_headers()
            if not head:
                self.wfile.write(packed)
            return None
        start, end, status = 0, len(data), 200
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match and mode != "norange":
            start, status = int(match[1]), 206
            end = min(len(data), int(match[2]) + 1) if match[2] else len(data)
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if head:
            return None
        body = data[start:end]
        if mode == "drop" and count <= srv.drops:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return None
        if mode == "trickle":  # 16 bytes every 0.25 s, each write well inside any read timeout
            try:
                for at in range(0, len(body), 16):
                    self.wfile.write(body[at : at + 16])
                    self.wfile.flush()
                    time.sleep(0.25)
            except OSError:  # the client dropped it
                pass
            return None
        self.wfile.write(body)
        return None

    def _status(self, code: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", "0")
        self.end_headers()


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", cdn: str = "") -> None:
        super().__init__((host, 0), _Handler)
        self.files: dict[str, bytes] = {}
        self.cdn = cdn
        self.drops, self.failures = 2, 2
        self.fail_rate, self.random = 0.5, random.Random(0)
        self.throttles, self.retry_after = 1, "1"
        self.times: dict[tuple[str, str], list[float]] = {}
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.per_file: Counter[tuple[str, str]] = Counter()
        self.auth_seen: list[str | None] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None
    )


class NginxProc:
    """A loopback nginx of its own (config, logs and temp files under ``folder``) on a free
    port, with ``server``'s directives in its one server block; stopped by :meth:`stop`."""

    def __init__(self, folder: Path, server: str, http: str = "") -> None:
        """``http``: directives for the http block (``sendfile on;``)."""
        binary = nginx_binary()
        if binary is None:
            raise FileNotFoundError("nginx")
        self.folder = folder
        (folder / "tmp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        user = "user root;" if os.geteuid() == 0 else ""  # workers must read files under /tmp
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
  keepalive_requests 100000;
  {http}
  server {{
    listen 127.0.0.1:{self.port};
    {server}
  }}
}}
"""
        (folder / "nginx.conf").write_text(conf)
        self.proc = subprocess.Popen(
            [binary, "-c", str(folder / "nginx.conf"), "-p", str(folder), "-g", "daemon off;"],
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nginx exited: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not start listening; see {folder / 'error.log'}")

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def served(self) -> list[tuple[str, str, int, int]]:
        """(method, uri, status, body bytes) of every request so far."""
        log = self.folder / "access.log"
        out = []
        for line in log.read_text().splitlines() if log.exists() else []:
            method, uri, status, size = line.split()
            out.append((method, uri, int(status), int(size)))
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Nginx(NginxProc):
    """nginx serving ``www`` at / (uncapped) and /capped/ (``rate`` per connection)."""

    def __init__(self, folder: Path, rate: str = "20m", headers: str = "") -> None:
        """``headers``: nginx directives for every location (``add_header`` lines)."""
        self.www = folder / "www"
        self.www.mkdir(parents=True, exist_ok=True)
        server = f"""root {self.www};
    location /capped/ {{ alias {self.www}/; limit_rate {rate}; {headers} }}
    location / {{ {headers} }}"""
        super().__init__(folder, server, "sendfile on; default_type application/octet-stream;")


REV = "0123456789abcdef0123456789abcdef01234567"


def entry(
    data: bytes, filename: str = "model.bin", repo: str = "org/model", **more: Any
) -> dict[str, Any]:
    """A pinned lock payload entry for ``data``."""
    import hashlib

    doc = {
        "repository": repo,
        "revision": REV,
        "filename": filename,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "role": "model",
        "format": "json",
    }
    return {**doc, **more}


def make_lock(root: Path, payloads: dict[str, dict[str, Any]]) -> Any:
    """A valid lock with only ``payloads`` (and no targets), written under ``root``."""
    from lockpipe.lock.model import dump_lock, load_lock

    doc = {"version": 1, "source_date_epoch": 0, "bases": {}, "targets": {}, "payloads": payloads}
    path = root / "locks" / "digests.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_lock(doc))
    return load_lock(path)


def publish(www: Path, data: bytes, filename: str = "model.bin", repo: str = "org/model") -> None:
    """Put ``data`` where a Hub-style resolve URL finds it under ``www``."""
    path = www / repo / "resolve" / REV / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def publish_folder(www: Path, folder: Path, repo: str, revision: str = REV) -> None:
    """Every file under ``folder`` at its resolve URL under ``www``, hard-linked (or copied)."""
    for src in (p for p in folder.rglob("*") if p.is_file()):
        dest = www / repo / "resolve" / revision / src.relative_to(folder)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            continue
        try:
            os.link(src.resolve(), dest)
        except OSError:
            shutil.copyfile(src, dest)
