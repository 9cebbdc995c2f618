"""`lockpipe completion bash` in a real bash: the script it prints completes verbs, options,
option values and the lock's names, as bash's programmable completion calls it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.cli.main import VERBS

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _complete(tmp: Path, *words: str, cwd: Path = REPO) -> list[str]:
    """COMPREPLY for a command line whose last word is being typed."""
    shim = tmp / "bin"  # `lockpipe` on PATH, as `pip install .` gives it
    shim.mkdir(exist_ok=True)
    (shim / "lockpipe").write_text(f'#!/bin/sh\nexec {sys.executable} -m lockpipe "$@"\n')
    (shim / "lockpipe").chmod(0o755)
    script = subprocess.run([sys.executable, "-m", "lockpipe", "completion", "bash"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    line = " ".join(["lockpipe", *words])
    probe = (f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _lockpipe\n"
             'printf "%s\\n" "${COMPREPLY[@]}"\n')  # fmt: skip
    bash = shutil.which("bash") or "/bin/bash"
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([bash, "--norc", "-c", probe], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_verbs_options_values_and_names_complete(tmp_path: Path) -> None:
    assert _complete(tmp_path, "") == [*VERBS, "--help", "--version"]
    assert _complete(tmp_path, "pre") == ["preflight"]
    assert _complete(tmp_path, "smoke", "--gp") == ["--gpu", "--gpu-mode"]
    assert _complete(tmp_path, "build", "--engine", "p") == ["podman"]
    assert _complete(tmp_path, "deploy", "--gpu-mode", "") == ["manual", "cdi"]
    assert _complete(tmp_path, "plan", "llama-cuda-") == ["llama-cuda-mtp", "llama-cuda-slots"]
    assert "gemma-4-12b-q4_k_m" in _complete(tmp_path, "payloads", "gemma-4-12b-q")


def test_outside_a_checkout_names_are_empty_and_paths_are_left_to_bash(tmp_path: Path) -> None:
    assert _complete(tmp_path, "plan", "", cwd=tmp_path) == []  # no lock here: no error either
    assert _complete(tmp_path, "plan", "--lock", "") == []  # bash's file completion takes over
