"""What the pinned vLLM refuses, from its own source (``data/vllm-X.json``); pure.

- ``--kv-cache-dtype`` must be a ``CacheDType`` and ``--attention-backend`` an
  ``AttentionBackendEnum`` member (``config/cache.py``, ``v1/attention/backends/registry.py``);
- a ``VLLM_*`` variable ``envs.py`` does not list is warned about and ignored
  (``validate_environ``): whatever it was meant to pin lands nowhere;
- fp8 KV needs compute capability 8.9 (``triton_attn.py``: "native FP8 (fp8e4nv) requires
  SM89+"), bf16 KV 8.0;
- a forced backend must accept every layer (``platforms/cuda.py`` raises "Selected backend
  … is not valid"): its ``supported_kv_cache_dtypes`` for the layer's dtype (TurboQuant's
  boundary layers are ``auto``) and ``supports_sliding_window`` for sliding layers. With no
  backend named, Gemma 4's mixed head sizes force TRITON_ATTN below sm_90, where FA4 is
  unavailable (``model_executor/models/config.py`` ``Gemma4Config``);
- ``--max-model-len`` above the config's ``max_position_embeddings`` is refused unless
  ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``config/model.py`` ``_get_and_verify_max_len``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lockpipe.errors import LockError
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import Check
from lockpipe.preflight.vllm_args import VllmArgs

DATA = Path(__file__).with_name("data")


def release(version: str) -> dict[str, Any]:
    """The facts extracted from vLLM ``version``'s wheel (see :mod:`.vllm_source`)."""
    path = DATA / f"vllm-{version}.json"
    if not path.is_file():
        raise LockError(
            f"no preflight rules for vLLM {version}: generate them with python -m "
            f"lockpipe.preflight.vllm_source vllm-{version}-….whl > {path}"
        )
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def choose_backend(args: VllmArgs, shape: ModelShape, cap: tuple[int, int]) -> str | None:
    """The backend every layer gets, or None when vLLM picks one per layer."""
    if args.backend and args.backend.lower() != "auto":
        return args.backend.upper()
    if shape.hybrid_head_dims and cap < (9, 0):
        return "TRITON_ATTN"  # Gemma4Config.verify_and_update_config: no FA4 below sm_90
    return None


def layer_dtypes(shape: ModelShape, kv_dtype: str, skip: frozenset[int]) -> dict[int, str]:
    return {x.index: "auto" if x.index in skip else kv_dtype for x in shape.kv_layers}


def rule_checks(
    *,
    facts: Mapping[str, Any],
    args: VllmArgs,
    shape: ModelShape,
    backend: str | None,
    skip: frozenset[int],
    cap: tuple[int, int],
    env: Mapping[str, str],
) -> list[Check]:
    version = facts["vllm"]
    out: list[Check] = []
    if args.kv_dtype not in facts["kv_cache_dtypes"]:
        out.append(
            Check(
                name="kv-cache-dtype",
                status="fail",
                detail=f"--kv-cache-dtype {args.kv_dtype} is not offered by vLLM {version}",
                fix="one of " + ", ".join(facts["kv_cache_dtypes"]),
            )
        )
    backends = facts["attention_backends"]
    if args.backend and args.backend.upper() not in {*backends, "AUTO"}:
        out.append(
            Check(
                name="attention-backend",
                status="fail",
                detail=f"--attention-backend {args.backend} is not in vLLM {version}",
                fix="one of " + ", ".join(sorted(backends)),
            )
        )
    known = set(facts["env_vars"])
    for name in sorted(v for v in env if v.startswith("VLLM_") and v not in known):
        fix = (
            "pass --attention-backend NAME on the command line"
            if name == "VLLM_ATTENTION_BACKEND"
            else "remove it, or use the flag it stood for"
        )
        out.append(
            Check(
                name="env",
                status="fail",
                fix=fix,
                detail=f"{name} is not a vLLM {version} variable: warned about "
                "and ignored (envs.py validate_environ)",
            )
        )
    if args.kv_dtype.startswith("fp8") and cap < (8, 9):
        out.append(
            Check(
                name="fp8",
                status="fail",
                detail=f"fp8 KV needs compute capability 8.9; this card is "
                f"{cap[0]}.{cap[1]} (no native fp8e4nv)",
                fix="--kv-cache-dtype bfloat16, or int8_per_token_head on TRITON_ATTN",
            )
        )
    if args.kv_dtype == "bfloat16" and cap < (8, 0):
        out.append(
            Check(
                name="bf16",
                status="fail",
                fix="--kv-cache-dtype float16",
                detail="bfloat16 KV needs compute capability 8.0",
            )
        )
    if backend is None or backend in backends:  # an unknown one is refused above, not passed
        out += _backend_checks(backends, backend, shape, layer_dtypes(shape, args.kv_dtype, skip))
    limit, length = shape.trained_context, args.max_model_len
    if limit and length and length > limit and env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
        out.append(
            Check(
                name="max-model-len",
                status="fail",
                detail=f"--max-model-len {length} exceeds the model's "
                f"max_position_embeddings {limit} ({shape.source})",
                fix=f"--max-model-len {limit} or less",
            )
        )
    return out


def _backend_checks(
    backends: Mapping[str, Any], backend: str | None, shape: ModelShape, dtypes: Mapping[int, str]
) -> list[Check]:
    if backend is None:
        tq = [i for i, d in dtypes.items() if d.startswith("turboquant_")]
        if not tq:
            return [
                Check(
                    name="backend",
                    status="pass",
                    detail="no backend forced: vLLM picks one per layer",
                )
            ]
        backend = "TURBOQUANT"  # the only backend offering turboquant_* dtypes
    facts = backends.get(backend) or {}
    allowed, sliding_ok = facts.get("kv_cache_dtypes"), facts.get("sliding_window")
    bad_dtype = sorted({d for d in dtypes.values() if allowed is not None and d not in allowed})
    slides = [x.index for x in shape.kv_layers if x.sliding]
    problems = []
    if bad_dtype:
        layers = [i for i, d in dtypes.items() if d in bad_dtype]
        problems.append(f"kv_cache_dtype {'/'.join(bad_dtype)} not supported ({_ranges(layers)})")
    if slides and sliding_ok is False:
        problems.append(f"sliding window not supported ({len(slides)} sliding layers)")
    if not problems:
        return [
            Check(
                name="backend",
                status="pass",
                detail=f"{backend} accepts every layer's dtype and attention",
            )
        ]
    fix = (
        "no backend of this release runs turboquant_* on these layers: drop "
        "--attention-backend TURBOQUANT and pick a dtype from the 'if …' rows"
        if backend == "TURBOQUANT"
        else "a --kv-cache-dtype the backend lists, or another --attention-backend"
    )
    return [
        Check(
            name="backend",
            status="fail",
            fix=fix,
            detail=f"{backend} rejects this model: " + "; ".join(problems),
        )
    ]


def _ranges(ids: Sequence[int]) -> str:
    return "layers " + ", ".join(map(str, ids)) if len(ids) <= 6 else f"{len(ids)} layers"
