"""frank-large: an image built elsewhere, deployed only once its digest is pinned."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.deploy.external import external_target
from pipeline.deploy.plan import DeployOptions, HostFacts, inputs_for_external
from pipeline.deploy.render import render_quadlet
from pipeline.deploy.unit import split_args
from pipeline.errors import LockError
from tests.unit.test_deploy_render import GOLDEN, HOST

DIGEST = "sha256:" + "a1" * 32


def doc(digest: str | None = None) -> dict[str, Any]:
    d: dict[str, Any] = json.loads((GOLDEN / "frank-large.lock.json").read_text())
    d = copy.deepcopy(d)
    if digest is not None:
        d["targets"]["frank-large"]["external"]["digest"] = digest
    return d


def test_unpinned_digest_refuses_with_the_fix() -> None:
    ext = external_target(doc(), "frank-large")
    assert ext is not None
    with pytest.raises(LockError, match=r"pin targets\.frank-large\.external\.digest from "
                       r"`podman image inspect"):  # fmt: skip
        inputs_for_external(ext, HostFacts(podman=(5, 4), gpu_host=HOST), DeployOptions())


def test_built_targets_are_not_external() -> None:
    lock = json.loads((Path(__file__).parents[2] / "locks" / "digests.json").read_text())
    assert external_target(lock, "frank-small") is None


@pytest.mark.parametrize("image", ["localhost/halogen-flash-server:latest", "x@sha256:00"])
def test_image_carries_neither_tag_nor_digest(image: str) -> None:
    d = doc()
    d["targets"]["frank-large"]["external"]["image"] = image
    with pytest.raises(LockError, match="external"):
        external_target(d, "frank-large")


def test_pinned_frank_large_unit() -> None:
    ext = external_target(doc(DIGEST), "frank-large")
    assert ext is not None
    opts = DeployOptions(gpu_mode="manual", wait_cmd=("/usr/local/bin/lockpipe", "deploy"))
    unit = render_quadlet(inputs_for_external(ext, HostFacts(podman=(5, 4), gpu_host=HOST), opts))
    assert unit.values("Container", "Image") == [f"localhost/halogen-flash-server@{DIGEST}"]
    assert unit.values("Container", "PublishPort") == ["127.0.0.1:7770:7770"]
    assert unit.values("Container", "Entrypoint") == ["halogen-flash-server"]
    env = unit.values("Container", "Environment")
    assert "HALOGEN_CTX=200192" in env and "HALOGEN_MAX_TOK=24576" in env
    assert split_args(unit.values("Service", "ExecStartPre")[0])[2:4] == ["--wait-port", "7770"]
    assert "2 slots of 200192" in unit.values("Unit", "Description")[0]
