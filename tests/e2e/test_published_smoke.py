"""A GPU host's path, on the CPU: publish the built llama-cpu image, then smoke it by
digest from a checkout that never built it (an empty state folder, no build record).

The image comes from the loopback registry by ``NAME@sha256:…``; the smoke's image
check compares the running container with the config digest the registry serves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import BuiltLlama, Mirror
from tests.e2e.llama_cpu import GEMMA_URL, reports, smoke_file
from tests.fixtures_gemma import GemmaFile

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
PREFIX = "127.0.0.1:5000/lockpipe-e2e"


def lockpipe(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lockpipe", *argv], cwd=REPO, text=True,
                          capture_output=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip


def test_a_published_image_is_smoked_by_digest_without_a_local_build(
    llama_cpu: BuiltLlama, mirror: Mirror, gemma3_270m_gguf: GemmaFile, tmp_path: Path
) -> None:
    mirror.add(GEMMA_URL, gemma3_270m_gguf.path)
    common = ("--engine", "buildah", "--lock", str(llama_cpu.lock))
    published = lockpipe("publish", "llama-cpu", *common, "--state", str(llama_cpu.state),
                         "--to", PREFIX)  # fmt: skip
    assert published.returncode == 0, published.stderr[-3000:]
    images = json.loads((llama_cpu.lock.parent / "images.json").read_text())
    pinned = images["images"]["llama-cpu"]
    assert pinned["digest"].startswith("sha256:")

    fresh = tmp_path / "fresh-state"  # a host that never built it: no build record
    out = tmp_path / "out"
    smoke = lockpipe("smoke", "llama-cpu", *common, "--state", str(fresh), "--published", "--quiet",
                     "--store", str(tmp_path / "store"), "--mirror", mirror.url,
                     "--expect", str(smoke_file(tmp_path / "smoke.json")),
                     "--out", str(out))  # fmt: skip
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    assert not (fresh / "records").exists()
    (report,) = reports(out)["reports"]
    checks = {c["name"]: c for c in report["results"]}
    assert checks["image digest"]["status"] == "PASS", checks["image digest"]
    assert "Paris" in str(checks["generation[0]"]["detail"])
