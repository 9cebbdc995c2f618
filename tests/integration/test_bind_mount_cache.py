"""A RUN's bind-mounted context file, edited, is read again by a cached build.

buildah 1.28 keys a RUN's layer cache on its parent and command text, not on
what it bind-mounts, so without the staged digest (imagebuild/context.py
``mark_mounts``) the second build below took the first one's layer: a cached
build and a clean one of the same lock differed. Real engines, the loopback
registry's busybox base.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import load_lock
from tests.lockfactory import make_repo, on_base, usable_engine

pytestmark = pytest.mark.integration
RECIPE = (
    "ARG BASE\nFROM ${BASE}\n"
    "RUN --mount=type=bind,source=req.txt,target=/tmp/req.txt cp /tmp/req.txt /req\n"
)


@pytest.mark.parametrize(
    "name", [pytest.param("buildah", marks=pytest.mark.buildah),
             pytest.param("podman", marks=pytest.mark.podman)],
)  # fmt: skip
def test_an_edited_bind_mounted_file_is_not_taken_from_the_cache(
    name: str, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    engine = usable_engine(name)
    document = on_base(busybox_base, f"localhost/lockpipe-test/bind-cache-{name}:1")
    context = tmp_path / "images" / "app"
    context.mkdir(parents=True)
    layers = []
    for text in ("one\n", "two\n", "one\n"):
        (context / "req.txt").write_text(text)
        lock = load_lock(make_repo(tmp_path, document, RECIPE))  # relocked: the file moved
        settings = Settings(state=tmp_path / "s", cache=tmp_path / "c")  # the cache allowed
        build_target(lock, "app", engine, settings)
        layers.append(engine.layers(lock.target("app").tag)[-1])
    assert layers[0] != layers[1], f"{name}: the edited file's RUN was taken from the cache"
    assert layers[2] == layers[0], f"{name}: the same bytes must give the same layer again"
