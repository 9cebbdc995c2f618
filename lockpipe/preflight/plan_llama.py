"""Preflight of a llama.cpp target: the slot grid, KV bytes, FA kernels, the budget; pure.

A hybrid model (:mod:`lockpipe.preflight.recurrent`) adds its recurrent state per slot
and, under ``--spec-type draft-mtp``, the MTP context's KV per KV stream (one per slot, or
one shared under ``--kv-unified``). On a CUDA card each context's flash-attention f16
copies and the extra contexts' masks are :mod:`.llama_cuda`. The budget's arithmetic is
:mod:`.llama_budget`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lockpipe.preflight import llama, llama_budget, llama_cuda, plan_hybrid, recurrent
from lockpipe.preflight.config import TargetPlan
from lockpipe.preflight.host import Card
from lockpipe.preflight.llama_args import LlamaArgs
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import Check, Figure, checked, mib


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
    # general.architecture of the --model-draft GGUF (the lock's expect.arch, which the
    # payload check holds to the header); None: no draft model, or not known
    draft_arch: str | None = None


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
    problem = _fa_problem(t)
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


def _fa_problem(t: LlamaTarget) -> str | None:
    """Why the CUDA build has no flash-attention kernel for the main context, or None."""
    a = t.args
    problem = llama.fa_pair_problem(a.type_k, a.type_v, all_quants=_fa_all_quants(t))
    heads = {(x.head_k, x.head_v, x.q_heads, x.kv_heads): x for x in t.shape.kv_layers}
    return problem or next((p for x in heads.values() if (p := llama.fa_head_problem(x))), None)


def flash_on(t: LlamaTarget) -> bool:
    """Flash attention runs: a CUDA card, and ``-fa on``, or ``auto`` with a kernel for it."""
    flash = t.args.flash
    return t.card is not None and (flash == "on" or (flash == "auto" and not _fa_problem(t)))


def cuda_terms(
    t: LlamaTarget, cells: llama.Cells
) -> tuple[llama_cuda.CudaTerms, list[Figure], dict[str, Any]]:
    """What the CUDA backend allocates beyond the weights and KV (:mod:`.llama_cuda`)."""
    a, card = t.args, t.card
    if card is None:
        return llama_cuda.CudaTerms(), [], {}
    attends = llama_cuda.attentions(t.shape, a.type_k, a.type_v, t.spec, t.draft_arch)
    ct = llama_cuda.terms(attends, cells, n_ubatch=a.n_ubatch, flash=flash_on(t),
                          cc=card.compute_cap)  # fmt: skip
    per = "for the unified stream" if cells.unified else "per slot"
    made = [f"{c.context}: layer {c.layer} K+V to f16, {mib(c.copies_per_stream)}"
            for c in ct.costs if c.copies_per_stream]  # fmt: skip
    figures = [
        Figure(
            name=f"FA f16 copies {per}",
            value=mib(ct.copies_per_stream),
            note="; ".join(made) or "none: the kernels read this cache as it is",
        )
    ]
    extra = [c for c in ct.costs if c.masks]
    if extra:
        figures.append(
            Figure(
                name="extra contexts' compute",
                value=mib(ct.extra_compute),
                note="; ".join(f"{c.context}: KQ masks {mib(c.masks)}" for c in extra)
                + f" ({min(cells.n_ctx, a.n_ubatch):,} ubatch rows over the cells)",
            )
        )
    numbers = {"fa_copies_per_slot": ct.copies_per_stream, "extra_compute": ct.extra_compute,
               "contexts": [c.context for c in ct.costs]}  # fmt: skip
    return ct, figures, numbers


def budget(
    t: LlamaTarget, c: llama.Cells | None
) -> tuple[list[Check], list[Figure], dict[str, Any]]:
    """The KV figures, then (on a card) the budget: :mod:`.llama_budget`."""
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
    per = "for the unified stream" if cells.unified else "per slot"
    figures = [
        Figure(
            name="KV bytes/token (full layers)",
            value=f"{kv.per_token_full:,} B",
            note=f"{shape.count(sliding=False)} layers, {a.type_k}/{a.type_v}",
        ),
        Figure(
            name="KV bytes/token (sliding layers)",
            value=f"{kv.per_token_swa:,} B",
            note=f"{shape.count(sliding=True)} layers, {cells.swa_cells:,} cells {per}",
        ),
        Figure(
            name=f"KV {per} (first principles)",
            value=mib(kv.per_slot),
            note=f"at {window:,} tokens {per}",
        ),
        *hybrid_figures,
    ]
    numbers: dict[str, Any] = {"slot_window": window, "slots": a.slots, "kv_per_slot": kv.per_slot,
                               "kv_per_token_full": kv.per_token_full,
                               "kv_per_token_swa": kv.per_token_swa,
                               **hybrid_numbers}  # fmt: skip
    if card is None:
        return [], figures, numbers
    cuda, cuda_figures, cuda_numbers = cuda_terms(t, cells)
    figures += cuda_figures
    numbers.update(cuda_numbers)
    b = llama_budget.terms(a, t.plan, t.weights_bytes, kv, extra, cells, cuda)
    cal = t.plan.llama_slots
    if b.how == "calibrated" and cal:
        first = llama_budget.terms(a, t.plan, t.weights_bytes, kv, extra, cells, cuda,
                                   calibrated=False)  # fmt: skip
        figures += [
            Figure(
                name="measured",
                value=" · ".join(f"{p.slots} slot(s) {p.used_mib:,} MiB" for p in cal.points),
                note=str(cal.origin.get("source", "")),
            ),
            Figure(
                name="first principles",
                value=f"{first.fixed:,.0f} + {a.slots} x {first.per_slot:,.0f} = "
                f"{first.need(a.slots):,.0f} MiB",
                note=f"per slot {first.per_slot / b.per_slot - 1:+.1%} and fixed "
                f"{first.fixed / b.fixed - 1:+.1%} against the calibration; {first.how}",
            ),
        ]
        numbers.update(first_principles_fixed_mib=first.fixed,
                       first_principles_per_slot_mib=first.per_slot)  # fmt: skip
    checks, more, judged = llama_budget.judge(b, a, card, fitted=c is None)
    return checks, figures + more, {**numbers, **judged}
