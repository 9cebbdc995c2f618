"""deploy and smoke take a published image by digest instead of a local build record."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.cli.main import parse
from lockpipe.cli.publish import image_for
from lockpipe.deploy.plan import DeployOptions, HostFacts, inputs_for_published
from lockpipe.deploy.render import render_quadlet
from lockpipe.errors import DeployError, UsageError
from lockpipe.publish.outputs import images_path, write_images
from tests.unit.test_deploy_render import LOCK, STORE, lock
from tests.unit.test_publish import ENTRY

PINNED = "127.0.0.1:5000/lockpipe/llama-cpu@" + ENTRY.digest


def test_deploy_pins_image_by_published_digest() -> None:
    facts = HostFacts(podman=(5, 4))
    inputs = inputs_for_published(lock(), "llama-cpu", PINNED, STORE, facts, DeployOptions())
    unit = render_quadlet(inputs)
    assert unit.values("Container", "Image") == [PINNED]
    assert any("published by digest" in line for line in inputs.provenance)


def test_deploy_refuses_a_published_tag_without_digest() -> None:
    with pytest.raises(DeployError, match="by digest"):
        inputs_for_published(lock(), "llama-cpu", "127.0.0.1:5000/x/llama-cpu:1", STORE,
                             HostFacts(podman=(5, 4)), DeployOptions())  # fmt: skip


def test_image_options_choose_one_source(tmp_path: Path) -> None:
    lock_path = tmp_path / "locks" / "digests.json"
    write_images(images_path(lock_path), {"llama-cpu": ENTRY})
    for verb in ("smoke", "deploy", "verify"):
        args = parse([verb, "llama-cpu", "--lock", str(lock_path), "--published"])
        assert image_for(args, "llama-cpu") == ENTRY.pinned
        args = parse([verb, "llama-cpu", "--image", PINNED])
        assert image_for(args, "llama-cpu") == PINNED
    both = parse(["verify", "x", "--lock", str(LOCK), "--image", PINNED, "--published"])
    with pytest.raises(UsageError, match="not both"):
        image_for(both, "x")
    with pytest.raises(UsageError, match="--image REF@sha256"):
        image_for(parse(["verify", "x"]), "x")
