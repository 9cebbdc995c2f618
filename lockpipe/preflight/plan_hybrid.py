"""A hybrid llama.cpp target's extra memory and speculative-decoding checks; pure.

Beyond the attention KV (:mod:`lockpipe.preflight.llama`): per slot, the recurrent state
(:func:`lockpipe.preflight.recurrent.state_size`, independent of the context); per KV
stream (one per slot, or one shared under ``--kv-unified``), under ``--spec-type
draft-mtp``, the MTP context's KV (:func:`lockpipe.preflight.llama.mtp_kv_size`, growing
with it). The rules and their sources are in :mod:`lockpipe.preflight.recurrent`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from lockpipe.preflight import llama, recurrent
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import Check, Figure, checked, mib
from lockpipe.spelling import hint


def spec_checks(
    shape: ModelShape, spec: recurrent.Speculative | None, *, fa: bool, all_quants: bool
) -> list[Check]:
    """Speculative flags against the model: draft-mtp needs MTP blocks and a cache type pair."""
    out: list[Check] = []
    if spec is None:
        if shape.hybrid and (shape.hybrid.rollback or shape.mtp_layers):
            out.append(
                Check(
                    name="speculative",
                    status="warn",
                    detail="the command's speculative flags were not given to the planner: "
                    "no rollback snapshot or MTP context is counted",
                    fix="LlamaTarget(spec=recurrent.speculative(serve.command))",
                )
            )
        return out
    if spec.unknown:
        out.append(
            Check(
                name="spec-type",
                status="fail",
                detail=f"--spec-type {','.join(spec.unknown)}: unknown to b10069's llama-server",
                fix="one of " + ", ".join(sorted(recurrent.SPEC_TYPES)),
            )
        )
    drafts = (("-ctkd", spec.draft_type_k), ("-ctvd", spec.draft_type_v))
    if bad := [(flag, kv) for flag, kv in drafts if kv not in llama.KV_TYPES]:
        # common/arg.cpp reads -ctkd/-ctvd with kv_cache_type_from_str, as -ctk/-ctv, and
        # stops on a name it lacks whether or not a draft runs; named "cache-type" so the
        # plan stops before sizing a cache of an unknown type (a KeyError in row_bytes)
        flag, kv = bad[0]
        return [
            *out,
            Check(
                name="cache-type",
                status="fail",
                detail=f"{flag} {kv} is not a b10069 cache type{hint(kv, llama.KV_TYPES)}",
                fix="one of " + ", ".join(llama.KV_TYPES),
            ),
        ]
    if not spec.mtp or shape.hybrid is None:  # a plain model: as before, nothing added
        return out
    if spec.draft_model:
        detail = "draft-mtp with a draft model: its MTP context lives there and is not sized"
        return [*out, Check(name="mtp", status="warn", detail=detail)]
    pair = (spec.draft_type_k, spec.draft_type_v)
    problem = None
    if not shape.mtp_layers:
        problem = (
            "--spec-type draft-mtp needs MTP blocks (nextn_predict_layers > 0); this model has "
            "none, and llama.cpp refuses the MTP context (src/llama-context.cpp:3575-3579)"
        )
    elif fa:  # a CUDA card, flash attention not off
        problem = llama.fa_pair_problem(*pair, all_quants=all_quants)
    ok = f"{len(shape.mtp_layers)} MTP block(s), draft KV {pair[0]}/{pair[1]}"
    fix = "a GGUF with blk.N.nextn.*, or -ctkd/-ctvd of a kernel pair, or no draft-mtp"
    return [*out, checked("mtp", problem, ok, fix)]


@dataclass(frozen=True, kw_only=True)
class Extra:
    """Memory beyond the main context's attention KV, in bytes."""

    state_per_slot: int = 0  # recurrent state: one set per sequence, whatever the cache
    mtp_per_stream: int = 0  # the draft-mtp context's KV: per KV stream, like the main KV
    snapshots: int = 0  # rollback snapshots in state_per_slot (--spec-draft-n-max of them)


def memory(
    shape: ModelShape, given: recurrent.Speculative | None, slots: int, cells: llama.Cells
) -> tuple[Extra, list[Figure], dict[str, Any]]:
    """What a hybrid model holds beyond the attention KV (recurrent state, the draft-mtp
    context's KV), with the figures and JSON numbers that show them; nothing for a plain
    model."""
    h = shape.hybrid
    if h is None:
        return Extra(), [], {}
    spec = given or recurrent.Speculative()
    st = recurrent.state_size(h, slots=slots, n_rs_seq=spec.n_rs_seq)
    r, s = h.dims.n_embd_r, h.dims.n_embd_s
    figures = [
        Figure(
            name="layers",
            value=f"{len(shape.kv_layers)} attention (KV) · {st.layers} recurrent (state) · "
            f"{h.nextn} MTP",
            note=f"{h.arch}: {h.pattern}",
        ),
        Figure(
            name="recurrent state per slot",
            value=_size(st.per_slot),
            note=f"{st.layers} layers x ({r:,} + {s:,}) f32 x {st.rows_per_slot} row(s) "
            f"(1 + {st.rows_per_slot - 1} rollback snapshots); context-independent",
        ),
    ]
    numbers: dict[str, Any] = {"attention_layers": len(shape.kv_layers),
                               "recurrent_layers": st.layers, "mtp_layers": h.nextn,
                               "n_embd_r": r, "n_embd_s": s, "n_rs_seq": st.rows_per_slot - 1,
                               "recurrent_per_slot": st.per_slot,
                               "recurrent_total": st.total}  # fmt: skip
    extra = Extra(state_per_slot=st.per_slot, snapshots=st.rows_per_slot - 1)
    if spec.mtp_on_target and shape.mtp_layers:
        mtp = llama.mtp_kv_size(shape, cells, spec.draft_type_k, spec.draft_type_v)
        extra = replace(extra, mtp_per_stream=mtp.per_slot)
        figures.append(
            Figure(
                name="MTP KV (unified)" if cells.unified else "MTP KV per slot",
                value=_size(mtp.per_slot),
                note=f"{len(shape.mtp_layers)} MTP block(s), {mtp.per_token_full:,} B/token at "
                f"{spec.draft_type_k}/{spec.draft_type_v} (-ctkd/-ctvd), {cells.full_cells:,} "
                "cells",
            )
        )
        numbers.update(mtp_kv_per_token=mtp.per_token_full, mtp_kv_per_slot=mtp.per_slot)
    return extra, figures, numbers


def _size(n_bytes: int) -> str:
    """MiB as the rest of the table, with the bytes: a small state would read "0 MiB"."""
    return f"{mib(n_bytes)} ({n_bytes:,} B)"
