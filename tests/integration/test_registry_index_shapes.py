"""``lockpipe refresh-digests`` against a registry whose image index has another shape.

A FAKE registry (a real HTTP server on 127.0.0.1; no real registry stores an index it
cannot parse) serves one multi-arch tag: an index, its linux/amd64 image manifest and
that image's config, each under its true digest. The index is then broken one way at a
time; each must be one RegistryError (exit 18) naming the reference and the key, with
the lock left byte for byte as it was, never a traceback or a digest that is not one
written into the lock (issue 18 review).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import RegistryError
from lockpipe.lock.model import load_lock
from tests.httpfake import FakeHandler, FakeServer
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
ZERO = "sha256:" + "0" * 64


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class FakeRegistry(FakeServer):
    """FAKE registry of ``lockpipe-test/multi:1``: ``index`` (a document, broken by each
    test), and the amd64 image it lists first, by digest."""

    def __init__(self) -> None:
        self.config = json.dumps({"os": "linux", "architecture": "amd64"}).encode()
        self.image = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
                                 "config": {"mediaType": OCI_CONFIG, "size": len(self.config),
                                            "digest": _digest(self.config)}}).encode()  # fmt: skip
        amd64 = {"mediaType": OCI_MANIFEST, "digest": _digest(self.image), "size": len(self.image),
                 "platform": {"os": "linux", "architecture": "amd64"}}  # fmt: skip
        arm64 = {**amd64, "platform": {"os": "linux", "architecture": "arm64"}}
        self.index: Any = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [amd64, arm64]}
        self.raw: bytes | None = None  # served as the tag's manifest instead of the index
        self.token: bytes | None = None  # set: /v2/ asks for a Bearer token, /token answers this
        self.location: str | None = None  # set: every request is sent on there (307)
        self.retry_after: str | None = None  # set: every request is answered 429 with it
        self.ratelimit: str | None = None  # set: the ratelimit-remaining of every answer
        self.paths: list[str] = []  # every path asked
        super().__init__(_Handler)

    def body(self) -> bytes:
        return json.dumps(self.index).encode() if self.raw is None else self.raw


class _Handler(FakeHandler):
    server: FakeRegistry

    def end_headers(self) -> None:
        if self.server.ratelimit is not None:
            self.send_header("ratelimit-remaining", self.server.ratelimit)
        super().end_headers()

    def do_GET(self) -> None:
        srv = self.server
        name = self.path.rpartition("/")[2]
        srv.paths.append(self.path)
        if srv.location is not None:
            self.send_bytes(307, b"", {"Location": srv.location})
        elif srv.retry_after is not None:
            self.send_json(429, {"errors": []}, {"Retry-After": srv.retry_after})
        elif srv.token is not None and self.path.startswith("/token"):
            self.send_bytes(200, srv.token, {"Content-Type": "application/json"})
        elif srv.token is not None and not self.headers.get("Authorization"):
            challenge = f'Bearer realm="{srv.url}/token",service="fake"'
            self.send_json(401, {"errors": []}, {"WWW-Authenticate": challenge})
        elif self.path == "/v2/":
            self.send_json(200, {})
        elif self.path == "/v2/lockpipe-test/multi/manifests/1" or name == _digest(srv.body()):
            body = srv.body()
            self.send_bytes(200, body, {"Content-Type": OCI_INDEX,
                                        "Docker-Content-Digest": _digest(body)})  # fmt: skip
        elif name == _digest(srv.image):
            self.send_bytes(200, srv.image, {"Content-Type": OCI_MANIFEST,
                                             "Docker-Content-Digest": name})  # fmt: skip
        elif name == _digest(srv.config):
            self.send_bytes(200, srv.config, {"Content-Type": OCI_CONFIG})
        else:
            self.send_json(404, {"errors": [{"code": "NOT_FOUND"}]})

    do_HEAD = do_GET


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    server = FakeRegistry()
    yield server
    server.stop()


def _entries(change: Callable[[list[Any]], None]) -> Callable[[Any], None]:
    def apply(index: Any) -> None:
        change(index["manifests"])

    return apply


def _set(key: str, value: Any) -> Callable[[Any], None]:
    def apply(index: Any) -> None:
        index[key] = value

    return apply


def _arm64(key: str, value: Any) -> Callable[[list[Any]], None]:
    def apply(entries: list[Any]) -> None:
        entries[1][key] = value

    return apply


@pytest.mark.parametrize(
    ("breaks", "words"),
    [
        (_set("manifests", 5), "manifests is an integer, not a list"),
        (_entries(lambda e: e.append("linux/s390x")), "manifests[2] is a string, not an object"),
        (_entries(_arm64("platform", "linux/arm64")),
         "manifests[1].platform is a string, not an object"),
        (_entries(_arm64("digest", "sha256:not-a-digest")),
         "manifests[1].digest is 'sha256:not-a-digest', not sha256:<64 hex>"),
        (_entries(_arm64("digest", 7)), "manifests[1].digest is an integer, not a string"),
    ],
    ids=["manifests-a-number", "an-entry-a-string", "platform-a-string", "digest-not-one",
         "digest-a-number"],
)  # fmt: skip
def test_an_index_of_another_shape_is_one_line_and_the_lock_is_untouched(
    registry: FakeRegistry, tmp_path: Path, breaks: Callable[[Any], None], words: str
) -> None:
    ref, lock, refresh, env = _refresh(registry, tmp_path)
    good = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert good.returncode == 0, good.stderr  # the index as it should be: both pinned
    pinned = load_lock(lock).bases["busybox"]
    assert set(pinned.platforms.values()) == {json.loads(registry.body())["manifests"][0]["digest"]}
    breaks(registry.index)
    _refused(ref, lock, refresh, env, words)


def test_a_manifest_nested_too_deeply_is_one_line(registry: FakeRegistry, tmp_path: Path) -> None:
    """json's decoder recurses per level: a manifest of 100,000 '[' under its true digest
    was a RecursionError traceback."""
    registry.raw = b"[" * 100_000
    ref, lock, refresh, env = _refresh(registry, tmp_path)
    _refused(ref, lock, refresh, env, "the manifest is nested too deeply to read")


@pytest.mark.parametrize(
    "token",
    [b"[" * 100_000, b'{"token": "abc", "expires_in": ' + b"9" * 5000 + b"}"],
    ids=["deep", "5000-digits"],
)
def test_a_token_answer_json_cannot_read_is_one_line(
    registry: FakeRegistry, tmp_path: Path, token: bytes
) -> None:
    """The token server's answer went through requests' json(): a RecursionError traceback.
    Then an answer json cannot read (a lifetime of 5000 digits beside a token) was 'answered
    without a token', which it did not."""
    registry.token = token
    _, lock, refresh, env = _refresh(registry, tmp_path)
    before = lock.read_bytes()
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    said = f"the token server at {registry.url}/token answered 200 with a body that is not JSON"
    assert said in done.stderr, done.stderr
    assert lock.read_bytes() == before


@pytest.mark.parametrize(
    "token", ["abc\ndef", "abc def", "\u2603"], ids=["newline", "space", "snowman"]
)
def test_a_token_that_cannot_be_a_header_is_the_token_servers_fault(
    registry: FakeRegistry, tmp_path: Path, token: str
) -> None:
    """A newline in the token was 'registry unreachable (InvalidHeader) after 5 tries; check
    the network, DNS or proxy', after 7.5 s of retries."""
    registry.token = json.dumps({"token": token}).encode()
    _, lock, refresh, env = _refresh(registry, tmp_path)
    before = lock.read_bytes()
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    assert "unreachable" not in done.stderr, done.stderr
    assert (f"the token server at {registry.url}/token answered a token that cannot be sent "
            "in a header") in done.stderr, done.stderr  # fmt: skip
    assert lock.read_bytes() == before


def test_a_redirect_to_what_is_not_a_url_is_said_once(
    registry: FakeRegistry, tmp_path: Path
) -> None:
    """A Location of http://[::1/x was 'registry HOST unreachable (ValueError) after 5 tries;
    check the network, DNS or proxy', after 7.5 s of retries."""
    registry.location = "http://[::1/x"
    _, _, refresh, env = _refresh(registry, tmp_path)
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    assert "unreachable" not in done.stderr, done.stderr
    said = "the request cannot be sent (InvalidURL: its Location 'http://[::1/x' is not a URL"
    assert said in done.stderr, done.stderr
    assert "after 1 try" in done.stderr, done.stderr


@pytest.mark.parametrize("config", ["sha256:../../../multi/manifests/1", "sha256:abc"])
def test_a_config_digest_that_is_not_one_is_never_asked(
    registry: FakeRegistry, tmp_path: Path, config: str
) -> None:
    """The image manifest's config digest went into the blob URL as it was: '../..' asked
    another path, and its bytes were then called altered by a proxy (exit 9)."""
    image = json.loads(registry.image)
    image["config"]["digest"] = config
    registry.image = json.dumps(image).encode()
    for entry in registry.index["manifests"]:
        entry["digest"], entry["size"] = _digest(registry.image), len(registry.image)
    ref, lock, refresh, env = _refresh(registry, tmp_path)
    _refused(ref, lock, refresh, env, f"config.digest is {config!r}, not sha256:<64 hex>")
    assert not [p for p in registry.paths if "/blobs/" in p], registry.paths


def test_a_retry_after_past_any_date_is_said_once(registry: FakeRegistry, tmp_path: Path) -> None:
    """Retry-After: 99999999999999999999 was an OverflowError traceback: the wait too long
    to sleep was named by a date no time_t holds."""
    registry.retry_after = "9" * 20
    _, _, refresh, env = _refresh(registry, tmp_path)
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    assert f"rate limited by {registry.host} for 100000000000000000000 s, log in" in done.stderr


def test_a_retry_after_of_a_latin1_digit_is_as_none(registry: FakeRegistry, tmp_path: Path) -> None:
    """Retry-After: \\xb2 (Latin-1's superscript two, which str.isdigit takes for a digit) was
    a ValueError traceback from float('\u00b2'); it is unreadable, so the backoff applies."""
    registry.retry_after = "\xb2"
    _, _, refresh, env = _refresh(registry, tmp_path)
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    assert f"{registry.host} is rate limiting (429) after 5 tries" in done.stderr, done.stderr


def test_a_ratelimit_of_a_latin1_digit_is_as_none(registry: FakeRegistry, tmp_path: Path) -> None:
    """ratelimit-remaining: \\xb2 was a ValueError traceback from int('\u00b2')."""
    registry.ratelimit = "\xb2;w=21600"
    _, _, refresh, env = _refresh(registry, tmp_path)
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_token_lifetime_past_any_float_is_read(registry: FakeRegistry, tmp_path: Path) -> None:
    """expires_in of 400 digits was an OverflowError traceback (int too large for a float)."""
    registry.token = b'{"token": "abc", "expires_in": 1' + b"0" * 400 + b"}"
    _, _, refresh, env = _refresh(registry, tmp_path)
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


def _refresh(registry: FakeRegistry, tmp_path: Path) -> tuple[str, Path, list[str], dict[str, str]]:
    """The reference, a lock pinning it, and the refresh-digests command and environment."""
    ref = f"{registry.host}/lockpipe-test/multi:1"
    platforms = {"linux/amd64": ZERO, "linux/arm64": ZERO}
    base = {"ref": ref, "digest": ZERO, "platform": "linux/amd64", "platforms": platforms}
    lock = make_repo(tmp_path / "checkout", doc(bases={"busybox": base}))
    refresh = [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock),
               "--kind", "bases"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home"),
           "LOCKPIPE_CACHE": str(tmp_path / "cache")}  # fmt: skip
    return ref, lock, refresh, env


def _refused(ref: str, lock: Path, refresh: list[str], env: dict[str, str], words: str) -> None:
    """refresh-digests exits 18 saying ``words`` about ``ref``; the lock is untouched."""
    before = lock.read_bytes()
    done = subprocess.run(refresh, cwd=REPO, text=True, capture_output=True, env=env)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    assert f"{ref}: {words}; the registry is broken" in done.stderr, done.stderr
    assert lock.read_bytes() == before
