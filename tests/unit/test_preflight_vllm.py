"""vLLM 0.29.0's KV pages and pool for Gemma 4 12B, against the seeds' figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.preflight import vllm_kv
from lockpipe.preflight.plan_vllm import ideal_bytes_per_request
from lockpipe.preflight.shape import Layer, ModelShape, from_hf_config

DATA = Path(__file__).resolve().parents[1] / "data" / "preflight"
MIB = 1 << 20
# The seeds' frank-small: RTX 3090, --gpu-memory-utilization 0.9 (default), w4a16-ct weights
# (10,264,229,896 B) + the bf16 MTP assistant (845,719,296 B); 2 x 2048 tokens in flight
# (async scheduling, max_num_batched_tokens 2048 below 70 GiB).
REQUESTED = int(0.9 * 24576 * MIB)
WEIGHTS = 10_264_229_896 + 845_719_296
IN_FLIGHT = 2 * 2048
SEEDS_BF16_POOL = 289_647
LENGTH = 131072  # the seeds' full context: 289,647 / 131,072 = 2.2 sessions ("2 concurrent")
TQ_BLOCKS = (16, 32, 64, 128)  # TurboQuantAttentionBackend.get_supported_kernel_block_sizes


def gemma4() -> ModelShape:
    doc: dict[str, Any] = json.loads((DATA / "gemma-4-12b-it.config.json").read_text())
    return from_hf_config(doc["config"], source="tt-metal config")


def knobs(dtype: str, *, skip: bool = True, length: int = LENGTH) -> vllm_kv.Knobs:
    g = gemma4()
    return vllm_kv.Knobs(
        kv_dtype=dtype,
        max_model_len=length,
        in_flight=IN_FLIGHT,
        kernel_blocks=TQ_BLOCKS if dtype.startswith("turboquant") else (16,),
        skip=vllm_kv.boundary_skip(g, dtype) if skip else frozenset(),
    )


def layer(*, sliding: bool) -> Layer:
    return next(x for x in gemma4().kv_layers if x.sliding == sliding)


@pytest.mark.parametrize(
    ("dtype", "sliding", "full"),
    [
        ("bfloat16", 8 * (256 + 256) * 2, 1 * (512 + 512) * 2),
        ("fp8", 8 * (256 + 256), 1 * (512 + 512)),
        # one fp32 scale per token, head and K/V side
        ("int8_per_token_head", 8 * (256 + 256 + 2 * 4), 1 * (512 + 512 + 2 * 4)),
        # fp8 keys (head bytes) + 4-bit values (head / 2 + 4 bytes of scale and zero)
        ("turboquant_k8v4", 8 * (256 + 128 + 4), 1 * (512 + 256 + 4)),
    ],
)
def test_page_bytes_per_token(dtype: str, sliding: int, full: int) -> None:
    assert vllm_kv.bytes_per_token(layer(sliding=True), dtype) == sliding
    assert vllm_kv.bytes_per_token(layer(sliding=False), dtype) == full


def test_the_seeds_4160_vs_8256_and_what_0_29_0_does_with_them() -> None:
    """4160 is a sliding layer's int8 token; 8256 is the whole-model head (8 KV heads x 512,
    what ModelArchitectureConfig collapses the layers to with max()). Neither divides the
    other; the dev build raised NotImplementedError there. 0.29.0 pads instead: with the
    per-layer heads the full layers' 16,512-byte pages are padded to the sliding 66,560."""
    g = gemma4()
    assert vllm_kv.bytes_per_token(layer(sliding=True), "int8_per_token_head") == 4160
    assert vllm_kv.bytes_per_token(vllm_kv.model_level(g), "int8_per_token_head") == 8256
    assert 8256 % 4160 and 4160 % 8256
    pages = vllm_kv.unify(vllm_kv.pages(g, knobs("int8_per_token_head")))
    full = [p for p in pages if not p.sliding]
    assert {(p.block, p.page, p.waste) for p in full} == {(16, 66560, 66560 - 16 * 1032)}
    assert all(p.page == 66560 and p.waste == 0 for p in pages if p.sliding)


def test_bf16_pages_unify_by_a_block_ratio_without_padding() -> None:
    pages = vllm_kv.unify(vllm_kv.pages(gemma4(), knobs("bfloat16")))
    assert {(p.sliding, p.block, p.page) for p in pages} == {
        (True, 16, 16 * 8192),
        (False, 64, 64 * 2048),  # 131,072 / 32,768: the block grows 4x
    }
    groups, padding = vllm_kv.groups(pages)
    assert (len(groups), padding) == (6, 0)  # 5 x 8 sliding + 1 x 8 full


def test_turboquant_keeps_boundary_layers_and_raises_the_block() -> None:
    g = gemma4()
    assert vllm_kv.boundary_skip(g, "turboquant_k8v4") == {0, 1, 46, 47}
    pages = vllm_kv.pages(g, knobs("turboquant_k8v4"))
    # primary page per token 8 x 772 (whole-model head 512), skip page 8 x 2048: the block
    # rises to 16 x cdiv(16 x 16384, 16 x 6176) = 48, the shared page to 48 x 6176
    shared = 48 * 8 * 772
    assert {p.page for p in pages if p.sliding} == {shared}
    assert {p.block for p in pages if not p.sliding} == {48}


def kv_memory() -> int:
    """The KV bytes the measured bf16 pool implies (one block's rounding)."""
    return vllm_kv.memory_for_tokens(gemma4(), knobs("bfloat16"), SEEDS_BF16_POOL)


def test_bf16_pool_from_first_principles_and_the_residual_reserve() -> None:
    """With the named default reserve (3 GiB) the pool comes out 4.7% over the measured
    289,647; the measurement implies 3,450 MiB outside weights and KV."""
    g, k = gemma4(), knobs("bfloat16")
    first = vllm_kv.pool(g, k, REQUESTED - WEIGHTS - 3072 * MIB).tokens(LENGTH)
    assert first == pytest.approx(SEEDS_BF16_POOL, rel=0.05)
    implied = (REQUESTED - WEIGHTS - kv_memory()) / MIB
    assert 3400 < implied < 3500
    back = vllm_kv.pool(g, k, kv_memory()).tokens(LENGTH)
    assert SEEDS_BF16_POOL <= back < SEEDS_BF16_POOL + 64  # one 64-token full block


def ideal(dtype: str, *, skip: bool = True) -> int:
    k = knobs(dtype, skip=skip)
    return int(kv_memory() / ideal_bytes_per_request(gemma4(), k) * LENGTH)


def test_the_seeds_int8_projection_is_the_unpadded_per_token_ratio() -> None:
    """~579k = 2 x 289,647 (8 bits against 16). With the fp32 scales the same bytes hold
    573,724 (-1%); vLLM 0.29.0's padded pages hold far fewer: the full layers keep 16
    tokens in a page sized for the sliding layers' 16."""
    assert ideal("int8_per_token_head") == pytest.approx(579_000, rel=0.015)
    pinned = vllm_kv.pool(gemma4(), knobs("int8_per_token_head"), kv_memory())
    assert pinned.blocks_per_request == LENGTH // 16 + 5 * (-(-(1023 + IN_FLIGHT) // 16) + 1)
    assert pinned.tokens(LENGTH) < SEEDS_BF16_POOL  # worse than bf16 on 0.29.0
    assert pinned.waste_fraction > 0.6


def test_the_seeds_k8v4_projection_is_the_bit_ratio() -> None:
    """~772k = 289,647 x 16 / 6 bits. TurboQuant's slots (scale, zero, even rounding) give
    767,810 (-0.6%); 0.29.0 also keeps layers 0, 1, 46, 47 at bf16 and pads the pages."""
    assert ideal("turboquant_k8v4", skip=False) == pytest.approx(772_000, rel=0.01)
    with_skip = ideal("turboquant_k8v4")
    pinned = vllm_kv.pool(gemma4(), knobs("turboquant_k8v4"), kv_memory()).tokens(LENGTH)
    assert pinned < with_skip < ideal("turboquant_k8v4", skip=False)


def test_fp8_would_double_the_pool_where_the_card_allows_it() -> None:
    assert ideal("fp8") == pytest.approx(2 * SEEDS_BF16_POOL, rel=0.01)
