"""find_provenance reads an image's referrers within bounds: a FAKE registry on 127.0.0.1
of one image manifest and ``count`` in-toto referrers, each carrying a lockpipe statement
padded to ``pad`` bytes (the bounds are lowered for the test)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.imagebuild.provenance import BUILD_TYPE, MEDIA_TYPE, PREDICATE_TYPE, STATEMENT_TYPE
from lockpipe.publish import referrer
from tests.httpfake import FakeHandler, FakeServer

pytestmark = pytest.mark.integration
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _statement(i: int, pad: int) -> bytes:
    build = {"buildType": BUILD_TYPE, "externalParameters": {"target": "app"},
             "internalParameters": {}, "resolvedDependencies": [{"name": "x"}]}  # fmt: skip
    doc = {"_type": STATEMENT_TYPE, "predicateType": PREDICATE_TYPE, "pad": "x" * pad,
           "predicate": {"buildDefinition": build, "runDetails": {
               "byproducts": [{"digest": {"sha256": "0"}}],
               "metadata": {"finishedOn": f"2026-01-{i + 1:02}T00:00:00Z"}}}}  # fmt: skip
    return json.dumps(doc).encode()


class Referred(FakeServer):
    """FAKE registry (see the module docstring); ``blobs``: the statement blobs asked for."""

    def __init__(self, count: int, pad: int) -> None:
        config = {"mediaType": OCI_MANIFEST, "digest": _digest(b"{}"), "size": 2}
        self.manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                    "config": config, "layers": []}).encode()  # fmt: skip
        self.digest = _digest(self.manifest)
        self.bodies = {self.digest: self.manifest}
        self.blobs: dict[str, bytes] = {}
        self.listed = []
        for i in range(count):
            blob = _statement(i, pad)
            layer = {"mediaType": MEDIA_TYPE, "digest": _digest(blob), "size": len(blob)}
            art = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                              "artifactType": MEDIA_TYPE, "config": config,
                              "layers": [layer]}).encode()  # fmt: skip
            self.blobs[_digest(blob)] = blob
            self.bodies[_digest(art)] = art
            self.listed.append({"mediaType": OCI_MANIFEST, "digest": _digest(art),
                                "size": len(art), "artifactType": MEDIA_TYPE})  # fmt: skip
        self.asked: list[str] = []
        super().__init__(_Handler)

    @property
    def pinned(self) -> str:
        return f"{self.host}/t/app@{self.digest}"


class _Handler(FakeHandler):
    server: Referred

    def do_GET(self) -> None:
        srv, name = self.server, self.path.rpartition("/")[2]
        if "/manifests/" in self.path and name in srv.bodies:
            headers = {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": name}
            self.send_bytes(200, srv.bodies[name], headers)
        elif "/blobs/" in self.path and name in srv.blobs:
            srv.asked.append(name)
            self.send_bytes(200, srv.blobs[name], {"Content-Type": "application/octet-stream"})
        elif self.path.startswith(f"/v2/t/app/referrers/{srv.digest}"):
            index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": srv.listed}
            self.send_json(200, index, {"Content-Type": OCI_INDEX})
        else:
            self.send_json(404, {"errors": [{"code": "NOT_FOUND"}]})

    do_HEAD = do_GET


@pytest.fixture(autouse=True)
def _small_bounds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "none.json"))
    for name, value in (("MAX_STATEMENT", 64 << 10), ("MAX_REFERRERS", 4), ("MAX_KEPT", 160 << 10)):
        monkeypatch.setattr(referrer, name, value, raising=False)


def test_within_the_bounds_every_statement_is_kept_newest_first() -> None:
    registry = Referred(count=4, pad=30 << 10)
    found = referrer.find_provenance(registry.pinned)
    assert [d for d, _ in found.statements] == [d["digest"] for d in reversed(registry.listed)]
    registry.stop()


def test_a_statement_blob_past_the_bound_is_set_aside_not_read_whole() -> None:
    """Each blob was read to the 64 MiB every answer may have, and every one kept."""
    registry = Referred(count=1, pad=128 << 10)
    found = referrer.find_provenance(registry.pinned)
    assert found.statements == ()
    (line,) = found.skipped
    assert f"referrer {registry.listed[0]['digest']}: its statement blob" in line
    assert "answered more than 65,536 bytes" in line, line
    registry.stop()


def test_more_referrers_than_the_bound_is_an_error_naming_the_image() -> None:
    registry = Referred(count=5, pad=10)
    with pytest.raises(RegistryError, match=r"t/app@sha256:[0-9a-f]{64}: 5 in-toto referrers, "
                                             r"more than the 4 lockpipe reads"):  # fmt: skip
        referrer.find_provenance(registry.pinned)
    assert registry.asked == []  # refused before any statement is read
    registry.stop()


def test_statements_past_the_total_bound_are_an_error_not_a_verdict_from_some() -> None:
    registry = Referred(count=4, pad=60 << 10)
    past = r"t/app@sha256:[0-9a-f]{64}: lockpipe's provenance referrers have more than 163840"
    with pytest.raises(RegistryError, match=past + " bytes in all"):
        referrer.find_provenance(registry.pinned)
    registry.stop()
