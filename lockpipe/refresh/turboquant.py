"""The refresh report's word on the seeds' TurboQuant shape, for a proposed vLLM version.

frank-small left TurboQuant because no released vLLM's ``TURBOQUANT`` backend supports
sliding windows (issue 17). For each proposal that moves a target's ``VLLM_VERSION``, this
judges the seeds' shape under the new version's own rules
(:mod:`lockpipe.preflight.seeds_turboquant`) and says what changed: a ``gain`` when it would
start now (or TURBOQUANT gained sliding-window support), nothing when it is refused as
before, so the report stays quiet until a release changes the answer.
"""

from __future__ import annotations

from lockpipe.errors import LockpipeError
from lockpipe.lock.model import Lock
from lockpipe.preflight import seeds_turboquant
from lockpipe.refresh.proposal import Proposal, Verdict

CHECK = "turboquant"


def verdicts(lock: Lock, proposal: Proposal) -> list[Verdict]:
    """A ``gain`` per vLLM target whose seeds' TurboQuant shape the new version changes."""
    out: list[Verdict] = []
    for name in proposal.targets:
        target = lock.target(name)
        old = target.build_args.get("VLLM_VERSION")
        if target.serve.runtime != "vllm" or old is None or old == proposal.version:
            continue
        try:
            before = seeds_turboquant.judge(lock, name, old)
            after = seeds_turboquant.judge(lock, name, proposal.version)
        except LockpipeError:  # no rules for the new version: judge_vllm's own verdict says so
            continue
        how = f"lockpipe preflight --gpu rtx3090 {name} {after.asked}"
        if after.starts and not before.starts:
            detail = (
                f"TURBOQUANT now takes the seeds' {seeds_turboquant.KV_DTYPE} shape: under "
                f"vLLM {proposal.version}'s rules it would start (refused by {old})"
            )
            out.append(Verdict(target=name, check=CHECK, status="gain", fix=how, detail=detail))
        elif after.sliding_ok and not before.sliding_ok:
            still = "; ".join(after.failing) or "nothing else"
            out.append(Verdict(target=name, check=CHECK, status="gain", fix=how,
                               detail=f"TURBOQUANT supports sliding windows in vLLM "
                               f"{proposal.version} (supports_sliding_window), so the seeds' "
                               f"{seeds_turboquant.KV_DTYPE} shape is no longer refused for "
                               f"Gemma 4's sliding layers; still refused: {still}"))  # fmt: skip
    return out
