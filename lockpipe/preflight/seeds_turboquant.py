"""The seeds' TurboQuant shape for a vLLM target, judged under a given vLLM version.

The seeds served frank-small with ``--kv-cache-dtype turboquant_k8v4 --attention-backend
TURBOQUANT`` at Gemma 4's whole window on an unpublished dev build. Released vLLM refuses
it (``TurboQuantAttentionBackend`` keeps ``AttentionBackend.supports_sliding_window()``'s
False, and Gemma 4 has sliding layers), so the lock serves bf16. :func:`judge` says, for
any version whose rules lockpipe has, whether that shape would now start. It takes the
path ``lockpipe preflight --vllm-parser`` takes for the same what-ifs: where that
version's parser environment is given, the what-if command is read by vLLM's own parser
and its layers judged by vLLM's own ``get_attn_backend_cls`` in the same child
(:mod:`.vllm_validate_child`); elsewhere lockpipe's extract of the wheel judges, and
:attr:`Judged.by` says which. The refresh report's upgrade verdicts use it
(``lockpipe.refresh.turboquant``), and ``tests/unit/test_frank_small.py`` holds the
pinned version to its refusal. Pure apart from running that parser.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from lockpipe.lock.model import Lock, parse_lock
from lockpipe.preflight import config, host, plan, vllm_parser, vllm_release, vllm_validate
from lockpipe.preflight.whatif import Overrides

KV_DTYPE = "turboquant_k8v4"
BACKEND = "TURBOQUANT"
CODE = "vLLM's code"  # preflight's "backend rules" figure when vLLM's own functions ran


@dataclass(frozen=True, kw_only=True)
class Judged:
    version: str
    starts: bool  # every check passes
    sliding_ok: bool  # TURBOQUANT takes the sliding layers (by code), or declares it (extract)
    failing: tuple[str, ...]  # "check: detail" of each failing check
    asked: str  # the what-if, as preflight's flags spell it
    by_code: bool  # vLLM's own parser and selector judged it; else lockpipe's extract
    by: str  # which judged, and why (preflight's "backend rules" figure)


def overrides(lock: Lock, target: str) -> Overrides:
    """The seeds' flags as preflight's what-ifs, at ``target``'s model's whole window."""
    cfg = config.load(lock.path.parent / config.DEFAULT_NAME)
    shape = plan.model_shape(lock, cfg, lock.target(target), None)
    window = shape.trained_context if shape else None
    return Overrides(kv_dtype=KV_DTYPE, attention_backend=BACKEND, max_model_len=window)


def judge(
    lock: Lock,
    target: str,
    version: str,
    parser: vllm_parser.ParserEnv | vllm_parser.Unavailable | None = None,
) -> Judged:
    """The seeds' shape for ``target`` under vLLM ``version``; ``parser``: that version's
    parser environment (or why there is none), None where the caller runs no parser."""
    doc: dict[str, Any] = copy.deepcopy(dict(lock.document))
    doc["targets"][target]["build_args"]["VLLM_VERSION"] = version
    moved = parse_lock(doc, lock.path, lock.root)
    cfg = config.load(lock.path.parent / config.DEFAULT_NAME)
    t = moved.target(target)
    shape = plan.model_shape(moved, cfg, t, None)
    over = overrides(moved, target)
    card = host.card_named(cfg.target(target).card or "rtx3090")
    parsed: vllm_parser.Parsed | None = None
    if isinstance(parser, vllm_parser.Unavailable):  # preflight's figure says why
        parsed = parser
    elif isinstance(parser, vllm_parser.ParserEnv):  # as preflight --vllm-parser asks it
        ask = plan.validation_request(moved, cfg, t, card, shape, over)
        command = vllm_parser.asked(t.serve.command, over)
        parsed = vllm_parser.parse(parser, [command], validate=[ask])[0]
    report = plan.evaluate(moved, cfg, t, card, shape, over, parsed)
    rules = next((f for f in report.figures if f.name == "backend rules"), None)
    by_code = rules is not None and rules.value == CODE
    if by_code and isinstance(parsed, vllm_parser.Accepted):
        v = vllm_validate.read(parsed.validation, version)
        sliding = [k for k in getattr(v, "kinds", ()) if k.sliding and k.kv_dtype == KV_DTYPE]
        sliding_ok = bool(sliding) and all(k.backend for k in sliding)
    else:
        tq = vllm_release.rules_of(moved, version)["attention_backends"].get(BACKEND) or {}
        sliding_ok = tq.get("sliding_window") is True
    return Judged(
        version=version,
        starts=report.verdict == "pass",
        sliding_ok=sliding_ok,
        failing=tuple(f"{c.name}: {c.detail}" for c in report.checks if c.status == "fail"),
        asked=" ".join(over.asked()),
        by_code=by_code,
        by=f"{rules.value}: {rules.note}" if rules else "lockpipe's extract",
    )
