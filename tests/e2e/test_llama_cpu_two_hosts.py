"""The e2e lock on a second host: an empty container storage builds the same llama-cpu image.

The session's build ran in this machine's storage, which the rest of the suite
fills with other images, names and layer caches. The same lock, built through
the command line in a storage of its own (``CONTAINERS_STORAGE_CONF``, empty,
as a fresh host has it), must give the same image ID: nothing that storage
held may reach the image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import BuiltLlama, Mirror

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def test_an_empty_storage_builds_the_same_llama_cpu_image(
    llama_cpu: BuiltLlama, mirror: Mirror, tmp_path: Path
) -> None:
    conf = tmp_path / "storage.conf"
    conf.write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{tmp_path}/graph"\n'
        f'runroot = "{tmp_path}/run"\n'
    )
    env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf)}
    state = tmp_path / "state"
    try:
        out = subprocess.run(
            [sys.executable, "-m", "lockpipe", "build", "llama-cpu", "--engine", "buildah",
             "--lock", str(llama_cpu.lock), "--state", str(state), "--cache",
             str(tmp_path / "cache"), "--mirror", mirror.url],
            env=env, cwd=REPO, text=True, capture_output=True, timeout=1800,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        record = json.loads((state / "records" / "buildah" / "llama-cpu.json").read_text())
        assert record["image_id"] == llama_cpu.outcome.record.image_id, (
            "the empty storage built another image; explain it with: lockpipe reproduce"
        )
    finally:
        subprocess.run(["buildah", "rmi", "--all", "--force"], env=env, capture_output=True)
