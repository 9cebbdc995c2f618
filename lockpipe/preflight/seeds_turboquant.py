"""The seeds' TurboQuant shape for a vLLM target, judged under a given vLLM version; pure.

The seeds served frank-small with ``--kv-cache-dtype turboquant_k8v4 --attention-backend
TURBOQUANT`` at Gemma 4's whole window on an unpublished dev build. Released vLLM refuses
it (``TurboQuantAttentionBackend`` keeps ``AttentionBackend.supports_sliding_window()``'s
False, and Gemma 4 has sliding layers), so the lock serves bf16. :func:`judge` says, for
any version whose rules lockpipe has, whether that shape would now start: the refresh
report's upgrade verdicts use it (``lockpipe.refresh.turboquant``), and
``tests/unit/test_frank_small.py`` holds the pinned version to its refusal.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from lockpipe.lock.model import Lock, parse_lock
from lockpipe.preflight import config, host, plan, vllm_release
from lockpipe.preflight.whatif import Overrides

KV_DTYPE = "turboquant_k8v4"
BACKEND = "TURBOQUANT"


@dataclass(frozen=True, kw_only=True)
class Judged:
    version: str
    starts: bool  # every check passes
    sliding_ok: bool  # the version's TURBOQUANT declares sliding-window support
    failing: tuple[str, ...]  # "check: detail" of each failing check
    asked: str  # the what-if, as preflight's flags spell it


def judge(lock: Lock, target: str, version: str) -> Judged:
    """The seeds' shape for ``target`` (its model's whole window) under vLLM ``version``."""
    doc: dict[str, Any] = copy.deepcopy(dict(lock.document))
    doc["targets"][target]["build_args"]["VLLM_VERSION"] = version
    moved = parse_lock(doc, lock.path, lock.root)
    cfg = config.load(lock.path.parent / config.DEFAULT_NAME)
    t = moved.target(target)
    shape = plan.model_shape(moved, cfg, t, None)
    window = shape.trained_context if shape else None
    over = Overrides(kv_dtype=KV_DTYPE, attention_backend=BACKEND, max_model_len=window)
    card = host.card_named(cfg.target(target).card or "rtx3090")
    report = plan.evaluate(moved, cfg, t, card, shape, over, None)
    facts = vllm_release.rules_of(moved, version)
    tq = facts["attention_backends"].get(BACKEND) or {}
    return Judged(
        version=version,
        starts=report.verdict == "pass",
        sliding_ok=tq.get("sliding_window") is True,
        failing=tuple(f"{c.name}: {c.detail}" for c in report.checks if c.status == "fail"),
        asked=" ".join(over.asked()),
    )
