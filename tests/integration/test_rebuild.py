"""Publish → rebuild from the lock without cache → compare with the published image.

Real engines and the loopback registry. A reproducible target rebuilds to the
published config digest; a planted ``date`` step does not, and the published
image, copied back from the registry, is explained against the rebuild down
to the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.engines.base import Engine
from lockpipe.errors import LockError, RegistryError
from lockpipe.imagebuild.provenance import provenance_path
from lockpipe.imagebuild.records import read_record
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import Lock, load_lock
from lockpipe.publish.outputs import Published, images_path, write_images
from lockpipe.verify import causes
from lockpipe.verify.rebuild import rebuild_and_compare
from tests.lockfactory import make_repo, on_base, usable_engine

pytestmark = pytest.mark.integration

STEADY = "RUN mkdir -p /app && echo fixed > /app/greeting\n"
PLANTED = "RUN sleep 1; date > /built-at\n"


def _publish(
    tmp_path: Path, base: tuple[str, str], registry: str, engine: Engine, step: str, name: str
) -> tuple[Lock, Settings, str]:
    document = on_base(base, f"localhost/lockpipe-test/rebuild-{name}:1")
    lock = load_lock(make_repo(tmp_path, document, f"ARG BASE\nFROM ${{BASE}}\n{step}"))
    settings = Settings(state=tmp_path / "s", cache=tmp_path / "c", force=True)
    build_target(lock, "app", engine, settings)
    repo = f"{registry}/lockpipe-test/rebuild-{name}"
    digest = engine.push(lock.target("app").tag, f"{repo}:1", tls_verify=False)
    return lock, settings, f"{repo}@{digest}"


@pytest.mark.parametrize(
    "name", [pytest.param("buildah", marks=pytest.mark.buildah),
             pytest.param("podman", marks=pytest.mark.podman)],
)  # fmt: skip
def test_rebuild_matches_the_published_image(
    name: str, busybox_base: tuple[str, str], registry: str, tmp_path: Path
) -> None:
    engine = usable_engine(name)
    lock, settings, pinned = _publish(tmp_path, busybox_base, registry, engine, STEADY, name)

    result = rebuild_and_compare(lock, "app", engine, settings, pinned)

    assert result.same, str(result)
    assert result.explanation is None
    assert result.published == pinned
    assert f"matches {pinned}" in str(result)

    # A bare digest takes images.json's reference without its tag (skopeo refuses tag+digest).
    repo, digest = pinned.split("@")
    entry = Published(reference=f"{repo}:1", digest=digest, key="k" * 64, engine=name,
                      engine_version=engine.version(), published="2026-11-30")  # fmt: skip
    write_images(images_path(lock.path), {"app": entry})
    bare = rebuild_and_compare(lock, "app", engine, settings, digest)
    assert bare.same and bare.published == pinned, str(bare)
    # The rebuild kept its record, and the provenance beside it describes that record.
    record = read_record(settings.state, name, "app")
    written = json.loads(provenance_path(settings.state, name, "app").read_text())
    assert record is not None and record.image_id == bare.rebuilt
    assert written["subject"][0]["digest"]["sha256"] == record.image_id.removeprefix("sha256:")
    assert written["predicate"]["runDetails"]["metadata"]["finishedOn"] == record.built_at


@pytest.mark.buildah
def test_rebuild_of_a_planted_date_is_explained(
    busybox_base: tuple[str, str], registry: str, tmp_path: Path
) -> None:
    engine = usable_engine("buildah")
    lock, settings, pinned = _publish(
        tmp_path, busybox_base, registry, engine, PLANTED, "planted-buildah"
    )

    result = rebuild_and_compare(lock, "app", engine, settings, pinned)

    assert not result.same
    explanation = result.explanation
    assert explanation is not None
    assert explanation.causes[0] is causes.TIMESTAMPS, explanation.text()
    (layer,) = explanation.layers
    assert layer.files[0].path == "built-at"
    # The published side was read from the registry (gzip layers), the rebuild from storage.
    assert explanation.a == f"docker://{pinned}"
    assert "/built-at: content -> timestamps" in str(result)


@pytest.mark.buildah
def test_a_bare_digest_needs_a_published_reference(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    lock = load_lock(make_repo(tmp_path, on_base(busybox_base)))
    settings = Settings(state=tmp_path / "s", cache=tmp_path / "c")
    with pytest.raises(LockError) as info:
        rebuild_and_compare(lock, "app", usable_engine("buildah"), settings, "sha256:" + "0" * 64)
    assert "run nox -s publish" in str(info.value)
    with pytest.raises(RegistryError, match="not a digest"):
        rebuild_and_compare(lock, "app", usable_engine("buildah"), settings, "latest")
