"""``lockpipe smoke`` as a user runs it: nothing is downloaded for an image that is not there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipeline.errors import SmokeError

REPO = Path(__file__).resolve().parents[2]


def test_a_target_never_built_fails_before_any_download(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", "smoke", "llama-cpu", "--engine", "buildah",
         "--state", str(tmp_path / "state"), "--store", str(store), "--quiet"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == SmokeError.return_code, out.stderr
    assert "no build record" in out.stderr and "build it first" in out.stderr
    assert not store.exists() or not any(store.rglob("*")), "something was downloaded"
