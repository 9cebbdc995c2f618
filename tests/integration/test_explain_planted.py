"""Planted non-determinism is caught and explained with the right cause, one case each.

Each case is a tiny target FROM the busybox base whose one RUN step writes
something that changes between builds. ``reproduce_and_explain`` builds it
twice without cache with buildah (real builds, real storage), reads both
images through skopeo and names the cause. busybox has no Python, so the
``.pyc`` case synthesises a file named ``*.pyc`` whose header bytes 8..12 (a
real .pyc's source mtime) change between builds; the rest of it is constant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.engines import get_engine
from lockpipe.errors import EngineMissing
from lockpipe.imagebuild.run import Settings
from lockpipe.lock.model import load_lock
from lockpipe.verify import causes
from lockpipe.verify.reproduce import reproduce_and_explain
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.buildah]

UUID = "/proc/sys/kernel/random/uuid"
PLANTED = {
    # sleep 1: two builds' clocks are at least a second apart, so `date` differs.
    "date": ("sleep 1; date > /built-at", "built-at", causes.TIMESTAMPS),
    "pyc": (
        "mkdir -p /app/__pycache__ && { printf 'PYC0HEAD'; head -c 4 " + UUID + "; "
        "printf 'constant code'; } > /app/__pycache__/m.cpython-311.pyc",
        "app/__pycache__/m.cpython-311.pyc",
        causes.PYC,
    ),
    "apt-log": (
        f"mkdir -p /var/log/apt && cat {UUID} > /var/log/apt/history.log",
        "var/log/apt/history.log",
        causes.APT_LOG,
    ),
    "ldconfig": (
        f"mkdir -p /var/cache/ldconfig && cat {UUID} > /var/cache/ldconfig/aux-cache",
        "var/cache/ldconfig/aux-cache",
        causes.LDCONFIG,
    ),
    "uuid": (f"cat {UUID} > /instance-id", "instance-id", causes.RANDOM),
}


def _repo(root: Path, base: tuple[str, str], step: str, name: str) -> Path:
    document = doc()
    document["bases"]["busybox"] = {"ref": base[0], "digest": base[1]}
    document["targets"]["app"]["tag"] = f"localhost/lockpipe-test/planted-{name}:1"
    return make_repo(root, document, f"ARG BASE\nFROM ${{BASE}}\nRUN {step}\n")


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_planted_cause_is_named(case: str, busybox_base: tuple[str, str], tmp_path: Path) -> None:
    step, path, cause = PLANTED[case]
    try:
        engine = get_engine("buildah")
    except EngineMissing as exc:
        unavailable(f"buildah is not usable: {exc}")
    lock = load_lock(_repo(tmp_path, busybox_base, step, case))
    settings = Settings(state=tmp_path / "state", cache=tmp_path / "cache")

    result = reproduce_and_explain(lock, "app", engine, settings)

    assert not result.same, f"{case}: the planted step gave the same image twice"
    explanation = result.explanation
    assert explanation is not None
    assert explanation.causes[0] is cause, explanation.text()
    # Only the planted step's layer differs, and its first differing file is the planted one.
    (layer,) = explanation.layers
    assert layer.index == 2  # the busybox base is layer 1
    first = layer.files[0]
    assert (first.path, first.cause) == (path, cause), explanation.text()
    assert "content" in first.fields
    text = str(result)
    assert f"cause {cause.name}: {cause.why}; fix: {cause.fix}" in text
    assert f"/{path}: content" in text
    if cause is causes.PYC:
        assert "bytes 8..12" in first.detail
