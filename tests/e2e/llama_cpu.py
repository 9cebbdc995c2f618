"""The llama-cpu test lock: the real llama.cpp recipe, real sources, loopback inputs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.e2e.conftest import LLAMA_SDIST_ROOT, LLAMA_SDIST_SHA256, LLAMA_SDIST_URL
from tests.lockfactory import make_repo

REPO = Path(__file__).resolve().parents[2]
TAG = "localhost/lockpipe-e2e/llama-cpu:b11434"


def llama_cpu_lock(root: Path, bases: dict[str, tuple[str, str]]) -> Path:
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
        "targets": {
            "llama-cpu": {
                "context": "images/llama-cuda",
                "tag": TAG,
                "bases": {"BUILD_BASE": "debian-build", "RUNTIME_BASE": "debian-runtime"},
                "source": "llama.cpp",
                "build_args": {"GGML_CUDA": "OFF", "FA_ALL_QUANTS": "OFF", "REQUIRE_MTP": "1"},
                "serve": {
                    "runtime": "llama.cpp",
                    "port": 8080,
                    "command": ["llama-server", "-m", "{payload:gemma-3-270m}", "--metrics"],
                },
            }
        },
    }
    dockerfile = (REPO / "images/llama-cuda/Dockerfile").read_text()
    path = make_repo(root, document, dockerfile)
    shutil.copy(REPO / "images/llama-cuda/Dockerfile", root / "images/llama-cuda/Dockerfile")
    return path
