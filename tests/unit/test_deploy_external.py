"""frank-large: an image built elsewhere, read from the committed lock, deployed only once
its digest is pinned (the golden unit is rendered with a test digest)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockpipe.deploy.external import external_target
from lockpipe.deploy.plan import DeployOptions, HostFacts, inputs_for_external
from lockpipe.deploy.render import render_quadlet
from lockpipe.deploy.unit import split_args
from lockpipe.errors import LockError
from lockpipe.lock.model import Lock, parse_lock
from tests.unit.test_deploy_render import HOST, REPO, golden

LOCK_PATH = REPO / "locks" / "digests.json"
DIGEST = "sha256:" + "a1" * 32  # a test value: the real one is known only on frank-large's host


def lock(digest: str | None = None) -> Lock:
    """The committed lock, with ``digest`` pinned into frank-large when given."""
    doc: dict[str, Any] = copy.deepcopy(json.loads(LOCK_PATH.read_text()))
    if digest is not None:
        doc["targets"]["frank-large"]["external"]["digest"] = digest
    return parse_lock(doc, LOCK_PATH)


def opts() -> DeployOptions:
    return DeployOptions(gpu_mode="manual")


def test_the_committed_lock_leaves_the_digest_unpinned_and_deploy_says_how_to_pin_it() -> None:
    ext = external_target(lock(), "frank-large")
    assert ext is not None and ext.digest is None
    fix = r"unpinned: run `podman image inspect --format \{\{\.Digest\}\} localhost/halogen-flash"
    with pytest.raises(LockError, match=fix):
        inputs_for_external(ext, HostFacts(podman=(5, 4), gpu_host=HOST), opts())


def test_built_targets_are_not_external() -> None:
    assert external_target(lock(), "frank-small") is None


@pytest.mark.parametrize("image", ["localhost/halogen-flash-server:latest", "x/y@sha256:00"])
def test_the_image_carries_neither_tag_nor_digest(image: str) -> None:
    doc = json.loads(LOCK_PATH.read_text())
    doc["targets"]["frank-large"]["external"]["image"] = image
    with pytest.raises(LockError, match=r"targets\.frank-large\.external\.image"):
        parse_lock(doc, LOCK_PATH)


def test_an_external_target_cannot_also_be_built() -> None:
    doc = json.loads(LOCK_PATH.read_text())
    doc["targets"]["frank-large"]["context"] = "images/llama-cuda"
    with pytest.raises(LockError, match=r"targets\.frank-large"):
        parse_lock(doc, LOCK_PATH)


def test_frank_large_golden() -> None:
    ext = external_target(lock(DIGEST), "frank-large")
    assert ext is not None
    unit = render_quadlet(inputs_for_external(ext, HostFacts(podman=(5, 4), gpu_host=HOST), opts()))
    golden("frank-large.container", unit.render())


def test_pinned_frank_large_unit() -> None:
    ext = external_target(lock(DIGEST), "frank-large")
    assert ext is not None
    unit = render_quadlet(inputs_for_external(ext, HostFacts(podman=(5, 4), gpu_host=HOST), opts()))
    assert unit.values("Container", "Image") == [f"localhost/halogen-flash-server@{DIGEST}"]
    assert unit.values("Container", "PublishPort") == ["127.0.0.1:7770:7770"]
    # the seeds name no command: the image's own entrypoint and command run
    assert unit.values("Container", "Entrypoint") == [] and unit.values("Container", "Exec") == []
    env = unit.values("Container", "Environment")
    assert "HALOGEN_CTX=200192" in env and "HALOGEN_MAX_TOK=24576" in env
    assert split_args(unit.values("Service", "ExecStartPre")[0])[3:] == ["wait-port", "7770", "90"]
    assert "2 slots of 200192" in unit.values("Unit", "Description")[0]


def test_no_frozen_side_lock_is_left(tmp_path: Path) -> None:
    """frank-large lives in the main lock now; the old side file must not come back."""
    assert not (REPO / "tests" / "data" / "deploy" / "frank-large.lock.json").exists()


def test_deploy_frank_large_from_the_committed_lock_refuses_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "deploy", "frank-large", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == LockError.return_code, out.stderr
    assert out.stderr.startswith("error: targets.frank-large.external.digest is absent")
    assert "Traceback" not in out.stderr and not any(tmp_path.iterdir())
