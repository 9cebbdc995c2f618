"""Hybrid Gated DeltaNet + attention models (qwen35): KV on attention layers only, recurrent
state per slot, the draft-mtp context's KV.

Every GGUF here is written by gguf-py with SYNTHETIC TEST DIMS, small made-up numbers that
exercise the arithmetic. They are not Qwen3.8-27B's dims (locks/preflight.json holds a
transcript of its header; test_preflight_cli checks preflight against it). Expected values
are worked out in each test from llama.cpp b10069's formulas (docs/preflight.md), not from
preflight's code.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from gguf import GGUFWriter
from hypothesis import given, settings
from hypothesis import strategies as st

from lockpipe.cli import options
from lockpipe.cli.options import add_preflight_options
from lockpipe.cli.preflight import do_preflight
from lockpipe.errors import FormatError, LockError
from lockpipe.lock.model import load_lock
from lockpipe.payloads import store as payload_store
from lockpipe.payloads.gguf import read_header
from lockpipe.preflight import config as preflight_config
from lockpipe.preflight import llama, plan, plan_hybrid, plan_llama, recurrent
from lockpipe.preflight.config import ModelEntry, TargetPlan
from lockpipe.preflight.host import card_named
from lockpipe.preflight.llama_args import parse
from lockpipe.preflight.shape import ModelShape, from_gguf, from_hf_config

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "locks" / "digests.json"
MIB = 1024 * 1024

# SYNTHETIC TEST DIMS (made up; not any real model): 8 main layers + 1 MTP block.
EMBD, HEADS, KV_HEADS, HEAD = 256, 4, 2, 64
MAIN, NEXTN, INTERVAL = 8, 1, 4
CONV, INNER, STATE, GROUPS, DT_RANK = 4, 128, 32, 2, 4


def synthetic_meta(arch: str = "qwen35", **over: Any) -> dict[str, Any]:
    """GGUF metadata of a tiny made-up hybrid model; ``None`` in ``over`` drops a key."""
    meta: dict[str, Any] = {
        "general.architecture": arch,
        "general.name": "synthetic-qwen35-test-dims",
        f"{arch}.block_count": MAIN + NEXTN,
        f"{arch}.context_length": 8192,
        f"{arch}.embedding_length": EMBD,
        f"{arch}.attention.head_count": HEADS,
        f"{arch}.attention.head_count_kv": KV_HEADS,
        f"{arch}.attention.key_length": HEAD,
        f"{arch}.attention.value_length": HEAD,
        f"{arch}.full_attention_interval": INTERVAL,
        f"{arch}.nextn_predict_layers": NEXTN,
        f"{arch}.ssm.conv_kernel": CONV,
        f"{arch}.ssm.inner_size": INNER,
        f"{arch}.ssm.state_size": STATE,
        f"{arch}.ssm.group_count": GROUPS,
        f"{arch}.ssm.time_step_rank": DT_RANK,
    }
    for k, v in over.items():
        key = f"{arch}.{k.replace('__', '.')}"
        if v is None:
            meta.pop(key, None)
        else:
            meta[key] = v
    return meta


def write_gguf(path: Path, meta: dict[str, Any]) -> Path:
    """A header-only GGUF of ``meta``, written by gguf-py (the format's reference writer)."""
    w = GGUFWriter(str(path), str(meta["general.architecture"]))
    for key, value in meta.items():
        if key == "general.architecture":
            continue
        if isinstance(value, str):
            w.add_string(key, value)
        elif isinstance(value, list):
            w.add_array(key, value)
        else:
            w.add_uint32(key, int(value))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def shape_from_file(tmp_path: Path, meta: dict[str, Any]) -> ModelShape:
    header = read_header(write_gguf(tmp_path / "synthetic.gguf", meta))
    return from_gguf(header.metadata, source="synthetic", long_arrays=list(header.arrays))


def test_layers_follow_qwen35s_interval_and_the_mtp_block(tmp_path: Path) -> None:
    s = shape_from_file(tmp_path, synthetic_meta())
    # qwen35.cpp: recurrent iff il < n_layer() and (il + 1) % 4 != 0; il 8 is the MTP block
    assert [x.index for x in s.kv_layers] == [3, 7]
    assert [x.index for x in s.layers if x.recurrent] == [0, 1, 2, 4, 5, 6]
    assert [x.index for x in s.mtp_layers] == [8]
    assert s.hybrid is not None and s.arch == "qwen35"
    assert (s.hybrid.n_layer, s.hybrid.recurrent_layers, s.hybrid.nextn) == (8, 6, 1)
    assert s.count(sliding=False) == 2 and s.count(sliding=True) == 0


def test_state_sizes_are_llama_hparams_n_embd_r_and_s(tmp_path: Path) -> None:
    h = shape_from_file(tmp_path, synthetic_meta()).hybrid
    assert h is not None
    assert h.dims.n_embd_r == (CONV - 1) * (INNER + 2 * GROUPS * STATE) == 768
    assert h.dims.n_embd_s == STATE * INNER == 4096
    per_row = (768 + 4096) * 4  # f32 r and s
    for slots, n_rs in ((1, 0), (2, 0), (2, 3), (4, 5)):
        got = recurrent.state_size(h, slots=slots, n_rs_seq=n_rs)
        assert got.per_slot == 6 * per_row * (1 + n_rs)
        assert got.total == slots * 6 * per_row * (1 + n_rs)


@pytest.mark.parametrize("kv", ["f16", "q8_0", "q4_0"])
def test_kv_is_counted_on_the_attention_layers_only(tmp_path: Path, kv: str) -> None:
    s = shape_from_file(tmp_path, synthetic_meta())
    row = {"f16": HEAD * KV_HEADS * 2, "q8_0": HEAD * KV_HEADS // 32 * 34,
           "q4_0": HEAD * KV_HEADS // 32 * 18}[kv]  # fmt: skip
    c = llama.cells(n_ctx=8192, n_seq=2, unified=False, window=s.window)
    size = llama.kv_size(s, c, kv, kv)
    assert size.per_token_full == 2 * 2 * row  # 2 attention layers, K and V
    assert size.total == 2 * 4096 * 2 * 2 * row  # 2 streams of 4,096 cells
    mtp = llama.mtp_kv_size(s, c, kv, kv)
    assert mtp.per_token_full == 1 * 2 * row and mtp.per_slot == 4096 * 2 * row


def test_a_recurrent_layers_array_wins_over_the_interval(tmp_path: Path) -> None:
    flags = [True, False, True, True, False, True, True, True, False]
    s = shape_from_file(tmp_path, synthetic_meta(attention__recurrent_layers=flags))
    assert [x.index for x in s.kv_layers] == [1, 4]  # 8 is the MTP block, not main KV
    assert [x.index for x in s.layers if x.recurrent] == [0, 2, 3, 5, 6, 7]
    with pytest.raises(FormatError, match="3 entries for 9 layers"):
        from_gguf(synthetic_meta(attention__recurrent_layers=[True] * 3), source="m")


def test_a_recurrent_layers_array_too_long_to_read_is_refused() -> None:
    meta = synthetic_meta()
    with pytest.raises(FormatError, match="recurrent_layers is longer than the GGUF reader"):
        from_gguf(meta, source="m", long_arrays=["qwen35.attention.recurrent_layers"])


def test_defaults_and_missing_keys_follow_the_loader() -> None:
    s = from_gguf(synthetic_meta(full_attention_interval=None), source="m")
    assert s.hybrid is not None and "default" in s.hybrid.pattern  # interval 4 by default
    assert [x.index for x in s.kv_layers] == [3, 7]
    with pytest.raises(FormatError, match=r"qwen35\.ssm\.state_size is missing"):
        from_gguf(synthetic_meta(ssm__state_size=None), source="m")
    with pytest.raises(FormatError, match="recurrent state that preflight does not size"):
        from_gguf(synthetic_meta("mamba2"), source="m")


def test_qwen3next_reads_no_mtp_and_keeps_no_snapshots() -> None:
    s = from_gguf(synthetic_meta("qwen3next"), source="m")
    h = s.hybrid
    assert h is not None and h.nextn == 0 and not s.mtp_layers  # qwen3next.cpp: no nextn key
    # no MTP block, so il 8 is a main layer: (8 + 1) % 4 != 0, recurrent
    assert [x.index for x in s.kv_layers] == [3, 7] and h.recurrent_layers == 7
    assert recurrent.state_size(h, slots=1, n_rs_seq=3).rows_per_slot == 1  # no rollback


def test_speculative_flags_as_common_arg_reads_them() -> None:
    assert recurrent.speculative(["llama-server"]).n_rs_seq == 0
    mtp = recurrent.speculative(["--spec-type", "draft-mtp"])
    assert mtp.mtp and mtp.n_rs_seq == 3 and (mtp.draft_type_k, mtp.draft_type_v) == ("f16",) * 2
    more = recurrent.speculative(["--spec-type", "ngram-mod,draft-mtp", "--spec-draft-n-max", "6",
                                  "-ctkd", "Q8_0", "--cache-type-v-draft", "q8_0"])  # fmt: skip
    assert more.n_rs_seq == 6 and (more.draft_type_k, more.draft_type_v) == ("q8_0", "q8_0")
    assert recurrent.speculative(["--spec-type", "ngram-mod"]).n_rs_seq == 0
    assert recurrent.speculative(["--spec-type", "draft-mpt"]).unknown == ("draft-mpt",)
    with pytest.raises(LockError, match="--spec-draft-n-max 'x' is not a count"):
        recurrent.speculative(["--spec-draft-n-max", "x"])


def target(shape: ModelShape, command: list[str], spec: bool = True) -> plan_llama.LlamaTarget:
    return plan_llama.LlamaTarget(
        args=parse(command),
        build_args={"FA_ALL_QUANTS": "ON"},
        declared_context=None,
        shape=shape,
        card=card_named("rtx3090"),
        plan=TargetPlan(compute_mib=1024),
        weights_bytes=4 * MIB,
        spec=recurrent.speculative(command) if spec else None,
    )


def test_budget_adds_state_and_mtp_kv_per_slot(tmp_path: Path) -> None:
    s = shape_from_file(tmp_path, synthetic_meta())
    cmd = ["llama-server", "-c", "8192", "--parallel", "2", "-fa", "on",
           "--spec-type", "draft-mtp"]  # fmt: skip
    t = target(s, cmd)
    checks, cells = plan_llama.slot_checks(t)
    assert cells is not None and cells.slot == 4096
    assert [c.status for c in checks] == ["pass", "pass"]  # context, slot-grid
    _, figures, n = plan_llama.budget(t, cells)
    kv = 4096 * 2 * 2 * (HEAD * KV_HEADS * 2)  # 2 attention layers at f16
    state = 6 * (768 + 4096) * 4 * (1 + 3)  # 6 recurrent layers, 3 draft-mtp snapshots
    mtp = 4096 * 1 * 2 * (HEAD * KV_HEADS * 2)  # the MTP block, draft cache f16
    assert (n["kv_per_slot"], n["recurrent_per_slot"], n["mtp_kv_per_slot"]) == (kv, state, mtp)
    assert (n["attention_layers"], n["recurrent_layers"], n["n_rs_seq"]) == (2, 6, 3)
    assert n["per_slot_mib"] == (kv + state + mtp) / MIB
    mask = 4096 * 512 * 2  # the MTP context's KQ mask: its cells x 512 ubatch rows x f16
    assert n["need_mib"] == 4 + 1024 + (2 * (kv + state + mtp) + mask) / MIB
    names = [f.name for f in figures]
    assert "recurrent state per slot" in names and "MTP KV per slot" in names
    assert all(c.status == "pass" for c in plan_llama.type_checks(t))


# What the pinned llama-server (b10069, a CPU build from gpu-check/cache's sdist) logged on
# 2026-11-30 serving a random-weight GGUF with these same SYNTHETIC TEST DIMS ("-lv 4",
# "-fit off"): llama_kv_cache "size = X MiB" of the main context, llama_memory_recurrent
# "size = X MiB", and the MTP context's llama_kv_cache; e.g. for the first row:
#   llama_kv_cache: size = 8.00 MiB (4096 cells, 2 layers, 2/2 seqs), K (f16): 4.00 MiB ...
#   llama_memory_recurrent: size = 0.89 MiB (2 cells, 8 layers, 2 seqs 3 rs_seq), R (f32):
#     0.14 MiB, S (f32): 0.75 MiB
#   llama_kv_cache: size = 4.00 MiB (4096 cells, 1 layers, 2/2 seqs), K (f16): 2.00 MiB ...
LOGGED = [
    ("-c 8192 --parallel 2 -fa on --spec-type draft-mtp", "8.00", "0.89", "4.00"),
    ("-c 4096 --parallel 1 -fa on", "4.00", "0.11", "0.00"),
    ("-c 12288 --parallel 3 -fa on --spec-type draft-mtp --spec-draft-n-max 5 -ctkd q8_0 "
     "-ctvd q8_0", "12.00", "2.00", "3.19"),
    ("-c 8192 --parallel 2 -fa on --kv-unified -ctk q8_0 -ctv q8_0 --spec-type "
     "ngram-mod,draft-mtp", "4.25", "0.89", "4.00"),
]  # fmt: skip


@pytest.mark.parametrize(("flags", "kv", "state", "mtp"), LOGGED)
def test_matches_what_the_pinned_llama_server_logged(
    flags: str, kv: str, state: str, mtp: str
) -> None:
    s = from_gguf(synthetic_meta(), source="synthetic")
    t = replace(target(s, ["llama-server", *flags.split()]), card=None)  # a CPU build, as logged
    _, cells = plan_llama.slot_checks(t)
    assert cells is not None
    _, _, n = plan_llama.budget(t, cells)
    got = (n["kv_per_slot"] * cells.streams, n["recurrent_total"],
           n.get("mtp_kv_per_slot", 0) * cells.streams)  # fmt: skip
    assert tuple(f"{b / MIB:.2f}" for b in got) == (kv, state, mtp)


@pytest.mark.parametrize(("flags", "kv", "state", "mtp"), LOGGED)
def test_the_budget_is_what_the_server_logged_plus_weights_and_compute(
    flags: str, kv: str, state: str, mtp: str
) -> None:
    """Every cache llama-server logged, counted once: a --kv-unified stream is shared by
    the slots, so its KV is not multiplied by --parallel. On the CUDA card, beyond what the
    CPU build logged: the MTP context's KQ mask (its cells x 512 ubatch rows x f16) and
    flash attention's f16 copies of a q8_0 cache (one layer's K and V over every cell of
    every stream), in the main context (-ctk/-ctv) or the MTP one (-ctkd/-ctvd)."""
    s = from_gguf(synthetic_meta(), source="synthetic")
    t = target(s, ["llama-server", *flags.split()])
    _, cells = plan_llama.slot_checks(t)
    assert cells is not None
    _, _, n = plan_llama.budget(t, cells)
    logged = float(kv) + float(state) + float(mtp)
    every_cell = cells.full_cells * cells.streams
    mask = cells.full_cells * min(cells.n_ctx, 512) * 2 if "draft-mtp" in flags else 0
    f16_layer = 2 * HEAD * KV_HEADS * 2  # K and V of one layer, f16, per cell
    copies = sum(f16_layer * every_cell for flag in ("-ctk q8_0", "-ctkd q8_0") if flag in flags)
    cuda = (mask + copies) / MIB
    assert n["need_mib"] == pytest.approx(4 + 1024 + logged + cuda, abs=0.01)  # weights 4 MiB


def test_without_draft_mtp_there_are_no_snapshots_and_no_mtp_kv(tmp_path: Path) -> None:
    s = shape_from_file(tmp_path, synthetic_meta())
    t = target(s, ["llama-server", "-c", "4096", "--parallel", "1"])
    _, cells = plan_llama.slot_checks(t)
    assert cells is not None
    _, _, n = plan_llama.budget(t, cells)
    assert n["recurrent_per_slot"] == 6 * (768 + 4096) * 4 and "mtp_kv_per_slot" not in n


def test_draft_mtp_on_a_model_without_mtp_blocks_fails() -> None:
    s = from_gguf(synthetic_meta(nextn_predict_layers=0), source="m")
    checks = plan_llama.type_checks(target(s, ["llama-server", "--spec-type", "draft-mtp"]))
    mtp = next(c for c in checks if c.name == "mtp")
    assert mtp.status == "fail" and "nextn_predict_layers" in mtp.detail
    bad = plan_llama.type_checks(target(s, ["llama-server", "--spec-type", "draft-mpt"]))
    assert next(c for c in bad if c.name == "spec-type").status == "fail"


def test_flags_not_given_to_the_planner_warn_for_a_hybrid_model() -> None:
    s = from_gguf(synthetic_meta(), source="m")
    checks = plan_hybrid.spec_checks(s, None, fa=True, all_quants=False)
    assert [(c.name, c.status) for c in checks] == [("speculative", "warn")]


def test_draft_mtp_with_a_draft_model_sizes_no_mtp_context_on_the_target() -> None:
    s = from_gguf(synthetic_meta(), source="m")
    spec = recurrent.speculative(["--spec-type", "draft-mtp", "-md", "draft.gguf"])
    assert spec.draft_model and not spec.mtp_on_target and spec.n_rs_seq == 3
    checks = plan_hybrid.spec_checks(s, spec, fa=True, all_quants=False)
    assert [(c.name, c.status) for c in checks] == [("mtp", "warn")]
    c = llama.cells(n_ctx=4096, n_seq=1, unified=False, window=None)
    _, _, n = plan_hybrid.memory(s, spec, 1, c)
    assert "mtp_kv_per_slot" not in n and n["n_rs_seq"] == 3


def test_a_plain_model_is_not_touched() -> None:
    doc = json.loads((REPO / "tests/data/preflight/gemma-3-270m-q4_k_m.metadata.json").read_text())
    g = from_gguf(doc["metadata"], source="gemma")
    assert g.hybrid is None and not g.mtp_layers and len(g.kv_layers) == len(g.layers) == 18
    c = llama.cells(n_ctx=4096, n_seq=1, unified=False, window=g.window)
    # the lock's llama-cuda command: draft-mtp with a draft model, on a plain model
    spec = recurrent.speculative(["--spec-type", "draft-mtp,ngram-mod", "-md", "d.gguf"])
    for flags in (None, spec):
        assert plan_hybrid.memory(g, flags, 4, c) == (plan_hybrid.Extra(), [], {})
        assert plan_hybrid.spec_checks(g, flags, fa=True, all_quants=False) == []


def test_a_hybrid_hf_config_is_refused_not_miscounted() -> None:
    config = {"num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 256,
              "layer_types": ["linear_attention"] * 3 + ["full_attention"]}  # fmt: skip
    with pytest.raises(FormatError, match="linear_attention layers"):
        from_hf_config(config, source="config.json")


def run_preflight(tmp_path: Path, store: Path, *argv: str) -> dict[str, Any]:
    parser = options.Parser(prog="lockpipe preflight", parents=[options.common()])
    parser.add_argument("targets", nargs="*")
    add_preflight_options(parser)
    out = tmp_path / "preflight.json"
    args: argparse.Namespace = parser.parse_args(
        ["--lock", str(LOCK), "--store", str(store), "--json", str(out), *argv]
    )
    args.verb = "preflight"
    do_preflight(args)
    report: dict[str, Any] = json.loads(out.read_text())
    return {t["target"]: t for t in report["targets"]}


def store_with(tmp_path: Path, meta: dict[str, Any]) -> Path:
    """A payload store holding a header-only qwen3.8-27b-iq3_s-mtp GGUF of ``meta``."""
    lock = load_lock(LOCK)
    store = tmp_path / "store"
    path = payload_store.payload_path(store, lock.payloads["qwen3.8-27b-iq3_s-mtp"])
    path.parent.mkdir(parents=True, exist_ok=True)
    write_gguf(path, meta)
    return store


def test_a_stored_header_wins_over_the_entry_and_names_what_the_entry_got_wrong(
    tmp_path: Path,
) -> None:
    """With a (synthetic) header in the store, llama-cuda-mtp is planned from the file: 2
    attention layers, state on 6. locks/preflight.json's transcript says otherwise, and the
    report names each key it got wrong."""
    store = store_with(tmp_path, synthetic_meta())
    by = run_preflight(tmp_path, store, "--gpu", "rtx3090", "--driver", "610.57.04",
                       "llama-cuda-mtp")  # fmt: skip
    mtp = by["llama-cuda-mtp"]
    n = mtp["numbers"]
    assert (n["attention_layers"], n["recurrent_layers"], n["mtp_layers"]) == (2, 6, 1)
    assert n["kv_per_token_full"] == 2 * 2 * HEAD * KV_HEADS * 2  # -ctk/-ctv f16
    drift = next(c for c in mtp["checks"] if c["name"] == "model-entry")
    assert drift["status"] == "warn"
    assert f"qwen35.block_count: the entry says 65, the file {MAIN + NEXTN}" in drift["detail"]
    assert "models.qwen3.8-27b-iq3_s-mtp" in drift["fix"]
    (tmp_path / "none").mkdir()  # an empty store
    fallback = run_preflight(tmp_path, tmp_path / "none", "--gpu", "rtx3090", "llama-cuda-mtp")
    assert fallback["llama-cuda-mtp"]["numbers"]["attention_layers"] == 16  # the entry's


def test_a_header_that_matches_the_entry_raises_no_warning(tmp_path: Path) -> None:
    entry = preflight_config.load(REPO / "locks" / "preflight.json").models
    meta = dict(entry["qwen3.8-27b-iq3_s-mtp"].data)
    store = store_with(tmp_path, meta)
    by = run_preflight(tmp_path, store, "--gpu", "rtx3090", "--driver", "610.57.04",
                       "llama-cuda-mtp")  # fmt: skip
    mtp = by["llama-cuda-mtp"]
    assert "store" in next(f for f in mtp["figures"] if f["name"] == "model")["note"]
    assert not [c for c in mtp["checks"] if c["name"] == "model-entry"]
    assert mtp["verdict"] == "pass"


@st.composite
def hybrids(draw: st.DrawFn) -> ModelShape:
    """Made-up hybrid headers: any interval, SSM dims and MTP block count."""
    n_main, nextn = draw(st.integers(2, 24)), draw(st.integers(0, 2))
    meta = synthetic_meta(
        block_count=n_main + nextn,
        nextn_predict_layers=nextn,
        full_attention_interval=draw(st.integers(1, 6)),
        attention__head_count_kv=draw(st.integers(1, 8)),
        attention__key_length=draw(st.sampled_from([64, 128, 256])),
        attention__value_length=draw(st.sampled_from([64, 128, 256])),
        ssm__conv_kernel=draw(st.integers(1, 5)),
        ssm__inner_size=draw(st.sampled_from([64, 256, 1024])),
        ssm__state_size=draw(st.sampled_from([16, 64, 128])),
        ssm__group_count=draw(st.integers(1, 8)),
    )
    return from_gguf(meta, source="hypothesis")


def per_slot_bytes(s: ModelShape, kv: str, n_ctx: int, slots: int, unified: bool) -> int:
    """Everything a hybrid context allocates, all slots: KV + state + MTP KV."""
    c = llama.cells(n_ctx=n_ctx, n_seq=slots, unified=unified, window=s.window)
    spec = recurrent.Speculative(types=("draft-mtp",))
    assert s.hybrid is not None
    state = recurrent.state_size(s.hybrid, slots=slots, n_rs_seq=spec.n_rs_seq).total
    return llama.kv_size(s, c, kv, kv).total + state + llama.mtp_kv_size(s, c, kv, kv).total


KV = st.sampled_from(["f16", "q8_0", "q4_0"])


@settings(max_examples=150, deadline=None)
@given(hybrids(), KV, st.integers(1, 1 << 20), st.integers(1, 1 << 20), st.integers(1, 8))
def test_hybrid_bytes_grow_with_context(s: ModelShape, kv: str, a: int, b: int, n: int) -> None:
    small, big = sorted((a, b))
    assert per_slot_bytes(s, kv, small * n, n, False) <= per_slot_bytes(s, kv, big * n, n, False)


@settings(max_examples=150, deadline=None)
@given(hybrids(), KV, st.integers(1, 1 << 18), st.integers(1, 7), st.booleans())
def test_hybrid_bytes_grow_with_slots(
    s: ModelShape, kv: str, window: int, n: int, unified: bool
) -> None:
    assert per_slot_bytes(s, kv, window * n, n, unified) <= per_slot_bytes(
        s, kv, window * (n + 1), n + 1, unified
    )


def test_an_entry_is_compared_key_by_key_nested_and_floats_at_f32_precision() -> None:
    entry = ModelEntry(kind="config", origin={"source": "t"},
                       data={"text_config": {"head_dim": 256, "rms_norm_eps": 1e-6},
                             "layer_types": ["full", "sliding"]})  # fmt: skip
    real = {"text_config": {"head_dim": 256, "rms_norm_eps": 9.999999974752427e-07},  # f32
            "layer_types": ["full", "sliding"], "vocab_size": 262144}  # fmt: skip
    assert plan.disagreements(entry, "config", real) == ()
    assert plan.disagreements(entry, "gguf", {}) == ()  # a gguf file: another kind of entry
    wrong = {**real, "text_config": {"head_dim": 512, "rms_norm_eps": 1e-5}}
    assert plan.disagreements(entry, "config", wrong) == (
        "text_config.head_dim: the entry says 256, the file 512",
        "text_config.rms_norm_eps: the entry says 1e-06, the file 1e-05",
    )
    gguf = replace(entry, kind="gguf", data={"a.long": [1, 2], "a.n": 3})
    assert plan.disagreements(gguf, "gguf", {"a.long": None, "a.n": 3}, unread={"a.long"}) == ()
