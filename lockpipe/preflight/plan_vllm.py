"""Preflight of a vLLM target: the pinned release's rules, its pages and its pool; pure."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from lockpipe.errors import LockError
from lockpipe.preflight import vllm_kv, vllm_validate
from lockpipe.preflight.config import DEFAULT_VLLM_RESERVE_MIB, TargetPlan
from lockpipe.preflight.host import Card
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import MIB, Check, Figure, mib
from lockpipe.preflight.vllm_args import VllmArgs, default_batched_tokens, utilization
from lockpipe.preflight.vllm_rules import AUTO_LENGTH, choose_backend, rule_checks, skip_set


@dataclass(frozen=True, kw_only=True)
class VllmTarget:
    args: VllmArgs
    facts: Mapping[str, Any]  # the release's extracted rules
    shape: ModelShape
    card: Card
    plan: TargetPlan
    weights_bytes: int | None
    env: Mapping[str, str]
    declared_parallel: int | None
    # what vLLM's own backend and page functions said (None: not asked; NotRun: why not)
    validation: vllm_validate.Validation | vllm_validate.NotRun | None = None


def validation_request(t: VllmTarget) -> dict[str, Any]:
    """The facts vLLM's own functions are asked about (:func:`.vllm_validate.request`)."""
    a, shape = t.args, t.shape
    backend = choose_backend(a, shape, t.card.compute_cap, t.facts)
    length = served_length(a, shape)
    k = knobs(t, backend, a.kv_dtype, length)
    try:
        raw = vllm_kv.pages(shape, k)
    except ValueError:  # a dtype lockpipe cannot size: vLLM's selector is still asked
        raw = []
    return vllm_validate.request(
        shape=shape,
        args=a,
        cap=t.card.compute_cap,
        card=t.card.name,
        memory_mib=t.card.memory_mib,
        skip=k.skip,
        pages=raw,
        wheel=str(t.facts["wheel"]["file"]),
    )


def code_checks(
    t: VllmTarget, extract: list[Check], raw: list[vllm_kv.Page]
) -> tuple[list[Check], Figure]:
    """The extract's checks with its ``backend`` verdict replaced by vLLM's own where its
    functions ran (their page unification added), and the figure that says which ran."""
    v, cap = t.validation, t.card.compute_cap
    if not isinstance(v, vllm_validate.Validation):
        why = v.reason if isinstance(v, vllm_validate.NotRun) else "not asked by this caller"
        note = f"lockpipe's extract (vllm_rules.py, data/vllm-{t.facts['vllm']}.json): {why}"
        return extract, Figure(name="backend rules", value="extract", note=note)
    ours = next((c for c in extract if c.name == "backend"), None)
    theirs = vllm_validate.backend_check(v, cap)
    if ours is not None and (ours.status == "fail") != (theirs.status == "fail"):
        theirs = replace(
            theirs, detail=f"{theirs.detail} (lockpipe's extract said {ours.status}: {ours.detail})"
        )
    if unsure := vllm_validate.unsure(v):
        theirs = replace(
            theirs,
            detail=f"{theirs.detail}; {', '.join(unsure)} could not be "
            "imported here, and vLLM tries it before the backend picked",
        )
    out = [theirs if c is ours else c for c in extract]
    if ours is None:
        out.append(theirs)
    if (page := vllm_validate.page_check(v, raw)) is not None:
        out.append(page)
    ran = "Gemma4Config hook, get_attn_backend_cls" + (
        ", unify_kv_cache_spec_page_size" if not v.pages_not_run else ""
    )
    if v.batched_default:
        ran += f", get_batch_defaults (max_num_batched_tokens {v.batched_default})"
    note = f"vLLM {v.version}'s own code ran: {ran}" + (
        f"; pages by the extract: {v.pages_not_run}" if v.pages_not_run else ""
    )
    return out, Figure(name="backend rules", value="vLLM's code", note=note)


def kernel_blocks(facts: Mapping[str, Any], backend: str | None) -> tuple[int, ...]:
    """The backend's kernel block sizes (``MultipleOf(16)`` counts as 16)."""
    text = (facts["attention_backends"].get(backend or "") or {}).get(
        "kernel_block_sizes"
    ) or "[16]"
    return tuple(int(n) for n in re.findall(r"\d+", text)) or (16,)


def default_block_size(facts: Mapping[str, Any]) -> int:
    """``CacheConfig.DEFAULT_BLOCK_SIZE`` in the wheel (16 in 0.29.0 and 0.33.0)."""
    value = (facts.get("cache_config_defaults") or {}).get("DEFAULT_BLOCK_SIZE")
    if not isinstance(value, int):
        version = facts.get("vllm")
        raise LockError(
            f"vLLM {version}'s rules lack DEFAULT_BLOCK_SIZE: derive them again "
            f"(python -m lockpipe.preflight.vllm_release {version})"
        )
    return value


def batched_default(t: VllmTarget) -> int:
    """``--max-num-batched-tokens`` when not given: vLLM's ``get_batch_defaults`` where its
    functions ran, else the extract's copy of it (``vllm_args.default_batched_tokens``)."""
    v = t.validation
    if isinstance(v, vllm_validate.Validation) and v.batched_default:
        return v.batched_default
    return default_batched_tokens(t.card.name, t.card.memory_mib)


def knobs(t: VllmTarget, backend: str | None, kv_dtype: str, length: int) -> vllm_kv.Knobs:
    a = t.args
    batched = a.batched_tokens or batched_default(t)
    return vllm_kv.Knobs(
        kv_dtype=kv_dtype,
        max_model_len=length,
        in_flight=(2 if a.async_scheduling else 1) * batched,
        block_size=a.block_size or default_block_size(t.facts),
        kernel_blocks=kernel_blocks(t.facts, backend),
        skip=skip_set(t.shape, a, vllm_kv.boundary_skip(t.shape, kv_dtype)),
    )


def ideal_bytes_per_request(shape: ModelShape, k: vllm_kv.Knobs) -> int:
    """Bytes one request at ``max_model_len`` would take with no pages, padding or blocks."""
    held = min((shape.window or k.max_model_len) - 1 + k.in_flight, k.max_model_len)
    return sum(
        vllm_kv.bytes_per_token(x, "auto" if x.index in k.skip else k.kv_dtype)
        * (held if x.sliding else k.max_model_len)
        for x in shape.kv_layers
    )


def backend_for(t: VllmTarget, kv_dtype: str) -> str | None:
    """The backend vLLM would pick for ``kv_dtype`` with no --attention-backend."""
    if kv_dtype.startswith("turboquant_"):
        return "TURBOQUANT"  # the one backend that lists turboquant_* dtypes
    config = {k: v for k, v in t.args.attention_config.items() if k != "backend"}
    unforced = replace(t.args, backend=None, attention_config=config)
    return choose_backend(unforced, t.shape, t.card.compute_cap, t.facts)


def reserve(t: VllmTarget, requested: int) -> tuple[int, str]:
    """Bytes outside weights and KV: solved from a measured pool when there is one."""
    cal = t.plan.vllm_pool
    if cal is not None and t.weights_bytes is not None:
        k = knobs(t, backend_for(t, cal.kv_dtype), cal.kv_dtype, cal.max_model_len)
        kv = vllm_kv.memory_for_tokens(t.shape, k, cal.pool_tokens)
        solved = requested - t.weights_bytes - kv
        return solved, (
            f"solved from {cal.pool_tokens:,} tokens measured at {cal.kv_dtype}, "
            f"max_model_len {cal.max_model_len:,}"
        )
    mib_ = t.plan.reserve_mib or DEFAULT_VLLM_RESERVE_MIB
    return mib_ * MIB, f"reserve_mib {mib_} (an assumption: no measured pool)"


def served_length(a: VllmArgs, shape: ModelShape) -> int:
    """The max_model_len vLLM sizes with: the flag's, else (unset, or -1 for auto) the
    trained one; 0 when neither is known. One below 1 is refused by rule_checks."""
    given = a.max_model_len
    return given if given is not None and given > 0 else shape.trained_context or 0


def _forced_by(a: VllmArgs) -> str:
    if not a.forced_backend:
        return "chosen by vLLM's rules"
    return "--attention-backend" if a.backend and a.backend.lower() != "auto" else "-ac"


def evaluate(t: VllmTarget) -> tuple[list[Check], list[Figure], dict[str, Any]]:
    a, shape, card = t.args, t.shape, t.card
    backend = choose_backend(a, shape, card.compute_cap, t.facts)
    skip = skip_set(shape, a, vllm_kv.boundary_skip(shape, a.kv_dtype))
    checks = rule_checks(
        facts=t.facts,
        args=a,
        shape=shape,
        backend=backend,
        skip=skip,
        cap=card.compute_cap,
        env=t.env,
    )
    length = served_length(a, shape)
    figures = [
        Figure(
            name="backend",
            value=backend or "per layer",
            note=_forced_by(a),
        )
    ]
    k = knobs(t, backend, a.kv_dtype, length)
    try:
        raw = vllm_kv.pages(shape, k)
    except ValueError as exc:
        return [*checks, Check(name="pool", status="warn", detail=str(exc))], figures, {}
    checks, ran = code_checks(t, checks, raw)
    figures.append(ran)
    if isinstance(t.validation, vllm_validate.Validation):
        figures[0] = replace(
            figures[0],
            value=", ".join(sorted({k_.backend or "refused" for k_ in t.validation.kinds})),
            note=figures[0].note + "; vLLM's get_attn_backend_cls",
        )
    for sliding in (False, True):
        kinds = {(p.kv_dtype, p.per_token) for p in raw if p.sliding == sliding}
        figures.append(
            Figure(
                name=f"page bytes/token ({'sliding' if sliding else 'full'})",
                value=", ".join(f"{b:,} B ({d})" for d, b in sorted(kinds)),
                note=f"{shape.count(sliding=sliding)} layers",
            )
        )
    share = utilization(a, t.facts)
    requested = int(share * card.memory_mib * MIB)
    if card.free_mib is not None and requested > card.free_mib * MIB:
        checks.append(
            Check(
                name="free",
                status="fail",
                detail=f"vLLM asks for {mib(requested)} ({share} of the card); "
                f"{card.free_mib:,} MiB is free now",
                fix="stop what holds the card, or a lower --gpu-memory-utilization",
            )
        )
    if t.weights_bytes is None:
        return (
            [
                *checks,
                Check(
                    name="pool",
                    status="warn",
                    detail="weights size unknown",
                    fix="pin the payload sizes or set weights_bytes",
                ),
            ],
            figures,
            {},
        )
    held, how = reserve(t, requested)
    available = requested - t.weights_bytes - held
    pool = vllm_kv.pool(shape, k, available)
    tokens, sessions = pool.tokens(length), int(pool.concurrency)
    per_request = pool.blocks_per_request * pool.bytes_per_block
    ideal = ideal_bytes_per_request(shape, k)
    unify = {(p.block, p.page, p.waste > 0) for p in pool.specs}
    figures += [
        Figure(
            name="pages",
            value=f"{len(pool.groups)} groups x {pool.bytes_per_block:,} B",
            note=f"{sum(1 for p in pool.specs if p.waste)} layers' pages padded to the "
            f"largest: {pool.waste_fraction:.1%} of a full-length request is padding; "
            f"{len(unify)} page shapes",
        ),
        Figure(
            name="KV memory",
            value=mib(available),
            note=f"{share} x {card.memory_mib:,} MiB - weights {mib(t.weights_bytes)} - "
            f"reserve {mib(held)} ({how})",
        ),
        Figure(
            name="pool",
            value=f"{tokens:,} tokens",
            note=f"{pool.concurrency:.2f} x max_model_len {length:,}",
        ),
        Figure(
            name="pool without padding",
            value=f"{int(available / ideal * length):,} tokens",
            note="the same bytes at exact per-token sizes",
        ),
        Figure(
            name="sessions at full context",
            value=str(sessions),
            note=f"target: {t.declared_parallel or a.max_num_seqs or '?'}",
        ),
        Figure(
            name="headroom",
            value=mib(available - (t.declared_parallel or 1) * per_request),
            note="KV memory left after the declared sessions at full context",
        ),
    ]
    figures += [dtype_row(t, dtype, available, length) for dtype in COMPARE if dtype != a.kv_dtype]
    want = t.declared_parallel or 1
    if sessions < 1 and a.max_model_len == AUTO_LENGTH:
        checks.append(
            Check(
                name="pool",
                status="warn",
                fix="the --max-model-len you mean to serve, to judge it",
                detail=f"--max-model-len -1: vLLM lowers it at start to what fits; one request "
                f"at the trained {length:,} tokens needs {mib(per_request)}, "
                f"{mib(available)} is left for KV",
            )
        )
    elif sessions < 1:
        checks.append(
            Check(
                name="pool",
                status="fail",
                fix="a smaller --max-model-len",
                detail=f"one request at {length:,} tokens needs {mib(per_request)}; "
                f"{mib(available)} is left for KV",
            )
        )
    elif sessions < want:
        checks.append(
            Check(
                name="pool",
                status="fail",
                detail=f"the pool holds {pool.concurrency:.2f} full-context sessions; "
                f"the target serves {want}",
                fix="a smaller --max-model-len, fewer --max-num-seqs or a smaller KV dtype",
            )
        )
    else:
        checks.append(
            Check(
                name="pool",
                status="pass",
                detail=f"{tokens:,} tokens: {sessions} full-context session(s)",
            )
        )
    numbers = {
        "backend": backend,
        "max_model_len": length,
        "available": available,
        "reserve": held,
        "reserve_from": how,
        "pool_tokens": tokens,
        "concurrency": pool.concurrency,
        "bytes_per_block": pool.bytes_per_block,
        "blocks_per_request": pool.blocks_per_request,
        "groups": len(pool.groups),
        "padding_fraction": pool.waste_fraction,
        "ideal_pool_tokens": int(available / ideal * length),
    }
    return checks, figures, numbers


def dtype_row(t: VllmTarget, kv_dtype: str, available: int, length: int) -> Figure:
    """What another KV dtype would make of the same KV memory (same reserve, same length)."""
    backend = backend_for(t, kv_dtype)
    k = knobs(t, backend, kv_dtype, length)
    pool = vllm_kv.pool(t.shape, k, available)
    sizes = {(p.sliding, p.per_token) for p in vllm_kv.pages(t.shape, k) if p.kv_dtype == kv_dtype}
    per = " / ".join(f"{b:,}" for _, b in sorted(sizes, reverse=True))
    ideal = int(available / ideal_bytes_per_request(t.shape, k) * length)
    config = {k: v for k, v in t.args.attention_config.items() if k != "backend"}
    variant = replace(t.args, kv_dtype=kv_dtype, backend=backend, attention_config=config)
    refused = [
        c.detail
        for c in rule_checks(
            facts=t.facts,
            args=variant,
            shape=t.shape,
            backend=backend,
            skip=k.skip,
            cap=t.card.compute_cap,
            env=t.env,
        )
        if c.status == "fail" and c.name != "env"
    ]
    verdict = f"REFUSED: {refused[0]}" if refused else f"{backend or 'per layer'} accepts it"
    return Figure(
        name=f"if {kv_dtype}",
        value=f"{pool.tokens(length):,} tokens",
        note=f"{per} B/token (sliding / full), {pool.waste_fraction:.1%} padding, "
        f"{ideal:,} unpadded; {verdict}",
    )


COMPARE = ("bfloat16", "fp8", "int8_per_token_head", "turboquant_k8v4")
