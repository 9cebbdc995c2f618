"""One target built by buildah, podman and docker, compared by file tree (tar encoding ignored).

Measured here (Debian 12): buildah and podman write the same file tree, yet
their image IDs differ, because the build key (a label) names the engine and
its version; the explainer says so. docker 20.10's tree differs in every file
its RUN step wrote: the build clock's mtimes (no rewrite-timestamp) and the
owner's names ("root") that buildah leaves empty.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.engines import get_engine
from lockpipe.engines.base import Engine
from lockpipe.errors import EngineMissing
from lockpipe.imagebuild.records import read_record
from lockpipe.imagebuild.run import Settings
from lockpipe.lock.model import Lock, load_lock
from lockpipe.verify import causes
from lockpipe.verify.across import build_across
from lockpipe.verify.reproduce import explain_images
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = pytest.mark.integration

DOCKERFILE = """\
ARG BASE
FROM ${BASE}
RUN mkdir -p /app && echo fixed > /app/greeting && ln -s greeting /app/link && chmod 0750 /app
"""
WRITTEN = {"app", "app/greeting", "app/link"}


def _engine(name: str) -> Engine:
    try:
        return get_engine(name)
    except EngineMissing as exc:
        unavailable(f"engine {name} is not usable: {exc}")


def _lock(tmp_path: Path, base: tuple[str, str]) -> Lock:
    document = doc()
    document["bases"]["busybox"] = {"ref": base[0], "digest": base[1]}
    document["targets"]["app"]["tag"] = "localhost/lockpipe-test/across:1"
    return load_lock(make_repo(tmp_path, document, DOCKERFILE))


@pytest.mark.buildah
@pytest.mark.podman
def test_buildah_and_podman_write_the_same_file_tree(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    engines = [_engine("buildah"), _engine("podman")]
    lock = _lock(tmp_path, busybox_base)
    settings = Settings(state=tmp_path / "s", cache=tmp_path / "c", force=True)

    (comparison,) = build_across(lock, "app", engines, settings)

    assert (comparison.a, comparison.b) == ("buildah", "podman")
    assert comparison.paths > len(WRITTEN)  # the busybox applets and the step's files
    assert comparison.same, comparison.text()
    assert "the file trees agree" in str(comparison)
    assert "same" not in str(comparison).splitlines()[0]  # two image IDs: never "same"
    assert "config label io.github.lockpipe.build-key:" in str(comparison)
    # Equal trees, yet two image IDs: the build key label names the engine and its version.
    first = read_record(settings.state, "buildah", "app")
    second = read_record(settings.state, "podman", "app")
    assert first is not None and second is not None
    assert first.image_id != second.image_id
    explanation = explain_images("buildah", first.image_id, second.image_id)
    assert not explanation.layers, explanation.text()  # every layer byte-identical
    assert explanation.causes == (causes.ENGINE,), explanation.text()
    assert [d.field for d in explanation.config if "label" in d.field] == [
        "label io.github.lockpipe.build-key"
    ]


@pytest.mark.buildah
@pytest.mark.docker
def test_docker_tree_differs_where_its_step_wrote(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    engines = [_engine("buildah"), _engine("docker")]
    lock = _lock(tmp_path, busybox_base)
    settings = Settings(state=tmp_path / "s", cache=tmp_path / "c", force=True)

    (comparison,) = build_across(lock, "app", engines, settings)

    differing = {d.path for d in comparison.differing}
    # The base layer is the same blob for both; only what the RUN step wrote may differ.
    assert differing <= WRITTEN | {"run", "tmp", "proc", "sys", "dev"}, comparison.text()
    for d in comparison.differing:
        assert "content" not in d.fields and "mode" not in d.fields, comparison.text()
    if get_engine("docker").reproducibility().reproducible:
        return  # a dockerd with rewrite-timestamp: mtimes may agree; nothing more to hold
    assert differing >= WRITTEN, comparison.text()
    assert "mtime" in comparison.fields()


@pytest.mark.buildah
@pytest.mark.podman
@pytest.mark.docker
def test_reproduce_across_engines_from_the_command_line(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    """`lockpipe reproduce --across-engines buildah,docker`: docker 20.10's tree differs, so
    it exits 1 and names the differing paths; podman and buildah's identical trees exit 0."""
    lock = _lock(tmp_path, busybox_base)
    for name in ("buildah", "podman", "docker"):
        _engine(name)  # on CI a missing engine fails here, not as a skipped comparison

    def reproduce(engines: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "lockpipe", "reproduce", "app", "--lock", str(lock.path),
                "--state", str(tmp_path / "s"), "--across-engines", engines]  # fmt: skip
        return subprocess.run(argv, text=True, capture_output=True, check=False,
                              cwd=Path(__file__).resolve().parents[2])  # fmt: skip

    both = reproduce("buildah,podman")
    assert both.returncode == 0, both.stderr[-2000:]
    assert "buildah vs podman: the file trees agree" in both.stdout + both.stderr
    docker = reproduce("buildah,docker")
    out = docker.stdout + docker.stderr
    if "the file trees agree" in out:  # a dockerd that clamps file times (>= 26, where honoured)
        assert docker.returncode == 0
        return
    assert docker.returncode == 16, out[-2000:]  # a failed check, as verify --rebuild
    assert "buildah vs docker:" in out and "/app/greeting" in out, out[-2000:]
    assert "Traceback" not in out
