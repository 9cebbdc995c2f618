"""``lockpipe smoke`` as a user runs it: nothing is downloaded for an image that is not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.engines import get_engine
from lockpipe.engines.base import Engine
from lockpipe.errors import EngineMissing, SmokeConfigError, SmokeError
from lockpipe.lock.model import Target, parse_lock
from lockpipe.smoke.external import external_image, external_spec
from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[2]


def test_a_target_never_built_fails_before_any_download(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "smoke", "llama-cpu", "--engine", "buildah",
         "--state", str(tmp_path / "state"), "--store", str(store), "--quiet"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == SmokeError.return_code, out.stderr
    assert "no build record" in out.stderr and "build it first" in out.stderr
    assert not store.exists() or not any(store.rglob("*")), "something was downloaded"


@pytest.mark.parametrize("which", ["--expect", "smoke.json"])
def test_a_deeply_nested_file_is_one_line_naming_it(tmp_path: Path, which: str) -> None:
    """json's decoder recurses per level: the expectations file, or the smoke.json this run
    merges into, nested some 100,000 deep was a RecursionError's traceback (issue 18)."""
    deep = tmp_path / ("expect.json" if which == "--expect" else "out/smoke.json")
    deep.parent.mkdir(exist_ok=True)
    deep.write_text("[" * 100_000)
    expect = ["--expect", str(deep)] if which == "--expect" else []
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "smoke", "llama-cpu", "--engine", "buildah",
         "--state", str(tmp_path / "state"), "--out", str(tmp_path / "out"), *expect,
         "--store", str(tmp_path / "store"), "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    code = (SmokeConfigError if which == "--expect" else SmokeError).return_code
    assert out.returncode == code, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert f"{deep}:" in out.stderr and "nested too deeply" in out.stderr


# --- an external image (frank-large): run by its pinned digest from local storage -----------


def _podman() -> Engine:
    try:
        return get_engine("podman")
    except EngineMissing as exc:
        unavailable(f"engine podman is not usable: {exc}")


def _external(image: str, digest: str | None) -> Target:
    """frank-large from the committed lock, pointed at ``image`` and ``digest``."""
    doc = json.loads((REPO / "locks" / "digests.json").read_text())
    doc["targets"]["frank-large"]["external"]["image"] = image
    if digest is not None:
        doc["targets"]["frank-large"]["external"]["digest"] = digest
    return parse_lock(doc, REPO / "locks" / "digests.json").target("frank-large")


@pytest.mark.integration
@pytest.mark.podman
def test_the_committed_frank_large_is_unpinned_and_smoke_says_how_to_pin_it(
    tmp_path: Path,
) -> None:
    _podman()
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "smoke", "--gpu", "frank-large", "--engine", "podman",
         "--state", str(tmp_path / "state"), "--store", str(tmp_path / "store"), "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == SmokeError.return_code, out.stderr
    assert "unpinned: run `podman image inspect --format {{.Digest}}" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.integration
@pytest.mark.podman
def test_an_external_image_is_found_by_its_digest_in_local_storage(tmp_path: Path) -> None:
    """A real image in podman's storage (FROM scratch, built offline), found by repo@digest."""
    engine = _podman()
    (tmp_path / "f").write_text("external\n")
    (tmp_path / "Containerfile").write_text("FROM scratch\nCOPY f /f\n")
    repo = "localhost/lockpipe-test/external"
    built = subprocess.run(["podman", "build", "-q", "-t", f"{repo}:1", str(tmp_path)],
                           capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr
    try:
        _find_by_digest(engine, repo)
    finally:
        subprocess.run(["podman", "rmi", "-f", f"{repo}:1"], capture_output=True, check=False)


def _find_by_digest(engine: Engine, repo: str) -> None:
    digest = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Digest}}", f"{repo}:1"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    ref, image_id = external_image(_external(repo, digest), engine)
    assert ref == f"{repo}@{digest}" and image_id == engine.image_id(f"{repo}:1")
    spec = external_spec(_external(repo, digest), image_id, 7770)
    assert spec.entrypoint is None and spec.command == ()  # the image's own
    assert spec.env == {"HALOGEN_CTX": "200192", "HALOGEN_MAX_TOK": "24576"}
    with pytest.raises(SmokeError, match="not in podman's local storage"):
        external_image(_external(repo, "sha256:" + "0" * 64), engine)
