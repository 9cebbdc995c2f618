"""The memory budget of a llama.cpp target: ``fixed + slots x per_slot <= card``; pure.

``fixed`` is what does not grow with the slots: the payloads' bytes and the compute
buffers (or, calibrated, what two measurements put there): the main context's is the named
assumption ``compute_mib``, each extra context's (the Gemma 4 assistant, a hybrid model's
MTP context) adds its KQ masks (:mod:`.llama_cuda`). ``per_slot`` is what each slot adds:
its KV stream (attention, and the draft-mtp context's), the flash-attention f16 copies
each context makes of a non-f16 K and V over that stream (:mod:`.llama_cuda`), and a
hybrid model's recurrent state. Under ``--kv-unified`` with more than one slot there is
one KV stream whatever the slot count, so its KV and copies move into ``fixed`` and only
the state stays per slot; what then fits is a ``-c``, not a ``--parallel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lockpipe.preflight import llama, llama_cuda, plan_hybrid
from lockpipe.preflight.config import DEFAULT_LLAMA_COMPUTE_MIB, LlamaSlots, TargetPlan
from lockpipe.preflight.host import Card
from lockpipe.preflight.llama_args import LlamaArgs
from lockpipe.preflight.recurrent import ROLLBACK_TYPES as ROLLBACK
from lockpipe.preflight.verdict import MIB, Check, Figure


@dataclass(frozen=True, kw_only=True)
class Budget:
    """MiB, the terms of the inequality, and how they were found."""

    fixed: float
    per_slot: float
    state: float  # the recurrent state inside per_slot (0 for a plain model)
    unified: float  # a unified KV stream inside fixed (0: one stream per slot)
    window: int  # tokens each slot's stream holds (the unified stream: all of -c)
    how: str
    snapshots: int = 0  # rollback snapshots of the recurrent state inside ``state``

    def need(self, slots: int) -> float:
        return self.fixed + slots * self.per_slot

    def slots_that_fit(self, card_mib: int) -> int:
        """Slots of ``window`` tokens each that fit (one stream per slot)."""
        if self.per_slot <= 0:  # nothing per slot: the slot count is not what limits
            return 0
        return max(0, int((card_mib - self.fixed) // self.per_slot))

    def tokens_that_fit(self, card_mib: int, slots: int) -> int:
        """The ``-c`` that fits ``slots`` slots (a multiple of 256; 0: none does)."""
        kv = self.unified or self.per_slot - self.state  # MiB of one stream's KV
        base = self.fixed - self.unified + slots * self.state
        streams = 1 if self.unified else slots
        if kv <= 0 or self.window <= 0:
            return 0
        per_token = kv / self.window
        tokens = int((card_mib - base) / (per_token * streams))
        return max(0, tokens // llama.PAD * llama.PAD) * streams


def terms(
    a: LlamaArgs,
    plan: TargetPlan,
    weights_bytes: int | None,
    kv: llama.KvSize,
    extra: plan_hybrid.Extra,
    cells: llama.Cells,
    cuda: llama_cuda.CudaTerms | None = None,
    *,
    calibrated: bool = True,
) -> Budget:
    """The budget's terms: calibrated when a measurement fits the shape, else first
    principles (``calibrated=False``: first principles whatever). A calibration measures
    one stream per slot, so a unified cache skips it."""
    shared = cells.unified
    window = cells.slot
    cal = plan.llama_slots
    cuda = cuda or llama_cuda.CudaTerms()
    same = cal and (cal.cache_types, cal.slot_context) == ((a.type_k, a.type_v), window)
    if cal and calibrated and not shared and same:
        return Budget(fixed=cal.fixed_mib, per_slot=cal.per_slot_mib, state=0.0, unified=0.0,
                      window=window, how="calibrated")  # fmt: skip
    compute = plan.compute_mib or DEFAULT_LLAMA_COMPUTE_MIB
    fixed = ((weights_bytes or 0) + cuda.extra_compute) / MIB + compute
    stream = (kv.per_slot + extra.mtp_per_stream + cuda.copies_per_stream) / MIB
    state = extra.state_per_slot / MIB
    how = f"first principles (compute_mib {compute})"
    if cuda.extra_compute:
        how += "; fixed + the extra contexts' KQ masks"
    if shared:
        how += "; fixed holds the unified KV stream the slots share"
    if state:
        how += "; per_slot = " + ("recurrent state" if shared else "KV + recurrent state")
        how += " + MTP KV" if extra.mtp_per_stream and not shared else ""
    if cuda.copies_per_stream:
        how += "; the stream's KV + flash attention's f16 copies of it"
    if cal and calibrated:
        how += _why_not(cal, shared)
    if shared:
        return Budget(fixed=fixed + stream, per_slot=state, state=state, unified=stream,
                      window=window, how=how, snapshots=extra.snapshots)  # fmt: skip
    return Budget(fixed=fixed, per_slot=stream + state, state=state, unified=0.0,
                  window=window, how=how, snapshots=extra.snapshots)  # fmt: skip


def _why_not(cal: LlamaSlots, shared: bool) -> str:
    if shared:
        return "; the calibration measured one KV stream per slot, not a unified cache"
    return (
        f"; the calibration is for {cal.slot_context:,} tokens per slot at "
        f"{'/'.join(cal.cache_types)}, not this shape"
    )


def judge(
    b: Budget, a: LlamaArgs, card: Card, *, fitted: bool
) -> tuple[list[Check], list[Figure], dict[str, Any]]:
    """The budget check (a warning when ``--fit`` will shrink the context instead), the
    free-memory check, and their figures. ``fitted``: no ``-c``, ``--fit`` sizes it."""
    need, mem = b.need(a.slots), card.memory_mib
    fit = 0 if b.unified else b.slots_that_fit(mem)
    tokens = b.tokens_that_fit(mem, a.slots)
    figures = [
        Figure(
            name="budget",
            value=f"{b.fixed:,.0f} + {a.slots} x {b.per_slot:,.0f} = {need:,.0f} MiB",
            note=f"fixed + slots x per_slot, {b.how}; card {mem:,} MiB",
        ),
        Figure(name="headroom", value=f"{mem - need:,.0f} MiB"),
    ]
    if b.unified:
        figures.append(Figure(name="unified -c that fits", value=f"{tokens:,}",
                              note=f"{a.slots} slots share one stream"))  # fmt: skip
    else:
        figures.append(
            Figure(
                name="sessions at full window",
                value=str(fit),
                note=f"slot {fit + 1} would need {b.need(fit + 1):,.0f} MiB",
            )
        )
    numbers = {"fixed_mib": b.fixed, "per_slot_mib": b.per_slot, "need_mib": need,
               "max_slots": None if b.unified else fit, "fits_ctx": tokens,
               "unified_kv_mib": b.unified, "headroom_mib": mem - need,
               "budget_from": b.how}  # fmt: skip
    checks = [_budget_check(b, a, mem, fit, tokens, fitted=fitted)]
    if card.free_mib is not None and need <= mem and need > card.free_mib:
        checks.append(
            Check(
                name="free",
                status="fail",
                fix="stop what holds the card",
                detail=f"needs {need:,.0f} MiB, {card.free_mib:,} MiB free now",
            )
        )
    return checks, figures, numbers


def _budget_check(
    b: Budget, a: LlamaArgs, mem: int, fit: int, tokens: int, *, fitted: bool
) -> Check:
    need = b.need(a.slots)
    if need <= mem:
        return Check(name="budget", status="pass", detail=f"{need:,.0f} of {mem:,} MiB")
    what = f"one shared stream of {b.window:,} cells" if b.unified else f"{b.window:,} tokens"
    problem = f"{a.slots} slot(s) at {what} project {need:,.0f} MiB past the {mem:,} MiB card"
    if fitted:  # --fit shrinks the context rather than fail
        return Check(name="budget", status="warn", fix="-c and --parallel that fit",
                     detail=f"{problem}: --fit shrinks the total to about {tokens:,}")  # fmt: skip
    if b.fixed - b.unified >= mem:
        detail, fix = "the weights and compute alone fill it", "a smaller quant or a bigger card"
    elif not b.unified and fit >= 1:
        detail, fix = f"{fit} fit", f"--parallel {fit} (the KV pool allocates up front)"
    elif tokens:
        detail, fix = f"-c {tokens:,} fits", f"-c {tokens} (the KV pool allocates up front)"
    elif b.state and b.fixed - b.unified + a.slots * b.state >= mem:
        # the recurrent state holds 1 + n_rs_seq rows per slot, and a rollback --spec-type
        # makes n_rs_seq --spec-draft-n-max (need_n_rs_seq, recurrent.Speculative.n_rs_seq):
        # no quant or card size is the lever when those snapshots fill the card
        detail = f"the recurrent state alone ({a.slots} x {b.state:,.0f} MiB) fills it"
        fix = (
            f"a lower --spec-draft-n-max ({b.snapshots:,} rollback snapshots of the state "
            f"per slot) or a --spec-type that keeps none (not {', '.join(sorted(ROLLBACK))})"
            if b.snapshots
            else "fewer slots (--parallel) or a bigger card"
        )
    else:
        detail, fix = "no context fits", "a smaller quant or a bigger card"
    return Check(name="budget", status="fail", detail=f"{problem}; {detail}", fix=fix)
