"""Preflight of a llama.cpp target: the slot grid, KV bytes, FA kernels, the budget; pure.

A hybrid model (:mod:`pipeline.preflight.recurrent`) adds, per slot, its recurrent state
and, under ``--spec-type draft-mtp``, the MTP context's KV to the attention KV.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.preflight import llama, plan_hybrid, recurrent
from pipeline.preflight.config import DEFAULT_LLAMA_COMPUTE_MIB, TargetPlan
from pipeline.preflight.host import Card
from pipeline.preflight.llama_args import LlamaArgs
from pipeline.preflight.shape import ModelShape
from pipeline.preflight.verdict import MIB, Check, Figure, checked, mib


@dataclass(frozen=True, kw_only=True)
class LlamaTarget:
    args: LlamaArgs
    build_args: Mapping[str, str]
    declared_context: int | None  # serve.context: the window each slot is promised
    shape: ModelShape
    card: Card | None  # None for a CPU build
    plan: TargetPlan
    weights_bytes: int | None
    # the command's speculative flags; None: not given (a hybrid model then warns)
    spec: recurrent.Speculative | None = None


def slot_checks(t: LlamaTarget) -> tuple[list[Check], llama.Cells | None]:
    a, trained = t.args, t.shape.trained_context
    kind, why = a.intent(trained)
    out = [Check(name="context", status="pass", detail=why)]
    n_ctx = a.ctx if kind == "explicit" else trained if kind == "trained" else None
    if n_ctx is None:
        if a.slots > 1:
            out.append(
                Check(
                    name="slot-grid",
                    status="warn",
                    detail=f"--fit shares a fitted total among {a.slots} slots: a slot "
                    "may get less than the trained window",
                    fix=f"-c {(trained or 0) * a.slots} --parallel {a.slots} to give "
                    "each slot the full window",
                )
            )
        return out, None
    c = llama.cells(
        n_ctx=n_ctx,
        n_seq=a.slots,
        unified=a.kv_unified,
        window=t.shape.window,
        n_ubatch=a.n_ubatch,
        swa_full=a.swa_full,
    )
    problem = None
    if not a.kv_unified and n_ctx % a.slots:
        problem = (
            f"{n_ctx} / {a.slots} slots = {n_ctx / a.slots:,.2f}: the slot grid does "
            f"not come out even (llama.cpp would make it {c.slot} per slot)"
        )
    elif not a.kv_unified and (n_ctx // a.slots) % llama.PAD:
        problem = (
            f"{n_ctx} / {a.slots} = {n_ctx // a.slots} per slot is not a multiple of "
            f"{llama.PAD}: llama.cpp pads it to {c.slot}"
        )
    elif t.declared_context and c.slot != t.declared_context:
        problem = f"each slot gets {c.slot:,}; the target declares {t.declared_context:,}"
    elif trained and c.slot > trained:
        problem = f"each slot gets {c.slot:,}, past the trained window {trained:,}"
    fix = f"-c {(t.declared_context or trained or 0) * a.slots} --parallel {a.slots}"
    ok = f"{n_ctx:,} / {a.slots} slot(s) = {c.slot:,} per slot"
    if trained:
        ok += " (the full trained window)" if c.slot == trained else f" (trained: {trained:,})"
    out.append(checked("slot-grid", problem, ok, fix))
    if a.kv_unified and a.slots > 1:
        out.append(
            Check(
                name="unified",
                status="warn",
                detail=f"a unified cache: {a.slots} slots share {c.n_ctx:,} cells; "
                "no slot is promised a full window",
                fix="--parallel N (not auto) or --no-kv-unified",
            )
        )
    return out, c


def type_checks(t: LlamaTarget) -> list[Check]:
    """Cache types and FA kernels of the main context, then the speculative flags."""
    a = t.args
    return _cache_checks(t) + plan_hybrid.spec_checks(
        t.shape, t.spec, fa=t.card is not None and a.flash != "off", all_quants=_fa_all_quants(t)
    )


def _fa_all_quants(t: LlamaTarget) -> bool:
    return t.build_args.get("FA_ALL_QUANTS", "OFF").upper() in ("ON", "1", "TRUE")


def _cache_checks(t: LlamaTarget) -> list[Check]:
    a, out = t.args, []
    for which, kv in (("K", a.type_k), ("V", a.type_v)):
        if kv not in llama.KV_TYPES:
            return [
                Check(
                    name="cache-type",
                    status="fail",
                    fix="one of " + ", ".join(llama.KV_TYPES),
                    detail=f"--cache-type-{which.lower()} {kv} is not a b10069 cache type",
                )
            ]
        out.append(
            checked(
                "cache-type",
                llama.block_problem(t.shape, kv, which),
                f"{which} {kv} blocks divide every head size",
            )
        )
    quant_v = a.type_v in llama.QUANTIZED
    if a.flash == "off" and quant_v:
        out.append(
            Check(
                name="flash-attn",
                status="fail",
                fix="-fa on",
                detail=f"a quantized V cache ({a.type_v}) needs flash attention",
            )
        )
    if t.card is None or a.flash == "off":
        return out
    all_quants = _fa_all_quants(t)
    problem = llama.fa_pair_problem(a.type_k, a.type_v, all_quants=all_quants)
    heads = {(x.head_k, x.head_v, x.q_heads, x.kv_heads): x for x in t.shape.kv_layers}
    problem = problem or next((p for x in heads.values() if (p := llama.fa_head_problem(x))), None)
    ok = f"CUDA FA kernels exist for K {a.type_k} / V {a.type_v}"
    if all_quants and llama.fa_pair_problem(a.type_k, a.type_v, all_quants=False) is None:
        ok += " (already in the default build: FA_ALL_QUANTS is not needed for this pair)"
    fix = "FA_ALL_QUANTS=ON in build_args, or a same-type f16/q8_0/q4_0/bf16 pair"
    if problem and a.flash == "auto" and not quant_v:
        return [
            *out,
            Check(
                name="fa-kernels",
                status="warn",
                detail=problem + ": -fa auto turns flash attention off",
                fix=fix,
            ),
        ]
    return [*out, checked("fa-kernels", problem, ok, fix)]


def budget(
    t: LlamaTarget, c: llama.Cells | None
) -> tuple[list[Check], list[Figure], dict[str, Any]]:
    """Fixed + slots x per_slot <= card, calibrated when a measurement fits the shape."""
    a, shape, card = t.args, t.shape, t.card
    window = c.slot if c else shape.trained_context or 0
    cells = c or llama.cells(
        n_ctx=window * a.slots,
        n_seq=a.slots,
        unified=a.kv_unified,
        window=shape.window,
        n_ubatch=a.n_ubatch,
        swa_full=a.swa_full,
    )
    kv = llama.kv_size(shape, cells, a.type_k, a.type_v)
    extra, hybrid_figures, hybrid_numbers = plan_hybrid.memory(t.shape, t.spec, a.slots, cells)
    shared = cells.streams == 1 and a.slots > 1  # --kv-unified: one KV stream for every slot
    unified_mib = 0.0  # that stream's KV, counted once in fixed (first principles only)
    figures = [
        Figure(
            name="KV bytes/token (full layers)",
            value=f"{kv.per_token_full:,} B",
            note=f"{shape.count(sliding=False)} layers, {a.type_k}/{a.type_v}",
        ),
        Figure(
            name="KV bytes/token (sliding layers)",
            value=f"{kv.per_token_swa:,} B",
            note=f"{shape.count(sliding=True)} layers, {cells.swa_cells:,} cells per slot",
        ),
        Figure(
            name="KV per slot (first principles)",
            value=mib(kv.per_slot),
            note=f"at {window:,} tokens per slot",
        ),
        *hybrid_figures,
    ]
    numbers: dict[str, Any] = {"slot_window": window, "slots": a.slots, "kv_per_slot": kv.per_slot,
                               "kv_per_token_full": kv.per_token_full,
                               "kv_per_token_swa": kv.per_token_swa,
                               **hybrid_numbers}  # fmt: skip
    if card is None:
        return [], figures, numbers
    cal = t.plan.llama_slots
    if cal and cal.cache_types == (a.type_k, a.type_v) and cal.slot_context == window:
        fixed, per_slot, how = cal.fixed_mib, cal.per_slot_mib, "calibrated"
        figures.append(
            Figure(
                name="measured",
                value=" · ".join(f"{p.slots} slot(s) {p.used_mib:,} MiB" for p in cal.points),
                note=str(cal.origin.get("source", "")),
            )
        )
    else:
        compute = t.plan.compute_mib or DEFAULT_LLAMA_COMPUTE_MIB
        fixed = (t.weights_bytes or 0) / MIB + compute
        stream = (kv.per_slot + extra.mtp_per_stream) / MIB  # KV of one stream
        per_slot, how = stream, f"first principles (compute_mib {compute})"
        if shared:  # one unified stream: the slots share its cells, whatever their count
            fixed, per_slot, unified_mib = fixed + stream, 0.0, stream
            how += "; fixed includes the unified KV the slots share"
        if extra.state_per_slot:
            per_slot += extra.state_per_slot / MIB
            how += "; per_slot = " + ("" if shared else "KV + ") + "recurrent state"
            how += " + MTP KV" if extra.mtp_per_stream and not shared else ""
        if cal:
            how += (
                f"; the calibration is for {cal.slot_context:,} tokens per slot at "
                f"{'/'.join(cal.cache_types)}, not this shape"
            )
    need = fixed + a.slots * per_slot
    if per_slot > 0:
        fit = int((card.memory_mib - fixed) // per_slot)
    else:  # a unified cache of a plain model: more slots cost nothing more
        fit = a.slots if fixed <= card.memory_mib else 0
    figures += [
        Figure(
            name="budget",
            value=f"{fixed:,.0f} + {a.slots} x {per_slot:,.0f} = {need:,.0f} MiB",
            note=f"fixed + slots x per_slot, {how}; card {card.memory_mib:,} MiB",
        ),
        Figure(name="headroom", value=f"{card.memory_mib - need:,.0f} MiB"),
        Figure(
            name="sessions at full window",
            value=str(fit),
            note=f"slot {fit + 1} would need {fixed + (fit + 1) * per_slot:,.0f} MiB",
        ),
    ]
    numbers.update(
        fixed_mib=fixed,
        per_slot_mib=per_slot,
        need_mib=need,
        max_slots=fit,
        headroom_mib=card.memory_mib - need,
        budget_from=how,
    )
    problem = None
    if need > card.memory_mib:
        problem = (
            f"{a.slots} slot(s) at {window:,} tokens project {need:,.0f} MiB past the "
            f"{card.memory_mib:,} MiB card; {fit} fit"
        )
    checks = [
        checked(
            "budget",
            problem,
            f"{need:,.0f} of {card.memory_mib:,} MiB",
            f"--parallel {fit} (the KV pool allocates up front)",
        )
    ]
    if problem and c is None:  # --fit will shrink the context rather than fail
        if unified_mib:  # the unified cells scale with -c, the state with the slots
            spare = card.memory_mib - (fixed - unified_mib) - a.slots * per_slot
            tokens = int(spare / unified_mib * cells.n_ctx)
        else:
            tokens = int((card.memory_mib - fixed) / per_slot * window) if per_slot else 0
        checks = [
            Check(
                name="budget",
                status="warn",
                fix="-c and --parallel that fit",
                detail=problem + f": --fit shrinks the total to about {tokens:,}",
            )
        ]
    if card.free_mib is not None and need <= card.memory_mib and need > card.free_mib:
        checks.append(
            Check(
                name="free",
                status="fail",
                fix="stop what holds the card",
                detail=f"needs {need:,.0f} MiB, {card.free_mib:,} MiB free now",
            )
        )
    return checks, figures, numbers
