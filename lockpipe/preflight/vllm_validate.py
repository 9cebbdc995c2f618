"""vLLM's own backend choice, backend validation and page unification, as preflight asks for
them and reads them back; pure (the run is :mod:`.vllm_parser`'s, in the same child).

:func:`request` turns a target's layers (head sizes, KV heads, sliding window, the KV
dtype each layer is cached at), the card's compute capability and what lockpipe's extract
read from the command into the facts :mod:`.vllm_validate_child` feeds to vLLM's
``Gemma4Config`` hook, ``CudaPlatformBase.get_attn_backend_cls`` and
``unify_kv_cache_spec_page_size``. :func:`read` turns its answer into a
:class:`Validation`; :func:`backend_check` and :func:`page_check` into checks that say
they came from vLLM's code, run on this CPU with the card faked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lockpipe.preflight import vllm_kv
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import Check
from lockpipe.preflight.vllm_args import VllmArgs

WHERE = "platforms/cuda.py get_attn_backend_cls"


@dataclass(frozen=True, kw_only=True)
class Kind:
    """One layer kind as vLLM's selector saw it."""

    head_size: int
    sliding: bool
    kv_dtype: str
    layers: tuple[int, ...]
    backend: str | None  # the class vLLM picked (AttentionBackendEnum name)
    refused: str | None  # vLLM's ValueError, verbatim
    not_importable: tuple[str, ...]  # backends of the priority list that cannot import here


@dataclass(frozen=True, kw_only=True)
class PageRow:
    index: int
    page_before: int  # spec.page_size_bytes as lockpipe built the spec
    block: int
    page: int  # after unify_kv_cache_spec_page_size


@dataclass(frozen=True, kw_only=True)
class Validation:
    version: str
    forced: str | None  # by the command (--attention-backend, -ac)
    after_hook: str | None  # after Gemma4Config.verify_and_update_config
    kinds: tuple[Kind, ...]
    pages: tuple[PageRow, ...] = ()
    pages_refused: str | None = None  # unify_kv_cache_spec_page_size's NotImplementedError
    pages_not_run: str | None = None
    pages_module: str | None = None  # the vllm/v1/core module that defines the function
    batched_default: int | None = None  # EngineArgs.get_batch_defaults, OpenAI server
    fakes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class NotRun:
    reason: str


def request(
    *,
    shape: ModelShape,
    args: VllmArgs,
    cap: tuple[int, int],
    card: str,
    memory_mib: int,
    skip: frozenset[int],
    pages: Sequence[vllm_kv.Page],
    wheel: str,
) -> dict[str, Any]:
    """The facts the child needs; ``pages`` are lockpipe's specs before unification."""
    by_layer = {p.layer: p for p in pages}
    layers = []
    for x in shape.kv_layers:
        page = by_layer.get(x.index)
        layers.append(
            {
                "index": x.index,
                "head_size": x.head_k,
                "head_size_v": x.head_v,
                "num_kv_heads": x.kv_heads,
                "sliding_window": shape.window if x.sliding else None,
                "kv_cache_dtype": "auto" if x.index in skip else args.kv_dtype,
                "block_size": page.block if page else 16,
                # a page lockpipe pads (TurboQuant's shared page) is given as vLLM pads it
                "page_padded": page.page
                if page and page.page != page.block * page.per_token
                else None,
            }
        )
    return {
        "wheel": wheel,
        "capability": list(cap),
        "card": card,
        "memory_bytes": memory_mib << 20,
        "model_dtype": "bfloat16",
        "gemma4_hook": shape.hybrid_head_dims,
        "assumed": {
            "kv_cache_dtype": args.kv_dtype,
            "backend": args.backend or (args.attention_config or {}).get("backend"),
        },
        "layers": layers,
    }


def read(doc: Mapping[str, Any] | None, version: str) -> Validation | NotRun:
    if not doc:
        return NotRun(reason="vLLM's functions were not asked (its parser did not run)")
    if "not_run" in doc:
        return NotRun(reason=str(doc["not_run"]))
    if "error" in doc:
        return NotRun(reason=f"vLLM's functions failed here: {doc['error']}")
    pages = doc.get("pages") or {}
    return Validation(
        version=version,
        forced=doc.get("forced"),
        after_hook=doc.get("after_hook"),
        kinds=tuple(
            Kind(
                head_size=int(k["head_size"]),
                sliding=bool(k["sliding"]),
                kv_dtype=str(k["kv_cache_dtype"]),
                layers=tuple(k["layers"]),
                backend=k.get("backend"),
                refused=k.get("refused"),
                not_importable=tuple(k.get("not_importable") or ()),
            )
            for k in doc.get("kinds", [])
        ),
        pages=tuple(PageRow(**row) for row in pages.get("layers", [])),
        pages_refused=pages.get("refused"),
        pages_not_run=pages.get("not_run"),
        pages_module=pages.get("module"),
        batched_default=(doc.get("defaults") or {}).get("max_num_batched_tokens"),
        fakes=tuple(doc.get("fakes") or ()),
    )


def _layers(ids: Sequence[int]) -> str:
    return "layers " + ", ".join(map(str, ids)) if len(ids) <= 6 else f"{len(ids)} layers"


def by_code(v: Validation, cap: tuple[int, int]) -> str:
    return (
        f"vLLM {v.version}'s own {WHERE} (run on this CPU; the sm {cap[0]}.{cap[1]} card and "
        "the wheel's compiled extensions are fakes)"
    )


def backend_check(v: Validation, cap: tuple[int, int]) -> Check:
    """Pass when vLLM's selector gives every layer kind a backend; else its refusals."""
    refused = [k for k in v.kinds if k.refused]
    if refused:
        reasons = "; ".join(
            f"head {k.head_size} {'sliding' if k.sliding else 'full'} {k.kv_dtype} "
            f"({_layers(k.layers)}): {k.refused}"
            for k in refused
        )
        fix = (
            "drop --attention-backend, or a --kv-cache-dtype and backend the model's layers take"
            if v.forced
            else "a --kv-cache-dtype some backend of this release takes for these layers"
        )
        return Check(
            name="backend", status="fail", fix=fix, detail=f"{by_code(v, cap)} refuses: {reasons}"
        )
    picked = ", ".join(
        f"{k.backend} for head {k.head_size} {'sliding' if k.sliding else 'full'} "
        f"{k.kv_dtype} ({_layers(k.layers)})"
        for k in v.kinds
    )
    hook = f"; Gemma4Config's hook forced {v.after_hook}" if v.after_hook != v.forced else ""
    return Check(name="backend", status="pass", detail=f"{by_code(v, cap)}: {picked}{hook}")


def unsure(v: Validation) -> list[str]:
    """Backends vLLM would try before the one it picked here, that could not import here."""
    return sorted({b for k in v.kinds if not v.after_hook for b in k.not_importable})


def page_check(v: Validation, pages: Sequence[vllm_kv.Page]) -> Check | None:
    """vLLM's unify_kv_cache_spec_page_size against lockpipe's unified pages."""
    module = (v.pages_module or "vllm.v1.core.kv_cache_utils").replace(".", "/")
    where = f"vLLM {v.version}'s unify_kv_cache_spec_page_size ({module.removeprefix('vllm/')}.py)"
    if v.pages_not_run:
        return None
    if v.pages_refused:
        return Check(
            name="page-size",
            status="fail",
            detail=f"{where}: {v.pages_refused}",
            fix="KV dtypes whose pages divide each other, or fewer skipped layers",
        )
    ours = {p.layer: p for p in vllm_kv.unify(list(pages))}
    differ = [
        f"layer {r.index}: vLLM block {r.block} page {r.page:,} B, lockpipe block "
        f"{ours[r.index].block} page {ours[r.index].page:,} B"
        for r in v.pages
        if r.index in ours and (ours[r.index].block, ours[r.index].page) != (r.block, r.page)
    ]
    shapes = sorted({(r.block, r.page) for r in v.pages})
    said = ", ".join(f"block {b} x {p:,} B" for b, p in shapes)
    if differ:
        return Check(
            name="page-size",
            status="warn",
            detail=f"{where} gives {said}; "
            "lockpipe's pool arithmetic differs: " + "; ".join(differ[:3]),
            fix="report it: lockpipe's vllm_kv.py no longer follows this release",
        )
    return Check(
        name="page-size",
        status="pass",
        detail=f"{where}: {len(v.pages)} layers unify to {said}, as lockpipe's pool has them",
    )
