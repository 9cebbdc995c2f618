"""Push primitives and referrers against the loopback registry (distribution 2.8).

2.8 has no referrers API, so :func:`referrers` and :func:`attach_referrer`
go through the referrers tag schema here; skopeo reads back what was pushed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.push import (
    attach_referrer,
    blob_exists,
    get_manifest,
    put_manifest,
    referrers,
    registry_for,
    upload_blob,
)
from lockpipe.registry.transport import Registry
from tests.policy import unavailable
from tests.registry_servers import OCI_INDEX, OCI_MANIFEST, image_blobs, skopeo_raw_digest

pytestmark = pytest.mark.integration
EMPTY = b"{}"
EMPTY_TYPE = "application/vnd.oci.empty.v1+json"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _push_image(reg: Registry, repository: str, tag: str, version: str) -> tuple[str, bytes]:
    blobs = image_blobs("linux/amd64", version, version.encode())
    for name in ("config", "layer"):
        upload_blob(reg, repository, blobs[name], _digest(blobs[name]))
    return put_manifest(reg, repository, tag, blobs["manifest"], OCI_MANIFEST), blobs["manifest"]


@pytest.fixture
def target(registry: str) -> tuple[Registry, str, str]:
    """(Registry, repository, ref prefix) for a fresh repository on the loopback registry."""
    if shutil.which("skopeo") is None:
        unavailable("skopeo is not installed")
    repository = f"lockpipe-test/push-{uuid.uuid4().hex[:8]}"
    reg, ep = registry_for(f"{registry}/{repository}:x")
    assert ep.scheme == "http" and ep.repository == repository
    return reg, repository, f"{registry}/{repository}"


def test_blobs_and_a_manifest_round_trip(target: tuple[Registry, str, str]) -> None:
    reg, repository, name = target
    blobs = image_blobs("linux/amd64", "rt", b"round trip\n")
    layer = _digest(blobs["layer"])
    assert not blob_exists(reg, repository, layer)
    upload_blob(reg, repository, blobs["layer"], layer)
    assert blob_exists(reg, repository, layer)
    upload_blob(reg, repository, blobs["layer"], layer)  # already there: skipped, no error
    upload_blob(reg, repository, blobs["config"], _digest(blobs["config"]))
    digest = put_manifest(reg, repository, "1", blobs["manifest"], OCI_MANIFEST)
    assert digest == _digest(blobs["manifest"]) == skopeo_raw_digest(f"{name}:1")
    body, media_type = get_manifest(reg, repository, digest)
    assert body == blobs["manifest"] and media_type == OCI_MANIFEST
    assert get_manifest(reg, repository, "1")[0] == blobs["manifest"]


def test_a_blob_that_does_not_match_its_digest_is_not_uploaded(
    target: tuple[Registry, str, str],
) -> None:
    reg, repository, _ = target
    wrong = _digest(b"other bytes")
    with pytest.raises(RegistryError, match="bytes do not match their digest"):
        upload_blob(reg, repository, b"these bytes", wrong)
    assert not blob_exists(reg, repository, wrong)


def _artifact(subject: str, size: int, kind: str, note: str) -> bytes:
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": kind,
        "config": {"mediaType": EMPTY_TYPE, "digest": _digest(EMPTY), "size": len(EMPTY)},
        "layers": [{"mediaType": EMPTY_TYPE, "digest": _digest(EMPTY), "size": len(EMPTY)}],
        "subject": {"mediaType": OCI_MANIFEST, "digest": subject, "size": size},
        "annotations": {"org.example.note": note},
    }, sort_keys=True).encode()  # fmt: skip


def test_referrers_fall_back_to_the_tag_schema_on_registry_2_8(
    target: tuple[Registry, str, str],
) -> None:
    reg, repository, name = target
    subject, manifest = _push_image(reg, repository, "1", "subject")
    upload_blob(reg, repository, EMPTY, _digest(EMPTY))
    sbom = _artifact(subject, len(manifest), "application/spdx+json", "sbom")
    sig = _artifact(subject, len(manifest), "application/vnd.dev.cosign.artifact.sig.v1+json", "s")
    assert referrers(reg, repository, subject) == []
    first = attach_referrer(reg, repository, sbom, subject)
    second = attach_referrer(reg, repository, sig, subject)
    assert attach_referrer(reg, repository, sbom, subject) == first  # again: no duplicate
    found = referrers(reg, repository, subject)
    assert [d["digest"] for d in found] == [first, second]
    assert found[0]["artifactType"] == "application/spdx+json"
    assert found[0]["annotations"] == {"org.example.note": "sbom"}
    only = referrers(reg, repository, subject, "application/spdx+json")
    assert [d["digest"] for d in only] == [first]
    tag = subject.replace(":", "-")
    index = json.loads(get_manifest(reg, repository, tag)[0])
    assert index["mediaType"] == OCI_INDEX and len(index["manifests"]) == 2
    assert skopeo_raw_digest(f"{name}@{first}") == first
    assert skopeo_raw_digest(f"{name}:{tag}") == _digest(get_manifest(reg, repository, tag)[0])


def test_an_artifact_for_another_subject_is_refused(target: tuple[Registry, str, str]) -> None:
    reg, repository, _ = target
    other = _artifact("sha256:" + "1" * 64, 10, "application/spdx+json", "x")
    with pytest.raises(RegistryError, match="subject is not"):
        attach_referrer(reg, repository, other, "sha256:" + "2" * 64)
