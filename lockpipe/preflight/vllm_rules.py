"""What the pinned vLLM refuses, from its own source (``data/vllm-X.json``); pure.

- ``--kv-cache-dtype`` must be a ``CacheDType`` and ``--attention-backend`` an
  ``AttentionBackendEnum`` member (``config/cache.py``, ``v1/attention/backends/registry.py``);
- a ``VLLM_*`` variable ``envs.py`` does not list is warned about and ignored
  (``validate_environ``): whatever it was meant to pin lands nowhere;
- fp8 KV needs compute capability 8.9 (``triton_attn.py``: "native FP8 (fp8e4nv) requires
  SM89+"), bf16 KV 8.0;
- a backend is forced by ``--attention-backend`` or by ``-ac``/``--attention-config``'s
  ``backend``, not both (``engine/arg_utils.py:2488-2499``: "mutually exclusive");
- a forced backend must accept every layer (``platforms/cuda.py`` raises "Selected backend
  … is not valid"; the reasons are ``AttentionBackend.validate_configuration``'s,
  ``v1/attention/backend.py:263-330``): its own ``supports_head_size``, run here on the
  card (FLASH_ATTN's takes a head above 256 only where FA4 is supported), its
  ``supported_kv_cache_dtypes`` for the layer's dtype (TurboQuant's boundary layers and
  ``--kv-cache-dtype-skip-layers`` are ``auto``) and ``supports_sliding_window`` for
  sliding layers. With no backend named, Gemma 4's mixed head sizes get FA4 for every
  layer where FA4 is supported and TRITON_ATTN where it is not
  (``model_executor/models/config.py:209-256`` ``Gemma4Config``); FA4 is supported where
  its kernels are in the wheel and the card is of a family ``_is_fa4_supported`` lists
  (``vllm_flash_attn/flash_attn_interface.py:72-86``: 9.x, 10.x, 11.x; not 12.x);
- ``--kv-cache-dtype-skip-layers`` takes space-separated patterns, each a layer index or
  ``sliding_window``, matched whole (``model_executor/layers/attention/attention.py:289-304``):
  ``5,11`` matches no layer, and with a ``turboquant_*`` dtype vLLM sorts the patterns
  with ``key=int`` (``engine/arg_utils.py:2113-2122``), which raises on it;
- ``--max-model-len`` above the config's ``max_position_embeddings`` is refused unless
  ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``config/model.py`` ``_get_and_verify_max_len``);
  one below 1 is refused (``ModelConfig.max_model_len``'s ``ge=-1`` and "max_model_len
  must be a positive integer"), but for -1 (``auto``): the trained length, lowered at
  start to what the KV memory holds (``v1/core/kv_cache_planning.py``
  ``_auto_fit_max_model_len``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import Check
from lockpipe.preflight.vllm_args import VllmArgs
from lockpipe.preflight.vllm_release import rules_for

# --max-model-len -1 (or auto): the trained length, fitted to the KV memory at start
AUTO_LENGTH = -1


def release(version: str) -> Mapping[str, Any]:
    """The facts extracted from vLLM ``version``'s wheel: :func:`.vllm_release.rules_for`,
    which refuses rules derived for another version."""
    return rules_for(version)


def fa_supported(facts: Mapping[str, Any], version: int, cap: tuple[int, int]) -> bool:
    """``is_fa_version_supported(version)`` on a card of ``cap``: its kernels are in the
    wheel and ``_is_faN_supported`` accepts the card (``flash_attn_interface.py:52-86``)."""
    fa = (facts.get("flash_attn_versions") or {}).get(str(version))
    if not fa or not fa.get("kernels"):
        return False
    families, least = fa.get("families") or [], fa.get("min_capability")
    as_int = cap[0] * 10 + cap[1]  # DeviceCapability.to_int (platforms/interface.py:124)
    if families and as_int // 10 not in {f // 10 for f in families}:
        return False  # is_device_capability_family (platforms/interface.py:481-493)
    return least is None or as_int >= least


def head_size_ok(
    facts: Mapping[str, Any], backend: str, head: int, cap: tuple[int, int]
) -> bool | None:
    """The backend's own ``supports_head_size(head)`` from the wheel, run on the card's
    FlashAttention facts (None: the rule needs what the extract does not hold)."""
    info = facts["attention_backends"].get(backend) or {}
    rule = info.get("head_size_rule")
    if not isinstance(rule, str):
        return None
    sizes = info.get("supported_head_sizes")

    class Backend:  # the class the rule reads (cls): only its supported head sizes
        @staticmethod
        def get_supported_head_sizes() -> list[int]:
            if sizes is None:
                raise LookupError("computed head sizes")
            return list(sizes)

    names: dict[str, Any] = {
        "__builtins__": {},
        "is_fa_version_supported": lambda v: fa_supported(facts, v, cap),
    }
    try:
        exec(compile(rule, f"<{backend}.supports_head_size>", "exec"), names)
        return bool(names["supports_head_size"](Backend, head))
    except (LookupError, NameError, TypeError):
        return None


def choose_backend(
    args: VllmArgs, shape: ModelShape, cap: tuple[int, int], facts: Mapping[str, Any]
) -> str | None:
    """The backend every layer gets, or None when vLLM picks one per layer."""
    if forced := args.forced_backend:
        return forced
    heads = {max(x.head_k, x.head_v) for x in shape.kv_layers}
    if shape.hybrid_head_dims:  # Gemma4Config.verify_and_update_config (config.py:209-256)
        limit = facts.get("gemma4_fa4_max_head_dim")
        if fa_supported(facts, 4, cap) and limit is not None and max(heads) <= limit:
            return None  # FA4 for every layer (flash_attn_version 4); vLLM picks per layer
        return "TRITON_ATTN"  # "FA4 not available, forcing TRITON_ATTN backend"
    return None


def skip_set(shape: ModelShape, args: VllmArgs, boundary: frozenset[int]) -> frozenset[int]:
    """Layers cached at ``auto``: TurboQuant's boundary layers and the patterns of
    ``--kv-cache-dtype-skip-layers`` (attention.py:289-304)."""
    slide = "sliding_window" in args.skip_layers
    named = {x.index for x in shape.kv_layers if str(x.index) in args.skip_layers}
    return boundary | named | {x.index for x in shape.kv_layers if slide and x.sliding}


def layer_dtypes(shape: ModelShape, kv_dtype: str, skip: frozenset[int]) -> dict[int, str]:
    return {x.index: "auto" if x.index in skip else kv_dtype for x in shape.kv_layers}


def _config_checks(args: VllmArgs, shape: ModelShape) -> list[Check]:
    out: list[Check] = []
    config = args.config_backend
    if args.backend is not None and config is not None and config.lower() != "auto":
        out.append(
            Check(
                name="attention-config",
                status="fail",
                fix="one of --attention-backend and -ac/--attention-config's backend",
                detail=f"--attention-backend {args.backend} and --attention-config.backend "
                f"{args.config_backend}: vLLM refuses both, 'attention_backend and "
                "attention_config.backend are mutually exclusive' (engine/arg_utils.py:2490)",
            )
        )
    layers = {str(x.index) for x in shape.kv_layers}
    stray = [p for p in args.skip_layers if p not in layers and p != "sliding_window"]
    if stray and args.kv_dtype.startswith("turboquant_"):
        out.append(
            Check(
                name="skip-layers",
                status="fail",
                fix="space-separated layer indices: --kv-cache-dtype-skip-layers 5 11",
                detail=f"--kv-cache-dtype-skip-layers {' '.join(map(repr, stray))}: with a "
                "turboquant_* dtype vLLM sorts the patterns with key=int and raises "
                "ValueError on it (engine/arg_utils.py:2113-2122)",
            )
        )
    elif stray:
        out.append(
            Check(
                name="skip-layers",
                status="warn",
                fix="space-separated layer indices: --kv-cache-dtype-skip-layers 5 11",
                detail=f"--kv-cache-dtype-skip-layers {' '.join(map(repr, stray))} matches "
                "no layer: vLLM compares each pattern whole with a layer index or "
                "sliding_window (attention.py:289-304), so nothing is skipped for it",
            )
        )
    return out


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
    out: list[Check] = _config_checks(args, shape)
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
    for flag, name in (("--attention-backend", args.backend),
                       ("--attention-config.backend", args.config_backend)):  # fmt: skip
        if name and name.upper() not in {*backends, "AUTO"}:
            out.append(
                Check(
                    name="attention-backend",
                    status="fail",
                    detail=f"{flag} {name} is not in vLLM {version}",
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
    # Typed from triton_attn.py's message: a kernel's runtime assert on the GPU, not a
    # function that runs on a CPU (vLLM's selector, run here, passes fp8 on sm 8.6)
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
        dtypes = layer_dtypes(shape, args.kv_dtype, skip)
        out += _backend_checks(facts, backend, shape, dtypes, cap)
    limit, length = shape.trained_context, args.max_model_len
    if length is not None and length < 1 and length != AUTO_LENGTH:
        out.append(
            Check(
                name="max-model-len",
                status="fail",
                detail=f"--max-model-len {length}: vLLM takes a length of 1 or more, or -1 "
                "(auto: what the KV memory holds)",
                fix="a positive --max-model-len, or -1 to fit the KV memory",
            )
        )
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
    facts: Mapping[str, Any],
    backend: str | None,
    shape: ModelShape,
    dtypes: Mapping[int, str],
    cap: tuple[int, int],
) -> list[Check]:
    backends = facts["attention_backends"]
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
    info = backends.get(backend) or {}
    allowed, sliding_ok = info.get("kv_cache_dtypes"), info.get("sliding_window")
    bad_dtype = sorted({d for d in dtypes.values() if allowed is not None and d not in allowed})
    slides = [x.index for x in shape.kv_layers if x.sliding]
    problems = []
    if backend != "TURBOQUANT":  # TurboQuant validates its packed slot size, not the head
        refused: dict[int, list[int]] = {}
        for x in shape.kv_layers:
            for head in {x.head_k, x.head_v}:
                if head_size_ok(facts, backend, head, cap) is False:
                    refused.setdefault(head, []).append(x.index)
        for head, layers in sorted(refused.items()):
            why = _head_why(facts, backend, head, cap)
            problems.append(f"head_size not supported: {head} ({_ranges(layers)}){why}")
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


def _head_why(facts: Mapping[str, Any], backend: str, head: int, cap: tuple[int, int]) -> str:
    """What the card lacks, where the rule asks for FA4: the families that have it."""
    rule = (facts["attention_backends"].get(backend) or {}).get("head_size_rule") or ""
    if "is_fa_version_supported(4)" not in rule:
        return ""
    fa4 = (facts.get("flash_attn_versions") or {}).get("4") or {}
    families = ", ".join(f"{f // 10}.x" for f in fa4.get("families") or [])
    return f": only with FA4, which needs a {families} card (this one is {cap[0]}.{cap[1]})"


def _ranges(ids: Sequence[int]) -> str:
    return "layers " + ", ".join(map(str, ids)) if len(ids) <= 6 else f"{len(ids)} layers"
