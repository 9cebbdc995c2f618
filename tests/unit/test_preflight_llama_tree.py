"""preflight's llama.cpp constants held to the pinned tree (b10069, the sdist
gpu-check/sdist.env pins). preflight judges before any tree is fetched, and these facts
are C++ a CPU here cannot run, so they are typed with their file:line; this test reads
the same lines from the tree, so a tree that says otherwise fails here."""

from __future__ import annotations

import re
import tarfile

import pytest

from lockpipe.preflight import llama, llama_args, llama_cuda, recurrent, shape
from tests import pinned_llama

FILES = ("common/common.h", "common/speculative.cpp", "src/llama-arch.cpp",
         "src/models/qwen35.cpp", "ggml/src/ggml-cuda/fattn.cu",
         "ggml/src/ggml-cuda/fattn-common.cuh", "tools/server/server.cpp",
         "src/llama-hparams.h")  # fmt: skip


@pytest.fixture(scope="module")
def tree() -> dict[str, str]:
    sdist = pinned_llama.sdist()
    out = {}
    with tarfile.open(sdist) as tar:
        for rel in FILES:
            member = tar.extractfile(f"{pinned_llama.ROOT}/{rel}")
            assert member is not None
            out[rel] = member.read().decode()
    return out


def test_spec_types_are_the_names_spec_type_accepts(tree: dict[str, str]) -> None:
    table = tree["common/speculative.cpp"].split("common_speculative_type_from_name_map")[1]
    names = re.findall(r'\{"([a-z0-9-]+)",\s*COMMON_SPECULATIVE_TYPE_', table.split("};")[0])
    assert frozenset(names) == recurrent.SPEC_TYPES


def test_defaults_are_common_h_s(tree: dict[str, str]) -> None:
    header = tree["common/common.h"]
    ubatch = re.search(r"int32_t n_ubatch\s*=\s*(\d+);", header)
    draft = re.search(r"int32_t n_max = (\d+); // maximum number of tokens to draft", header)
    assert ubatch and int(ubatch.group(1)) == llama.DEFAULT_UBATCH
    assert draft and int(draft.group(1)) == recurrent.DEFAULT_DRAFT_N_MAX
    interval = re.search(r"full_attn_interval = (\d+);", tree["src/models/qwen35.cpp"])
    assert interval and int(interval.group(1)) == recurrent.DEFAULT_INTERVAL


def test_cuda_constants_are_the_trees(tree: dict[str, str]) -> None:
    stride = re.search(
        r"#define FATTN_KQ_STRIDE\s+(\d+)", tree["ggml/src/ggml-cuda/fattn-common.cuh"]
    )
    assert stride and int(stride.group(1)) == llama_cuda.FATTN_KQ_STRIDE
    assert f'LLM_ARCH_GEMMA4_ASSISTANT, "{llama_cuda.ASSISTANT_ARCH}"' in tree["src/llama-arch.cpp"]


def test_fa_kernel_sets_are_fattn_cu_s(tree: dict[str, str]) -> None:
    """The vector kernels compiled with and without GGML_CUDA_FA_ALL_QUANTS: every pair of
    the full set with it, only same-type pairs of the default set without."""
    text = tree["ggml/src/ggml-cuda/fattn.cu"]
    all_quants, _, rest = text.partition("#ifdef GGML_CUDA_FA_ALL_QUANTS")[2].partition("#else")
    default = rest.partition("#endif")[0]
    case = re.compile(r"FATTN_VEC_CASES_ALL_D\(GGML_TYPE_(\w+),\s*GGML_TYPE_(\w+)\)")
    full = {(k.lower(), v.lower()) for k, v in case.findall(all_quants)}
    same = {(k.lower(), v.lower()) for k, v in case.findall(default)}
    assert full == {(k, v) for k in llama.FA_ALL_QUANTS for v in llama.FA_ALL_QUANTS}
    assert same == {(t, t) for t in llama.FA_DEFAULT}


def test_auto_slots_is_the_servers(tree: dict[str, str]) -> None:
    auto = re.search(r"n_parallel is set to auto, using n_parallel = (\d+) and kv_unified = true",
                     tree["tools/server/server.cpp"])  # fmt: skip
    assert auto and int(auto.group(1)) == llama_args.AUTO_SLOTS


def test_the_layer_cap_is_the_trees(tree: dict[str, str]) -> None:
    cap = re.search(r"#define LLAMA_MAX_LAYERS\s+(\d+)", tree["src/llama-hparams.h"])
    assert cap and int(cap.group(1)) == shape.MAX_LAYERS
