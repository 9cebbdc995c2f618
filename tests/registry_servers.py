"""Real registries on 127.0.0.1 for the registry client's tests and benchmark.

- :class:`RegistryProc`: Debian's ``docker-registry serve`` (distribution 2.8)
  with its own config and storage in a tmp folder, on a free port; with
  ``auth: token:`` pointing at :class:`TokenServer`, or ``auth: htpasswd:``
  with a file made by the real ``htpasswd -Bbn``.
- :class:`TokenServer`: a real token server. It checks Basic credentials and
  signs RS256 JWTs whose ``x5c`` chain ends at a CA the registry trusts
  (``rootcertbundle``), granting what the scope asks; ``expires_in`` and the
  answer's field name (``token`` or ``access_token``) are settable. A POST
  with ``grant_type=refresh_token`` exchanges ``REFRESH_TOKEN`` (an identity
  token) for an ``access_token``, as the distribution token spec's OAuth2 flow.
  ``fail_status``/``fail_times`` answer the next N token requests with that status
  (``retry_after`` if set); ``redirect_times`` sends the next N on (307) to ``redirect``,
  another host (a :class:`Storage` front on 127.0.0.2 records what reaches it).
- :class:`FaultProxy`: a real HTTP proxy in front of a registry that answers
  429 with Retry-After or 5xx for the next N requests, drops
  Docker-Content-Digest, or flips a byte of manifest bodies.
- :class:`Diverter` and :class:`Storage`: a relay in front of a registry that
  sends uploads (their ``Location``) and blob GETs (a 307) on to a storage
  front on another host, 127.0.0.2, as registries with a storage backend do.
  The storage front records the Authorization header of every request it is
  sent, and reaches the registry with credentials of its own.
- :func:`oci_layout` writes small OCI images (and a multi-arch index with an
  ``unknown/unknown`` attestation) that :func:`skopeo_copy` pushes.
"""

from __future__ import annotations

import base64
import datetime
import gzip
import hashlib
import io
import json
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tests.httpfake import FakeHandler, FakeServer

SERVICE = "lockpipe-test-registry"
ISSUER = "lockpipe-test-issuer"
USER, PASSWORD = "alice", "s3cret-pass-do-not-log"
REFRESH_TOKEN = "refresh-0f9e-do-not-log"  # the identity token docker login would have stored


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(server: ThreadingHTTPServer) -> None:
    threading.Thread(target=server.serve_forever, daemon=True).start()


def _cert(subject: str, key: rsa.RSAPrivateKey, issuer: x509.Name | None,
          signer: rsa.RSAPrivateKey, ca: bool) -> x509.Certificate:  # fmt: skip
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signer, hashes.SHA256())
    )


class TokenServer(ThreadingHTTPServer):
    """Issues registry tokens for ``USER``/``PASSWORD``; 401 for anyone else."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(("127.0.0.1", 0), _TokenHandler)
        self.expires_in = 300
        self.field = "token"  # or "access_token"
        self.requests: list[str] = []  # the scope of each token request
        self.posts: list[dict[str, str]] = []  # the form of each OAuth2 (POST) request
        self.delay = 0.0  # seconds before each answer: a distant token server
        self.issued: list[str] = []  # every token handed out
        self.fail_status, self.fail_times, self.retry_after = 503, 0, ""
        self.redirect, self.redirect_times = "", 0  # a URL: the next N requests go there
        self.lock = threading.Lock()
        ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        ca = _cert("lockpipe test CA", ca_key, None, ca_key, ca=True)
        leaf = _cert("lockpipe token signer", self.key, ca.subject, ca_key, ca=False)
        self.x5c = [base64.b64encode(leaf.public_bytes(serialization.Encoding.DER)).decode()]
        self.rootcerts = workdir / "root.pem"
        self.rootcerts.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        self.realm = f"http://127.0.0.1:{self.server_address[1]}/token"
        _serve(self)

    def token(self, user: str, scopes: Sequence[str]) -> str:
        access = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {
            "iss": ISSUER, "sub": user, "aud": SERVICE, "iat": now, "nbf": now - 5,
            "exp": now + self.expires_in, "jti": uuid.uuid4().hex, "access": access,
        }  # fmt: skip
        token = jwt.encode(claims, self.key, algorithm="RS256", headers={"x5c": self.x5c})
        self.issued.append(token)
        return token


class _TokenHandler(FakeHandler):
    server: TokenServer

    def misbehaved(self) -> bool:
        """Whether this request was answered with a fault or a redirect, as the server's
        fields say; each counts down once per request."""
        srv = self.server
        time.sleep(srv.delay)
        with srv.lock:
            failing, moving = srv.fail_times > 0, srv.fail_times <= 0 and srv.redirect_times > 0
            srv.fail_times -= failing
            srv.redirect_times -= moving
        if (failing or moving) and self.command == "POST":
            self.read_body()  # the connection is kept alive: the next request follows it
        if failing:
            extra = {"Retry-After": srv.retry_after} if srv.retry_after else {}
            srv.requests.append(f"{self.command} answered {srv.fail_status}")
            self.send_json(srv.fail_status, {"details": "failing on request"}, extra)
        elif moving:
            srv.requests.append(f"{self.command} sent on to {srv.redirect}")
            self.send_bytes(307, b"", {"Location": srv.redirect + self.path})
        return failing or moving

    def do_POST(self) -> None:
        """OAuth2 refresh-token grant (distribution's token spec, docs/spec/auth/oauth)."""
        if self.misbehaved():
            return
        length = int(self.headers.get("Content-Length") or 0)
        form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        self.server.posts.append(form)
        scopes = form.get("scope", "").split()
        self.server.requests.append(" ".join(scopes))
        if form.get("grant_type") != "refresh_token" or not form.get("client_id"):
            self.send_json(400, {"error": "unsupported_grant_type"})
            return
        if form.get("refresh_token") != REFRESH_TOKEN or form.get("service") != SERVICE:
            self.send_json(401, {"error": "invalid_grant"})
            return
        body = {"access_token": self.server.token(USER, scopes), "scope": " ".join(scopes),
                "expires_in": self.server.expires_in}  # fmt: skip
        self.send_json(200, body)

    def do_GET(self) -> None:
        if self.misbehaved():
            return
        query = parse_qs(urlsplit(self.path).query)
        scopes = query.get("scope", [])
        self.server.requests.append(" ".join(scopes))
        auth = self.headers.get("Authorization", "")
        good = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if auth != good:
            self.send_json(401, {"details": "bad credentials"})
            return
        body = {self.server.field: self.server.token(USER, scopes),
                "expires_in": self.server.expires_in}  # fmt: skip
        self.send_json(200, body)


class RegistryProc:
    """``docker-registry serve`` on a free port, storage and config in ``workdir``."""

    def __init__(self, workdir: Path, auth: str = "") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        config = workdir / "config.yml"
        config.write_text(
            f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {workdir / 'data'}\n"
            f"  delete:\n    enabled: true\nhttp:\n  addr: {self.host}\n{auth}"
        )
        self.log = (workdir / "registry.log").open("wb")
        self.proc = subprocess.Popen(
            ["docker-registry", "serve", str(config)], stdout=self.log, stderr=subprocess.STDOUT
        )
        for _ in range(100):
            try:
                requests.get(f"http://{self.host}/v2/", timeout=1)
                return
            except requests.ConnectionError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"docker-registry did not start; see {workdir / 'registry.log'}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def token_auth(tokens: TokenServer) -> str:
    return (f"auth:\n  token:\n    realm: {tokens.realm}\n    service: {SERVICE}\n"
            f"    issuer: {ISSUER}\n    rootcertbundle: {tokens.rootcerts}\n")  # fmt: skip


def htpasswd_auth(workdir: Path) -> str:
    """The config section for Basic auth, with a bcrypt file made by the real htpasswd."""
    line = subprocess.run(["htpasswd", "-Bbn", USER, PASSWORD], check=True,
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    (workdir / "htpasswd").write_text(line + "\n")
    return f"auth:\n  htpasswd:\n    realm: lockpipe-basic\n    path: {workdir / 'htpasswd'}\n"


class FaultProxy(ThreadingHTTPServer):
    """Forwards to ``upstream`` (host:port), misbehaving as its fields say.

    ``fail_status``/``fail_times``: answer that status (with ``retry_after`` if
    set) to the next N requests. ``drop_digest``: strip Docker-Content-Digest.
    ``delay``: wait that long before each answer, as a distant registry would.
    ``extra``: headers added to every relayed answer (``ratelimit-remaining``).
    ``corrupt``: add a byte to every manifest body it relays (still valid JSON).
    ``tags``: the body to answer every ``tags/list`` with instead of the registry's.
    """

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.upstream = upstream
        self.host = f"127.0.0.1:{self.server_address[1]}"
        self.fail_status, self.fail_times, self.retry_after = 503, 0, ""
        self.drop_digest = self.corrupt = False
        self.tags: bytes | None = None
        self.delay = 0.0  # seconds added to every answer: a remote registry's round trip
        self.extra: dict[str, str] = {}  # headers added to every relayed answer
        self.seen: list[tuple[str, str, int]] = []  # (method, path, status answered)
        self.lock = threading.Lock()
        _serve(self)


class _ProxyHandler(FakeHandler):
    server: FaultProxy

    def do_HEAD(self) -> None:
        self.relay()

    def do_GET(self) -> None:
        self.relay()

    def relay(self) -> None:
        proxy = self.server
        time.sleep(proxy.delay)
        with proxy.lock:
            failing = proxy.fail_times > 0
            proxy.fail_times -= 1 if failing else 0
        if proxy.tags is not None and "/tags/list" in self.path:
            proxy.seen.append((self.command, self.path, 200))
            self.send_bytes(200, proxy.tags, {"Content-Type": "application/json"})
            return
        if failing:
            extra = {"Retry-After": proxy.retry_after} if proxy.retry_after else {}
            proxy.seen.append((self.command, self.path, proxy.fail_status))
            self.send_bytes(proxy.fail_status, b'{"errors":[]}', extra)
            return
        headers = {
            k: ", ".join(self.headers.get_all(k) or [])
            for k in set(self.headers.keys())
            if k.lower() not in ("host", "connection")
        }  # repeated Accept lines joined
        upstream = requests.request(
            self.command,
            f"http://{proxy.upstream}{self.path}",
            headers=headers,
            timeout=30,
            allow_redirects=False,
        )
        body = upstream.content
        hop = ("content-length", "connection", "transfer-encoding")
        headers = {k: v for k, v in upstream.headers.items() if k.lower() not in hop}
        headers.update(proxy.extra)
        if proxy.drop_digest:
            headers.pop("Docker-Content-Digest", None)
        if proxy.corrupt and "/manifests/" in self.path and body:
            body += b" "  # still valid JSON, so only the digest check can catch it
        proxy.seen.append((self.command, self.path, upstream.status_code))
        self.send_bytes(upstream.status_code, body, headers)


class Storage(FakeServer):
    """A storage front on 127.0.0.2 for the registry at ``upstream`` (host:port).

    Whatever it is sent goes on to the registry with ``authorization`` in place of the
    client's own (None: without any): it trusts the upload URLs the registry signed, as a
    storage backend does. ``seen``: (method, path, the client's Authorization or None).
    """

    def __init__(self, upstream: str, authorization: str | None) -> None:
        super().__init__(_StorageHandler, address="127.0.0.2")
        self.upstream, self.authorization = upstream, authorization
        self.seen: list[tuple[str, str, str | None]] = []


class _StorageHandler(FakeHandler):
    server: Storage

    def do_GET(self) -> None:
        srv = self.server
        body = self.read_body()
        with srv.lock:
            srv.seen.append((self.command, self.path, self.headers.get("Authorization")))
        upstream = self.forward(srv.upstream, body, {"Authorization": srv.authorization,
                                                     "Host": srv.upstream})  # fmt: skip
        self.send_answer(upstream)

    do_HEAD = do_PUT = do_PATCH = do_POST = do_GET


class Diverter(FakeServer):
    """A relay on 127.0.0.1 in front of the registry at ``upstream`` (host:port).

    With ``uploads`` set, an upload's 202 gets a ``Location`` at ``storage`` (a URL);
    with ``blobs`` set, a blob GET is answered 307 to the same path at ``storage``.
    """

    def __init__(self, upstream: str, storage: str) -> None:
        super().__init__(_DiverterHandler)
        self.upstream, self.storage = upstream, storage
        self.uploads = self.blobs = False


class _DiverterHandler(FakeHandler):
    server: Diverter

    def do_GET(self) -> None:
        srv = self.server
        path = urlsplit(self.path).path
        if srv.blobs and self.command == "GET" and "/blobs/sha256:" in path:
            self.send_bytes(307, b"", {"Location": srv.storage + self.path})
            return
        upstream = self.forward(srv.upstream, self.read_body())
        location = upstream.headers.get("Location", "")
        if srv.uploads and self.command == "POST" and upstream.status_code == 202 and location:
            moved = urlsplit(location)._replace(scheme="http", netloc=urlsplit(srv.storage).netloc)
            self.send_answer(upstream, {"Location": moved.geturl()})
            return
        self.send_answer(upstream)

    do_HEAD = do_PUT = do_PATCH = do_POST = do_DELETE = do_GET


# --- images -----------------------------------------------------------------------------------

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _blob(root: Path, data: bytes) -> dict[str, Any]:
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def image_blobs(platform: str, version: str, content: bytes) -> dict[str, bytes]:
    """The config, layer and manifest bytes of a one-file image, by those names."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size, info.mtime = len(content), 0
        tar.addfile(info, io.BytesIO(content))
    layer = gzip.compress(raw.getvalue(), mtime=0)
    os_, arch, *variant = platform.split("/")
    config = json.dumps({
        "architecture": arch, "os": os_, **({"variant": variant[0]} if variant else {}),
        "config": {"Labels": {"org.opencontainers.image.version": version}},
        "rootfs": {"type": "layers",
                   "diff_ids": ["sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()]},
    }, sort_keys=True).encode()  # fmt: skip

    def desc(data: bytes, media: str) -> dict[str, Any]:
        return {"mediaType": media, "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "size": len(data)}  # fmt: skip

    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": desc(config, "application/vnd.oci.image.config.v1+json"),
        "layers": [desc(layer, "application/vnd.oci.image.layer.v1.tar+gzip")],
    }, sort_keys=True).encode()  # fmt: skip
    return {"config": config, "layer": layer, "manifest": manifest}


def oci_layout(root: Path, platforms: Sequence[str], version: str, *, tag: str = "t",
               attestation: bool = False) -> Path:  # fmt: skip
    """An OCI layout at ``root`` holding ``tag``: one image, or an index when >1 platform.

    A platform is ``os/arch`` or ``os/arch/variant``; the index lists them in the order given.
    """
    entries = []
    for platform in platforms:
        blobs = image_blobs(platform, version, f"{platform} {version}\n".encode())
        _blob(root, blobs["config"])
        _blob(root, blobs["layer"])
        desc = {"mediaType": OCI_MANIFEST, **_blob(root, blobs["manifest"])}
        os_, arch, *variant = platform.split("/")
        named = {"os": os_, "architecture": arch, **({"variant": variant[0]} if variant else {})}
        entries.append({**desc, "platform": named})
    if attestation:
        blobs = image_blobs("unknown/unknown", version, b'{"_type":"in-toto"}')
        _blob(root, blobs["config"])
        _blob(root, blobs["layer"])
        entries.append({"mediaType": OCI_MANIFEST, **_blob(root, blobs["manifest"]),
                        "platform": {"os": "unknown", "architecture": "unknown"}})  # fmt: skip
    if len(entries) == 1:
        top = {k: v for k, v in entries[0].items() if k != "platform"}
    else:
        body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries},
                          sort_keys=True).encode()  # fmt: skip
        top = {"mediaType": OCI_INDEX, **_blob(root, body)}
    top["annotations"] = {"org.opencontainers.image.ref.name": tag}
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return root


def skopeo(*args: str) -> str:
    if shutil.which("skopeo") is None:
        raise FileNotFoundError("skopeo")
    return subprocess.run(["skopeo", *args], check=True, capture_output=True).stdout.decode(
        "latin-1"
    )


def skopeo_copy(layout: Path, dest: str, *, creds: str | None = None, tag: str = "t") -> None:
    auth = ["--dest-creds", creds] if creds else []
    skopeo("copy", "--all", "--preserve-digests", "--dest-tls-verify=false", *auth,
           f"oci:{layout}:{tag}", f"docker://{dest}")  # fmt: skip


def skopeo_raw_digest(ref: str, *, creds: str | None = None) -> str:
    """sha256 of the bytes ``skopeo inspect --raw`` reads: the tag's top digest."""
    auth = ["--creds", creds] if creds else []
    out = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", *auth,
                          f"docker://{ref}"], check=True, capture_output=True).stdout  # fmt: skip
    return "sha256:" + hashlib.sha256(out).hexdigest()


def skopeo_digest(ref: str, *, creds: str | None = None) -> str:
    """``skopeo inspect --format {{.Digest}}``: the digest of the image for this host's arch."""
    auth = ["--creds", creds] if creds else []
    return skopeo("inspect", "--no-tags", "--tls-verify=false", *auth, "--format",
                  "{{.Digest}}", f"docker://{ref}").strip()  # fmt: skip


def skopeo_pick(ref: str, platform: str, dest: Path) -> str:
    """The child containers/image itself picks for ``platform``: copied, then hashed.

    ``skopeo inspect`` only reports the index digest, so the instance skopeo
    chooses (``--override-os/-arch/-variant``) is copied to a ``dir:`` and its
    manifest bytes hashed.
    """
    os_, arch, *variant = platform.split("/")
    override = ["--override-os", os_, "--override-arch", arch]
    override += ["--override-variant", variant[0]] if variant else []
    shutil.rmtree(dest, ignore_errors=True)
    skopeo(*override, "copy", "-q", "--src-tls-verify=false", f"docker://{ref}", f"dir:{dest}")
    return "sha256:" + hashlib.sha256((dest / "manifest.json").read_bytes()).hexdigest()
