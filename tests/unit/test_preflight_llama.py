"""llama.cpp b10069's KV arithmetic on real model shapes, and the seeds' figures from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.preflight import llama
from lockpipe.preflight.config import LlamaSlots, SlotPoint
from lockpipe.preflight.llama_args import parse
from lockpipe.preflight.shape import ModelShape, from_gguf, from_hf_config

DATA = Path(__file__).resolve().parents[1] / "data" / "preflight"
KIB = 1024


def gemma4() -> ModelShape:
    doc: dict[str, Any] = json.loads((DATA / "gemma-4-12b-it.config.json").read_text())
    return from_hf_config(doc["config"], source="tt-metal config")


def gemma3_270m() -> ModelShape:
    doc: dict[str, Any] = json.loads((DATA / "gemma-3-270m-q4_k_m.metadata.json").read_text())
    return from_gguf(doc["metadata"], source="gemma-3-270m header")


def layer(shape: ModelShape, *, sliding: bool) -> Any:
    return next(x for x in shape.kv_layers if x.sliding == sliding)


def test_gemma4_12b_shape_from_its_config() -> None:
    g = gemma4()
    assert (g.count(sliding=True), g.count(sliding=False)) == (40, 8)
    assert [x.index for x in g.kv_layers if not x.sliding] == [5, 11, 17, 23, 29, 35, 41, 47]
    swa, full = layer(g, sliding=True), layer(g, sliding=False)
    assert (swa.kv_heads, swa.head_k, swa.head_v) == (8, 256, 256)
    assert (full.kv_heads, full.head_k, full.head_v) == (1, 512, 512)  # k_eq_v: one global head
    assert g.window == 1024 and g.trained_context == 262144


def test_real_gemma3_270m_header_gives_llama_cpps_pattern() -> None:
    """No pattern key in the file: gemma3.cpp's default period 6 (layers 5, 11, 17 full)."""
    g = gemma3_270m()
    assert [x.index for x in g.layers if not x.sliding] == [5, 11, 17]
    assert all((x.kv_heads, x.head_k, x.head_v, x.q_heads) == (1, 256, 256, 4) for x in g.layers)
    assert g.window == 512 and g.trained_context == 32768
    f16 = llama.layer_bytes_per_token(g.layers[0], "f16", "f16")
    assert f16 == 1 * (256 + 256) * 2 == 1024
    assert llama.layer_bytes_per_token(g.layers[0], "q8_0", "q8_0") == 512 // 32 * 34 == 544


@pytest.mark.parametrize(
    ("kv_type", "swa_bytes", "full_bytes"),
    [
        # n_head_kv x (head_k + head_v) values; q8_0 34 B and q4_0 18 B per 32 values
        ("f16", 8 * 512 * 2, 1 * 1024 * 2),
        ("bf16", 8 * 512 * 2, 1 * 1024 * 2),
        ("q8_0", 8 * 512 // 32 * 34, 1 * 1024 // 32 * 34),
        ("q4_0", 8 * 512 // 32 * 18, 1 * 1024 // 32 * 18),
    ],
)
def test_kv_bytes_per_token_per_layer(kv_type: str, swa_bytes: int, full_bytes: int) -> None:
    g = gemma4()
    assert llama.layer_bytes_per_token(layer(g, sliding=True), kv_type, kv_type) == swa_bytes
    assert llama.layer_bytes_per_token(layer(g, sliding=False), kv_type, kv_type) == full_bytes


def test_the_seeds_16_vs_32_kib_is_q8_0_against_f16_for_16384_values() -> None:
    """'q8_0 (16 KiB/token/layer vs 32 at f16)': no single Gemma 4 12B layer stores 16,384
    K+V values per token (sliding 8 x 512 = 4,096; full 1 x 1,024). The per-token total of
    the full layers that grow with context is 8 x 1,024 = 8,192 values: 16 KiB at f16 and
    8.5 KiB at q8_0. The ratio the seeds quote holds for any layer: q8_0 is 17/32 of f16."""
    g = gemma4()
    full = [x for x in g.kv_layers if not x.sliding]
    assert sum(x.values_per_token for x in full) == 8192
    assert sum(llama.layer_bytes_per_token(x, "f16", "f16") for x in full) == 16 * KIB
    assert sum(llama.layer_bytes_per_token(x, "q8_0", "q8_0") for x in full) == 8704
    for x in g.kv_layers:
        q8, f16 = (llama.layer_bytes_per_token(x, t, t) for t in ("q8_0", "f16"))
        assert q8 * 32 == f16 * 17
    assert llama.row_bytes("f16", 16384) == 32 * KIB  # a 16,384-value layer: 32 KiB at f16,
    assert llama.row_bytes("q8_0", 16384) == 17 * KIB  # and 17 (not 16) KiB at q8_0


def test_every_slot_gets_the_full_window_1048576_over_4() -> None:
    c = llama.cells(n_ctx=1048576, n_seq=4, unified=False, window=1024)
    assert (c.slot, c.streams, c.full_cells) == (262144, 4, 262144)
    assert c.swa_cells == 1024 + 512  # pad256(min(slot, n_swa + n_ubatch))
    kv = llama.kv_size(gemma4(), c, "q8_0", "q8_0")
    assert kv.per_slot == 8704 * 262144 + 40 * 4352 * 1536  # 2,431 MiB first principles


def test_uneven_or_unpadded_division_is_rounded_by_llama_cpp() -> None:
    uneven = llama.cells(n_ctx=1_000_000, n_seq=3, unified=False, window=None)
    assert uneven.slot == 333_568 and uneven.n_ctx == 3 * 333_568  # pad256, n_ctx rewritten
    unified = llama.cells(n_ctx=1048576, n_seq=4, unified=True, window=1024)
    assert (unified.slot, unified.streams, unified.swa_cells) == (1048576, 1, 4 * 1024 + 512)


def test_budget_inequality_from_the_seeds_two_measurements() -> None:
    cal = LlamaSlots(
        slot_context=262144,
        cache_types=("q8_0", "q8_0"),
        points=(SlotPoint(slots=1, used_mib=11996), SlotPoint(slots=4, used_mib=22346)),
        origin={"source": "seeds"},
    )
    assert cal.per_slot_mib == 3450 and cal.fixed_mib == 8546
    card = 24576
    assert cal.need_mib(4) == 22346 <= card
    assert cal.need_mib(5) == 25796 > card  # the seeds' "25.8 GiB": 25.8 thousand MiB
    assert int((card - cal.fixed_mib) // cal.per_slot_mib) == 4


@pytest.mark.parametrize(
    ("pair", "all_quants", "ok"),
    [
        (("q8_0", "q8_0"), False, True),  # the default build's four same-type pairs
        (("q4_0", "q4_0"), False, True),
        (("bf16", "bf16"), False, True),
        (("f32", "f16"), False, True),  # f32 counts as f16
        (("q8_0", "q4_0"), False, False),  # mixed pairs need GGML_CUDA_FA_ALL_QUANTS
        (("q8_0", "q4_0"), True, True),
        (("q5_1", "q5_1"), False, False),
        (("q5_1", "q5_1"), True, True),
        (("iq4_nl", "iq4_nl"), True, False),  # a cache type with no CUDA FA kernel at all
    ],
)
def test_fa_kernel_pairs_follow_fattn_cu(pair: tuple[str, str], all_quants: bool, ok: bool) -> None:
    assert (llama.fa_pair_problem(*pair, all_quants=all_quants) is None) is ok


def test_fa_head_sizes() -> None:
    g = gemma4()
    assert llama.fa_head_problem(layer(g, sliding=True)) is None
    assert llama.fa_head_problem(layer(g, sliding=False)) is None  # 512 with GQA 16
    mqa = layer(g, sliding=False).__class__(
        index=0, sliding=False, kv_heads=1, head_k=512, head_v=512, q_heads=1
    )
    assert "GQA" in (llama.fa_head_problem(mqa) or "")


def test_fit_and_an_explicit_context_are_different_intents() -> None:
    locked = parse(["llama-server", "-fa", "on", "--cache-type-k", "q8_0", "--parallel", "1"])
    assert locked.intent(262144)[0] == "fit" and locked.slots == 1 and not locked.kv_unified
    explicit = parse(["llama-server", "-c", "1048576", "--parallel", "4"])
    assert explicit.intent(262144)[0] == "explicit"
    assert parse(["llama-server", "-c", "0"]).intent(262144)[0] == "trained"
    auto = parse(["llama-server"])
    assert (auto.slots, auto.kv_unified) == (4, True)  # server.cpp: auto -> 4, unified
