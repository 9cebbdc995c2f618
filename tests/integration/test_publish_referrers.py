"""publish → verify through a registry that has the OCI 1.1 referrers API.

Debian's registry 2.8 has none, so :class:`ReferrersProxy` adds it. It is a
FAKE of that one part: a real HTTP server on 127.0.0.1 that relays every
request to the loopback registry unchanged, and in front of it answers
``OCI-Subject`` to a manifest PUT that has a ``subject`` and serves
``GET /v2/<repo>/referrers/<digest>[?artifactType=…]`` from what it saw, as
distribution 3 and zot do. Its query is decoded as Go's ``url.ParseQuery``
decodes it (a bare ``+`` is a space), so an unencoded ``+`` in
``application/vnd.in-toto+json`` finds nothing. Real engines push through it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import RegistryError, UsageError
from lockpipe.imagebuild.provenance import MEDIA_TYPE
from lockpipe.lock.model import load_lock
from lockpipe.publish.outputs import images_path, read_images
from lockpipe.publish.referrer import artifact_manifest, attach_provenance
from lockpipe.registry.client import registry_for
from lockpipe.registry.push import attach_referrer, get_manifest, upload_blob
from lockpipe.verify.check import verify_image
from tests.httpfake import FakeHandler, FakeServer
from tests.lockfactory import buildah_built

pytestmark = [pytest.mark.integration, pytest.mark.buildah]
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
WRITES = ("PUT", "POST", "PATCH", "DELETE")


class ReferrersProxy(FakeServer):
    """FAKE referrers API (see the module docstring) in front of ``upstream``."""

    def __init__(self, upstream: str) -> None:
        super().__init__(_Handler)
        self.upstream = upstream
        self.referrers: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.seen: list[tuple[str, str, int]] = []  # (method, path with query, status)


class _Handler(FakeHandler):
    server: ReferrersProxy

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        repo, sep, subject = parts.path.removeprefix("/v2/").rpartition("/referrers/")
        if sep:
            self._referrers(repo, subject, parse_qs(parts.query).get("artifactType"))
        else:
            self._relay()

    def do_HEAD(self) -> None:
        self._relay()

    do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD

    def _referrers(self, repo: str, subject: str, wanted: list[str] | None) -> None:
        with self.server.lock:
            found = list(self.server.referrers.get((repo, subject), []))
        headers = {"Content-Type": OCI_INDEX}
        if wanted:
            found = [d for d in found if d.get("artifactType") in wanted]
            headers["OCI-Filters-Applied"] = "artifactType"
        body = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": found})
        self.server.seen.append((self.command, self.path, 200))
        self.send_bytes(200, body.encode(), headers)

    def _relay(self) -> None:
        proxy = self.server
        body = self.read_body()
        upstream = self.forward(proxy.upstream, body)
        extra: dict[str, str] = {}
        path = urlsplit(self.path).path
        if self.command == "PUT" and "/manifests/" in path and upstream.status_code == 201:
            subject = self._note_subject(path, body or b"", self.headers.get("Content-Type"))
            if subject:
                extra["OCI-Subject"] = subject
        proxy.seen.append((self.command, self.path, upstream.status_code))
        self.send_answer(upstream, extra)

    def _note_subject(self, path: str, body: bytes, media_type: str | None) -> str | None:
        try:
            manifest = json.loads(body)
        except ValueError:
            return None
        subject = manifest.get("subject") if isinstance(manifest, dict) else None
        if not isinstance(subject, dict):
            return None
        repo = path.removeprefix("/v2/").rpartition("/manifests/")[0]
        desc: dict[str, Any] = {
            "mediaType": manifest.get("mediaType") or media_type,
            "digest": "sha256:" + hashlib.sha256(body).hexdigest(), "size": len(body),
        }  # fmt: skip
        kind = manifest.get("artifactType") or (manifest.get("config") or {}).get("mediaType")
        if kind:
            desc["artifactType"] = kind
        with self.server.lock:
            listed = self.server.referrers.setdefault((repo, str(subject["digest"])), [])
            if all(d["digest"] != desc["digest"] for d in listed):
                listed.append(desc)
        return str(subject["digest"])


@pytest.fixture
def proxy(registry: str) -> Iterator[ReferrersProxy]:
    server = ReferrersProxy(registry)
    yield server
    server.stop()


def _lock_and_build(tmp_path: Path, base: tuple[str, str]) -> tuple[Path, Path]:
    return buildah_built(tmp_path, base, "localhost/lockpipe-test/pub-referrers:1")


def _attach_raw(pinned: str, blob: bytes) -> str:
    """A referrer carrying ``blob`` as its in-toto layer, as another tool might attach one."""
    reg, ep = registry_for(pinned)
    digest = pinned.rpartition("@")[2]
    body, media_type = get_manifest(reg, ep.repository, digest)
    subject = {"mediaType": media_type, "digest": digest, "size": len(body)}
    for data in (b"{}", blob):
        upload_blob(reg, ep.repository, data, "sha256:" + hashlib.sha256(data).hexdigest())
    return attach_referrer(reg, ep.repository, artifact_manifest(blob, subject), digest)


def test_publish_and_verify_through_the_referrers_api(
    proxy: ReferrersProxy, busybox_base: tuple[str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    lock, state = _lock_and_build(tmp_path, busybox_base)
    prefix = f"{proxy.host}/lockpipe-referrers-{uuid.uuid4().hex[:8]}"
    args = ["--lock", str(lock), "--state", str(state)]
    assert main(["publish", "app", "--engine", "buildah", "--to", prefix, *args]) == 0
    entry = read_images(images_path(lock))["app"]
    repo = entry.reference.split("/", 1)[1].rsplit(":", 1)[0]

    # The artifact went up once, and the registry's OCI-Subject answer meant no fallback tag.
    puts = [p for m, p, _ in proxy.seen if m == "PUT" and "/manifests/" in p]
    assert not [p for p in puts if "/manifests/sha256-" in p], puts
    (listed,) = proxy.referrers[(repo, entry.digest)]
    assert listed["artifactType"] == MEDIA_TYPE
    # The filter reached the registry with its + encoded, and matched.
    queries = [p for _, p, _ in proxy.seen if "/referrers/" in p]
    wanted = f"/v2/{repo}/referrers/{entry.digest}?artifactType=application%2Fvnd.in-toto%2Bjson"
    assert wanted in queries, queries

    # Other in-toto referrers (another tool's statement, a non-JSON blob) are passed over.
    other = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "x", "predicate": {
        "buildDefinition": {"buildType": "https://example.com/other"}}}  # fmt: skip
    foreign = attach_provenance(entry.pinned, other)
    garbage = _attach_raw(entry.pinned, b"not json at all")
    assert main(["verify", "app", "--image", entry.pinned, *args]) == 0
    assert verify_image(load_lock(lock), "app", entry.pinned).provenance == listed["digest"]

    # A second publish of the same build: nothing written, its provenance found, not re-sent.
    before = len(proxy.seen)
    assert main(["publish", "app", "--engine", "buildah", "--to", prefix, *args]) == 0
    writes = [(m, p) for m, p, _ in proxy.seen[before:] if m in WRITES]
    assert not writes, writes
    assert "unchanged" in capsys.readouterr().err

    # An image with only others' referrers: a clear error naming each, no traceback.
    base_ref = f"{proxy.host}/{busybox_base[0].split('/', 1)[1].rsplit(':', 1)[0]}"
    pinned = f"{base_ref}@{busybox_base[1]}"
    _attach_raw(pinned, b"\xff\xfe binary")
    with pytest.raises(RegistryError) as info:
        verify_image(load_lock(lock), "app", pinned)
    text = str(info.value)
    assert "no lockpipe provenance referrer" in text and "is not JSON" in text
    assert foreign != garbage


def test_the_digest_is_recorded_before_the_attach_and_force_pushes_again(
    proxy: ReferrersProxy, busybox_base: tuple[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    lock, state = _lock_and_build(tmp_path, busybox_base)
    prefix = f"{proxy.host}/lockpipe-referrers-{uuid.uuid4().hex[:8]}"
    args = ["publish", "app", "--engine", "buildah", "--to", prefix, "--lock", str(lock),
            "--state", str(state)]  # fmt: skip

    def refused(pinned: str, doc: dict[str, Any]) -> str:
        raise RegistryError(f"{pinned}: the attach was refused (injected)")

    # The attach fails after a real push: the pushed digest is in images.json all the same.
    monkeypatch.setattr("lockpipe.publish.push.attach_provenance", refused)
    assert main(args) == RegistryError.return_code
    entry = read_images(images_path(lock))["app"]
    monkeypatch.undo()
    before = len(proxy.seen)
    assert main(args) == 0  # unchanged: no image upload, the missing provenance attached
    again = proxy.seen[before:]
    tag_put = f"/manifests/{entry.reference.rsplit(':', 1)[1]}"
    puts = [p for m, p, _ in again if m == "PUT" and "/manifests/" in p]
    assert puts and not [p for p in puts if p.endswith(tag_put)], again  # only the referrer
    # Two blob uploads at most: the statement and the empty config; no image layer.
    assert len([p for m, p, _ in again if m == "POST"]) <= 2, again
    assert read_images(images_path(lock))["app"] == entry

    # --force pushes even so; verify refuses a --force it would ignore.
    before = len(proxy.seen)
    assert main([*args, "--force"]) == 0
    assert [p for m, p, _ in proxy.seen[before:] if m == "PUT" and p.endswith(tag_put)]
    with pytest.raises(SystemExit) as no_force:  # the command line: verify has no --force
        main(["verify", "app", "--published", "--force", *args[6:]])
    assert no_force.value.code == UsageError.return_code
