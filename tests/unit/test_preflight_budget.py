"""The llama.cpp budget's branches: one KV stream per slot, a unified stream, --fit, a
calibration, and fixes that must themselves fit.

SYNTHETIC TEST DIMS: the metadata below is made up (small, exact numbers); every expected
value is worked out here from llama.cpp's rules (docs/preflight.md), not from the code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lockpipe.errors import FormatError
from lockpipe.preflight import llama_args, plan_llama, recurrent
from lockpipe.preflight.config import LlamaSlots, SlotPoint, TargetPlan
from lockpipe.preflight.host import card_named
from lockpipe.preflight.shape import ModelShape, from_gguf

MIB = 1 << 20
CARD = card_named("rtx3090")  # 24,576 MiB
# 8 layers x 2 KV heads x (128 + 128) x 2 B (f16) = 8,192 B a token
PLAIN: dict[str, Any] = {
    "general.architecture": "llama", "llama.block_count": 8, "llama.context_length": 1 << 20,
    "llama.embedding_length": 1024, "llama.attention.head_count": 8,
    "llama.attention.head_count_kv": 2, "llama.attention.key_length": 128,
    "llama.attention.value_length": 128,
}  # fmt: skip
PER_TOKEN = 8 * 2 * 256 * 2
# qwen35: 8 blocks, every 4th attention: 2 attention layers (2 x 2 heads x 128 x 2 x 2 B)
HYBRID: dict[str, Any] = {
    "general.architecture": "qwen35", "qwen35.block_count": 8, "qwen35.context_length": 1 << 20,
    "qwen35.embedding_length": 256, "qwen35.attention.head_count": 4,
    "qwen35.attention.head_count_kv": 2, "qwen35.attention.key_length": 128,
    "qwen35.attention.value_length": 128, "qwen35.full_attention_interval": 4,
    "qwen35.ssm.conv_kernel": 4, "qwen35.ssm.inner_size": 128, "qwen35.ssm.state_size": 32,
    "qwen35.ssm.group_count": 2, "qwen35.ssm.time_step_rank": 4,
}  # fmt: skip
STATE = 6 * ((4 - 1) * (128 + 2 * 2 * 32) + 32 * 128) * 4  # 6 recurrent layers, f32


def need(
    shape: ModelShape, command: str, *, weights_mib: int = 1000, plan: TargetPlan | None = None
) -> dict[str, Any]:
    argv = ["llama-server", *command.split()]
    t = plan_llama.LlamaTarget(
        args=llama_args.parse(argv), build_args={}, declared_context=None, shape=shape,
        card=CARD, plan=plan or TargetPlan(compute_mib=1024), weights_bytes=weights_mib * MIB,
        spec=recurrent.speculative(argv),
    )  # fmt: skip
    _, cells = plan_llama.slot_checks(t)
    checks, _, numbers = plan_llama.budget(t, cells)
    return {**numbers, "check": next(c for c in checks if c.name == "budget")}


def test_a_unified_stream_is_counted_once_whatever_the_slot_count() -> None:
    plain = from_gguf(PLAIN, source="synthetic")
    one = need(plain, "-c 65536 --parallel 1")
    four = need(plain, "-c 65536 --parallel 4 --kv-unified")
    assert one["need_mib"] == 1000 + 1024 + 65536 * PER_TOKEN / MIB == four["need_mib"]
    apart = need(plain, "-c 65536 --parallel 4")  # 4 streams of 16,384 cells: the same KV
    assert apart["need_mib"] == one["need_mib"] and apart["max_slots"] >= 4
    assert four["max_slots"] is None  # a unified cache promises no slot a window


def test_a_hybrid_unified_cache_adds_only_the_state_per_slot() -> None:
    hybrid = from_gguf(HYBRID, source="synthetic")
    one = need(hybrid, "-c 65536 --parallel 1")
    four = need(hybrid, "-c 65536 --parallel 4 --kv-unified")
    assert four["need_mib"] == pytest.approx(one["need_mib"] + 3 * STATE / MIB)
    assert four["per_slot_mib"] == pytest.approx(STATE / MIB)


def test_a_unified_cache_past_the_card_is_told_a_context_that_fits() -> None:
    plain = from_gguf(PLAIN, source="synthetic")
    big = need(plain, "-c 4194304 --parallel 4 --kv-unified")  # 32 GiB of KV
    check = big["check"]
    assert check.status == "fail" and check.fix.startswith("-c ")
    fits = int(check.fix.split()[1])
    assert fits % 256 == 0 and fits == big["fits_ctx"]
    assert need(plain, f"-c {fits} --parallel 4 --kv-unified")["check"].status == "pass"
    over = need(plain, f"-c {fits + 256} --parallel 4 --kv-unified")["check"]
    assert over.status == "fail"


def test_slots_past_the_card_are_told_a_parallel_that_fits_and_never_zero() -> None:
    plain = from_gguf(PLAIN, source="synthetic")
    six = need(plain, "-c 3145728 --parallel 6")  # 6 x 4 GiB of KV
    assert six["check"].fix.startswith(f"--parallel {six['max_slots']} ")
    assert (
        need(plain, f"-c {524288 * six['max_slots']} --parallel {six['max_slots']}")["check"].status
        == "pass"
    )
    huge = need(plain, "-c 8388608 --parallel 2")  # one slot alone is 32 GiB
    assert huge["max_slots"] == 0 and huge["check"].fix.startswith("-c ")
    fits = int(huge["check"].fix.split()[1])
    assert need(plain, f"-c {fits} --parallel 2")["check"].status == "pass"
    heavy = need(plain, "-c 4096 --parallel 1", weights_mib=30000)
    assert "smaller quant" in heavy["check"].fix  # the weights alone fill the card


def test_fit_warns_with_a_total_that_fits() -> None:
    long = from_gguf({**PLAIN, "llama.context_length": 1 << 22}, source="synthetic")
    fitted = need(long, "--parallel 1")  # no -c: --fit shrinks the trained 4 Mi (32 GiB)
    check = fitted["check"]
    assert check.status == "warn" and "--fit shrinks the total to about" in check.detail
    total = int(check.detail.rpartition("about ")[2].replace(",", ""))
    assert total > 0 and 1000 + 1024 + total * PER_TOKEN / MIB <= CARD.memory_mib


def test_a_calibration_of_one_stream_per_slot_is_not_used_for_a_unified_cache() -> None:
    plain = from_gguf(PLAIN, source="synthetic")
    points = (SlotPoint(slots=1, used_mib=3000), SlotPoint(slots=4, used_mib=6000))
    cal = LlamaSlots(
        slot_context=16384, cache_types=("f16", "f16"), origin={"source": "t"}, points=points
    )
    plan = TargetPlan(compute_mib=1024, llama_slots=cal)
    apart = need(plain, "-c 65536 --parallel 4", plan=plan)
    assert apart["budget_from"] == "calibrated" and apart["need_mib"] == 6000
    shared = need(plain, "-c 16384 --parallel 4 --kv-unified", plan=plan)
    assert shared["budget_from"].startswith("first principles")
    assert "not a unified cache" in shared["budget_from"]


def test_llama_server_refuses_zero_slots_and_so_does_preflight() -> None:
    with pytest.raises(FormatError, match="--parallel 0"):
        llama_args.parse(["llama-server", "--parallel", "0"])
    with pytest.raises(FormatError, match="whole number"):
        llama_args.parse(["llama-server", "-c", "lots"])
    ok = llama_args.parse(["llama-server", "-np", "2"])
    with pytest.raises(FormatError):
        replace(ok, parallel=0)
