"""Properties: KV bytes never shrink as context or slots grow (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lockpipe.preflight import llama, vllm_kv
from lockpipe.preflight.config import LlamaSlots, SlotPoint
from lockpipe.preflight.shape import Layer, ModelShape

KV_TYPES = st.sampled_from(["f16", "bf16", "q8_0", "q4_0", "q5_1"])
VLLM_DTYPES = st.sampled_from(["bfloat16", "fp8", "int8_per_token_head", "turboquant_k8v4"])


@st.composite
def shapes(draw: st.DrawFn) -> ModelShape:
    """Hybrid models: sliding layers every ``period`` but the last, full ones between."""
    n = draw(st.integers(min_value=2, max_value=24))
    period = draw(st.integers(min_value=2, max_value=6))
    window = draw(st.sampled_from([None, 512, 1024, 4096]))
    swa_heads, full_heads = draw(st.integers(1, 16)), draw(st.integers(1, 16))
    swa_dim, full_dim = draw(st.sampled_from([64, 128, 256])), draw(st.sampled_from([128, 512]))
    layers = tuple(
        Layer(
            index=i,
            sliding=bool(window) and i % period < period - 1,
            kv_heads=swa_heads if i % period < period - 1 else full_heads,
            head_k=swa_dim if i % period < period - 1 else full_dim,
            head_v=swa_dim if i % period < period - 1 else full_dim,
        )
        for i in range(n)
    )
    return ModelShape(name="h", layers=layers, window=window, trained_context=None, source="h")


@settings(max_examples=200, deadline=None)
@given(shapes(), KV_TYPES, st.integers(1, 1 << 20), st.integers(1, 1 << 20), st.integers(1, 8))
def test_llama_kv_grows_with_context(
    shape: ModelShape, kv: str, a: int, b: int, slots: int
) -> None:
    small, big = sorted((a, b))
    sizes = [
        llama.kv_size(
            shape, llama.cells(n_ctx=n, n_seq=slots, unified=False, window=shape.window), kv, kv
        ).total
        for n in (small * slots, big * slots)
    ]
    assert sizes[0] <= sizes[1]


@settings(max_examples=200, deadline=None)
@given(shapes(), KV_TYPES, st.integers(1, 1 << 18), st.integers(1, 7), st.booleans())
def test_llama_kv_grows_with_slots(
    shape: ModelShape, kv: str, window: int, slots: int, unified: bool
) -> None:
    def total(n: int) -> int:
        c = llama.cells(n_ctx=window * n, n_seq=n, unified=unified, window=shape.window)
        return llama.kv_size(shape, c, kv, kv).total

    assert total(slots) <= total(slots + 1)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30000), st.integers(1, 30000), st.integers(1, 64))
def test_budget_need_grows_with_slots(one: int, more: int, slots: int) -> None:
    lo, hi = sorted((one, one + more))
    cal = LlamaSlots(
        slot_context=1,
        cache_types=("f16", "f16"),
        origin={"source": "t"},
        points=(SlotPoint(slots=1, used_mib=lo), SlotPoint(slots=4, used_mib=hi)),
    )
    assert cal.need_mib(slots) <= cal.need_mib(slots + 1)


@settings(max_examples=150, deadline=None)
@given(shapes(), VLLM_DTYPES, st.integers(1, 1 << 19), st.integers(1, 1 << 19))
def test_vllm_request_grows_with_context(shape: ModelShape, dtype: str, a: int, b: int) -> None:
    small, big = sorted((a, b))

    def request(length: int) -> int:
        k = vllm_kv.Knobs(
            kv_dtype=dtype,
            max_model_len=length,
            in_flight=4096,
            kernel_blocks=(16, 32, 64, 128),
            skip=vllm_kv.boundary_skip(shape, dtype),
        )
        pool = vllm_kv.pool(shape, k, 0)
        return pool.blocks_per_request * pool.bytes_per_block

    assert request(small) <= request(big)
