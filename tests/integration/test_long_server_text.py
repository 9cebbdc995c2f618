"""A registry's text of 60,000 characters (a header as long as http.client reads one, or a
digest in a referrers index) is shown cut short in the error or line that names it, never
whole. The registry is the real one at LOCKPIPE_TEST_REGISTRY (127.0.0.1:5000), behind a
relay on 127.0.0.1 that puts the long text into one answer; before, each message carried
all 60,000 characters."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.imagebuild.provenance import MEDIA_TYPE
from lockpipe.publish.referrer import find_provenance
from lockpipe.registry.push import put_manifest, upload_blob
from lockpipe.registry.tags import list_tags
from lockpipe.registry.transport import Registry
from lockpipe.registry.upload import upload_file
from tests.conftest import REGISTRY
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
LONG = "7" * 60_000  # under http.client's 65,536 characters a header line
SHOWN = 400  # no message about it is longer
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
EMPTY = b"{}"
MANIFEST = (
    b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
    b'"config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:'
    + hashlib.sha256(EMPTY).hexdigest().encode()
    + b'","size":2},"layers":[]}'
)


class Lengthening(FakeServer):
    """Relays to the registry at ``upstream``; the answer ``lengthen`` picks gets the long
    text: a header of the ``site``'s, or (``referrer``) a referrers index of its own."""

    def __init__(self, upstream: str, site: str) -> None:
        super().__init__(_Handler)
        self.upstream, self.site, self.patches = upstream, site, 0
        self.lock = threading.Lock()


class _Handler(FakeHandler):
    server: Lengthening

    def relay(self) -> None:
        srv, path = self.server, self.path.split("?")[0]
        body = self.read_body()
        if srv.site == "referrer" and "/referrers/" in path:
            descriptor = {"mediaType": OCI_MANIFEST, "digest": f"sha256:{LONG}", "size": 2,
                          "artifactType": MEDIA_TYPE}  # fmt: skip
            self.send_json(200, {"schemaVersion": 2, "manifests": [descriptor]},
                           {"Content-Type": "application/vnd.oci.image.index.v1+json"})  # fmt: skip
            return
        answer = self.forward(self.server.upstream, body)
        extra: dict[str, str] = {}
        if srv.site == "push" and self.command == "PUT" and "/manifests/" in path:
            extra["Docker-Content-Digest"] = f"sha256:{LONG}"
        elif srv.site == "upload" and self.command == "PATCH":
            with srv.lock:
                srv.patches += 1
                if srv.patches == 2:  # the probe's Range is honest, the next one is not
                    extra["Range"] = f"0-1{LONG}"
        elif srv.site == "tags" and path.endswith("/tags/list"):
            extra["Link"] = f'<http://{LONG}.example/v2/x/tags/list?last=a>; rel="next"'
        self.send_answer(answer, extra)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = relay


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))  # no credentials of this machine's user
    monkeypatch.delenv("REGISTRY_AUTH_FILE", raising=False)
    monkeypatch.delenv("DOCKER_CONFIG", raising=False)
    return tmp_path


def _said(site: str, relay: Lengthening, tmp_path: Path) -> str:
    """The error (or, for a referrer, the line set aside) the long text ends up in."""
    reg = Registry(relay.host, scheme="http", credential=None)
    repo = f"lockpipe-test/long-{site}"
    if site == "referrer":
        found = find_provenance(f"{relay.host}/{repo}@sha256:{'a' * 64}")
        (line,) = found.skipped
        return line
    with pytest.raises(RegistryError) as err:
        if site == "push":
            put_manifest(reg, "lockpipe-test/long-push", "latest", MANIFEST,
                         OCI_MANIFEST)  # fmt: skip
        elif site == "upload":
            data = hashlib.sha256(tmp_path.name.encode()).digest() * 4096  # new bytes each run
            blob = tmp_path / "blob"
            blob.write_bytes(data)
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            upload_file(reg, repo, blob, digest, len(data), chunk=len(data) // 4)
        else:
            list_tags(f"{relay.host}/library/nothing", registry=reg)
    return str(err.value)


@pytest.mark.parametrize("site", ["push", "upload", "referrer", "tags"])
def test_a_registry_s_long_text_is_cut_short_where_it_is_shown(
    site: str, home: Path, tmp_path: Path
) -> None:
    relay = Lengthening(REGISTRY, site)
    try:
        reg = Registry(REGISTRY, scheme="http", credential=None)
        for repo in ("lockpipe-test/long-push", "library/nothing"):  # the manifest's config
            upload_blob(reg, repo, EMPTY, "sha256:" + hashlib.sha256(EMPTY).hexdigest())
        if site == "tags":  # a repository with a tag to list
            put_manifest(reg, "library/nothing", "1", MANIFEST,
                         OCI_MANIFEST)  # fmt: skip
        said = _said(site, relay, tmp_path)
    finally:
        relay.stop()
    assert "7" * 200 not in said and len(said) < SHOWN, said[:SHOWN]
    assert "\n" not in said
    assert {"push": "the registry stored 'sha256:777", "upload": "the registry holds '0-1777",
            "referrer": "referrer 'sha256:777", "tags": "next page is on another host ('777",
            }[site] in said, said[:SHOWN]  # fmt: skip
