"""The refresh report's word on the seeds' TurboQuant shape, for a proposed vLLM version.

frank-small left TurboQuant because no released vLLM's ``TURBOQUANT`` backend supports
sliding windows (issue 17). For each proposal that moves a target's ``VLLM_VERSION``, this
judges the seeds' shape under the pinned and the new version
(:func:`lockpipe.preflight.seeds_turboquant.judge`, the path ``lockpipe preflight`` takes
for those what-ifs): by each version's own parser and ``get_attn_backend_cls`` where its
parser environment is built, else by lockpipe's extract of the wheel, and each verdict
says which. A ``gain`` when it would start now (or TURBOQUANT took the sliding layers); a
``note`` that it is still refused, with the new version's reasons, otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from lockpipe.errors import LockpipeError
from lockpipe.lock.model import Lock
from lockpipe.preflight import seeds_turboquant, vllm_parser
from lockpipe.refresh.proposal import Proposal, Verdict

CHECK = "turboquant"
ParserFor = Callable[[str], "vllm_parser.ParserEnv | vllm_parser.Unavailable"]


def _judged_by(judged: seeds_turboquant.Judged) -> str:
    word = "from code" if judged.by_code else "from lockpipe's extract of the wheel"
    return f"judged {word} ({judged.by})"


def verdicts(lock: Lock, proposal: Proposal, parser_for: ParserFor | None = None) -> list[Verdict]:
    """Per vLLM target the proposal moves: whether the seeds' TurboQuant shape would start."""
    out: list[Verdict] = []
    for name in proposal.targets:
        target = lock.target(name)
        old = target.build_args.get("VLLM_VERSION")
        if target.serve.runtime != "vllm" or old is None or old == proposal.version:
            continue
        new = proposal.version
        env, was = (parser_for(new), parser_for(old)) if parser_for else (None, None)
        try:
            before = seeds_turboquant.judge(lock, name, old, was)
            after = seeds_turboquant.judge(lock, name, new, env)
        except LockpipeError:  # no rules for the new version: judge_vllm's own verdict says so
            continue
        how = f"lockpipe preflight --gpu rtx3090 {name} {after.asked}"
        if not after.by_code and isinstance(env, vllm_parser.Unavailable):
            how += f"; for vLLM {new}'s own verdict: {env.fix}"
        kv, by = seeds_turboquant.KV_DTYPE, _judged_by(after)
        if after.starts and not before.starts:
            detail = (f"TURBOQUANT now takes the seeds' {kv} shape: under vLLM {new} it would "
                      f"start (refused by {old}); {by}")  # fmt: skip
            out.append(Verdict(target=name, check=CHECK, status="gain", fix=how, detail=detail))
        elif after.sliding_ok and not before.sliding_ok:
            still = "; ".join(after.failing) or "nothing else"
            out.append(Verdict(target=name, check=CHECK, status="gain", fix=how,
                               detail=f"TURBOQUANT supports sliding windows in vLLM {new}, so "
                               f"the seeds' {kv} shape is no longer refused for Gemma 4's "
                               f"sliding layers; still refused: {still}; {by}"))  # fmt: skip
        elif not after.starts:
            out.append(Verdict(target=name, check=CHECK, status="note", fix=how,
                               detail=f"the seeds' {kv} shape ({after.asked}) is still refused "
                               f"under vLLM {new}: {'; '.join(after.failing)}; {by}"))  # fmt: skip
    return out
