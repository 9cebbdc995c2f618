"""gpu-check/run.sh's CPU dry run (GGML_CUDA=OFF) end to end, judged on a real llama.cpp log.

The unit tests hold judge.py's rules to a FAKE GPU LOG rendered from the tree's format
strings. Here the pinned tree's own CPU ``llama-server`` (the llama-cpu image the pipeline
built from b10069) serves run.sh's tiny qwen35 GGUF with run.sh's flags (``-fa auto``, the
mixed q8_0/q5_1 pair, ``--spec-type draft-mtp,ngram-mod``), through ``LLAMA_SERVER``: a
wrapper that runs the image's binary with the host's network and run.sh's work folder
mounted. The verdict must be PASS on that real log, and must fail when it is asked to
have measured a pair the server did not cache. What only a card shows (CUDA in the log,
every layer offloaded, flash attention kept on the card) is not judged on a CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import BuiltLlama
from tests.pinned_llama import ENV, ROOT, sdist
from tests.policy import unavailable
from tests.registry_servers import free_port

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
GPU_CHECK = REPO / "gpu-check"


def wrapper(path: Path, image: str, work: Path) -> Path:
    """An executable that runs the image's llama-server as run.sh runs a native one."""
    path.write_text(
        "#!/bin/sh\n"
        f'exec podman run --rm --network host -v "{work}:{work}:ro" '
        f'--entrypoint llama-server {image} "$@"\n'
    )
    path.chmod(0o755)
    return path


def test_the_cpu_dry_run_passes_on_the_pinned_servers_real_log(
    llama_cpu: BuiltLlama, tmp_path: Path
) -> None:
    if shutil.which("podman") is None:
        unavailable("podman is needed to run the built llama-cpu image")
    archive = sdist()
    cache, work, out = tmp_path / "cache", tmp_path / "work", tmp_path / "out"
    cache.mkdir()
    shutil.copy(archive, cache / ENV["SDIST_FILE"])  # where run.sh looks (GPU_CHECK_CACHE)
    work.mkdir()
    server = wrapper(tmp_path / "llama-server", llama_cpu.outcome.record.image_id, work)
    env = {**os.environ, "GGML_CUDA": "OFF", "LLAMA_SERVER": str(server), "WORK": str(work),
           "OUT": str(out), "GPU_CHECK_CACHE": str(cache), "PORT": str(free_port()),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # fmt: skip
    run = subprocess.run(["bash", str(GPU_CHECK / "run.sh")], env=env, text=True,
                         capture_output=True, timeout=900, check=False)  # fmt: skip
    said = run.stdout + run.stderr
    assert run.returncode == 0 and "gpu-check: PASS" in run.stdout, said[-4000:]

    result = json.loads((out / "result.json").read_text())
    measured = result["measured"]
    assert result["problems"] == [] and measured["kv"] == "q8_0/q5_1", result
    assert result["timings"]["predicted_n"] >= 200 and result["timings"]["draft_n"] > 0
    assert set(measured["draft_stats"]) == {"draft-mtp", "ngram-mod"}
    assert set(measured["draft_stats_model_draft"]) == {"draft-mtp", "ngram-mod"}
    assert result["timings_model_draft"]["draft_n"] > 0
    assert "llamacpp:prompt_tokens_total" in result["metrics"]

    # the same real log judged as if q8_0/q8_0 had been asked: the KV line says otherwise
    tree = work / "src" / ROOT
    argv = [sys.executable, str(GPU_CHECK / "judge.py"), "verdict", str(tree), str(out), "OFF",
            "q8_0", "q8_0", "draft-mtp,ngram-mod", "ON", "asked", "serve=1", "not run",
            str(work / "completion-draft.json")]  # fmt: skip
    wrong = subprocess.run(argv, text=True, capture_output=True, check=False)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    assert "the main context's KV cache is q8_0/q5_1, not q8_0/q8_0" in wrong.stderr
