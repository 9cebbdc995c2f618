"""Would each target a proposal touches still start? Verdicts from the new version's own code.

- vLLM (a base that carries ``VLLM_VERSION``): preflight of every affected target under the
  new version's rules (``lockpipe/preflight/data/vllm-V.json``, extracted from that
  version's wheel by :mod:`lockpipe.preflight.vllm_source`), with the serve command read by
  the new vLLM's own parser where its environment is built (:mod:`.vllm_parser`; then
  preflight's backend and page checks come from that version's own functions too, and the
  ``serve-args`` verdict names the torch the parser ran on, which may not be the wheel's
  pin); a check that fails says what the new version refuses and the fix;
- llama.cpp (a source): every flag of each llama target's serve command against the new
  tree's ``common/arg.cpp`` (:mod:`.llama_tree`), and what /metrics gains: the counters
  lockpipe reads (``lockpipe.smoke.metrics.NAMES``) that the new tree exports and the
  pinned one does not;
- every upgrade: the smoke baselines filed for the affected targets were measured on the
  old build, so they stop applying until measured again.

Pure apart from reading the files it is given (the lock's smoke.json and preflight.json,
the trees) and running vLLM's parser when one is passed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lockpipe.errors import LockError, LockpipeError
from lockpipe.jsonshape import loads
from lockpipe.lock.model import Lock, Target, parse_lock
from lockpipe.preflight import config, host, plan, vllm_parser, vllm_release
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import TargetReport
from lockpipe.preflight.whatif import Overrides
from lockpipe.refresh import llama_tree, turboquant
from lockpipe.refresh.proposal import Proposal, Verdict

# What smoke's acceptance probe can read from /metrics once a tree exports counters of this
# shape (lockpipe/smoke/metrics.py; refresh may not import smoke, so the pattern is the
# Prometheus counter name, and the names themselves are the tree's)
GAINS = {r"spec_decode_[a-z_]+_total": "MTP/draft acceptance read from /metrics"}
ParserFor = turboquant.ParserFor  # a version -> its parser environment, or why there is none


@dataclass(frozen=True, kw_only=True)
class Trees:
    """The llama.cpp trees a source proposal is judged with: the pinned one and the new."""

    pinned: llama_tree.Tree | None
    new: llama_tree.Tree


def with_version(lock: Lock, target: str, arg: str, version: str) -> Lock:
    """The lock as it would read with ``targets.TARGET.build_args.ARG`` set to ``version``."""
    doc: dict[str, Any] = copy.deepcopy(dict(lock.document))
    doc["targets"][target]["build_args"][arg] = version
    return parse_lock(doc, lock.path, lock.root)


def _on(
    lock: Lock, name: str
) -> tuple[config.PreflightConfig, Target, host.Card, ModelShape | None]:
    """What preflight judges ``name`` with: its preflight.json, its card, its model's shape."""
    cfg = config.load(lock.path.parent / config.DEFAULT_NAME)
    target = lock.target(name)
    card = host.card_named(cfg.target(name).card or "rtx3090")
    return cfg, target, card, plan.model_shape(lock, cfg, target, None)


def _report(lock: Lock, name: str, parse: vllm_parser.Parsed | None) -> TargetReport:
    cfg, target, card, shape = _on(lock, name)
    return plan.evaluate(lock, cfg, target, card, shape, Overrides(), parse)


def _asked(lock: Lock, name: str) -> dict[str, Any] | None:
    """What vLLM's own backend and page functions are asked for ``name`` on its card, in
    the parser's run (as preflight asks them)."""
    cfg, target, card, shape = _on(lock, name)
    return plan.validation_request(lock, cfg, target, card, shape, Overrides())


def _parsed(
    lock: Lock, name: str, version: str, parser_for: ParserFor | None
) -> vllm_parser.Parsed:
    if parser_for is None:
        return vllm_parser.Unavailable(
            reason="vLLM's parser is not run by this refresh", fix="pass --vllm-parser-cache"
        )
    env = parser_for(version)
    if isinstance(env, vllm_parser.Unavailable):
        from lockpipe.preflight.vllm_parser_env import constraints_for

        pins = constraints_for(lock.root, version)
        if not pins.is_file():  # nox -s vllm-parser cannot build it before these exist
            return replace(env, fix=f"pin what vLLM {version}'s parser imports in "
                           f"{pins.relative_to(lock.root)} (as for the pinned version), then "
                           f"{env.fix}")  # fmt: skip
        return env
    command = lock.target(name).serve.command
    return vllm_parser.parse(env, [command], validate=[_asked(lock, name)])[0]


def judge_vllm(
    lock: Lock, proposal: Proposal, *, parser_for: ParserFor | None = None
) -> list[Verdict]:
    """Preflight and vLLM's parser for each vLLM target the proposal moves."""
    out: list[Verdict] = []
    for name in proposal.targets:
        target = lock.target(name)
        old = target.build_args.get("VLLM_VERSION")
        if target.serve.runtime != "vllm" or old is None:
            continue
        new = proposal.version
        try:  # where preflight reads them: beside the lock, then lockpipe's data/
            facts = vllm_release.rules_of(lock, new)
        except LockError as exc:
            out.append(
                Verdict(
                    target=name,
                    check="rules",
                    status="unknown",
                    detail=str(exc),
                    fix=f"{proposal.command} derives them from the wheel",
                )
            )
            continue
        moved = with_version(lock, name, "VLLM_VERSION", new)
        parsed = _parsed(moved, name, new, parser_for)
        wheel = facts.get("wheel", {}).get("file", "?")
        try:
            before, after = _report(lock, name, None), _report(moved, name, parsed)
        except LockpipeError as exc:
            out.append(
                Verdict(
                    target=name,
                    check="preflight",
                    status="unknown",
                    detail=f"preflight could not judge it: {exc}",
                )
            )
            continue
        was = {c.name: c.status for c in before.checks}
        for c in after.checks:
            if c.status in ("fail", "warn", "unknown"):
                change = (
                    ""
                    if was.get(c.name) == c.status
                    else f" (vLLM {old}: {was.get(c.name, 'not checked')})"
                )
                out.append(
                    Verdict(
                        target=name,
                        check=f"preflight:{c.name}",
                        status=c.status,
                        detail=f"vLLM {new} ({wheel}): {c.detail}{change}",
                        fix=c.fix or "",
                    )
                )
        if after.verdict == "pass":
            passed = ", ".join(c.name for c in after.checks)
            # whether vLLM's own backend and page functions ran, or the extract judged
            rules = next((f for f in after.figures if f.name == "backend rules"), None)
            by = f"; backend rules: {rules.value} ({rules.note})" if rules else ""
            out.append(
                Verdict(
                    target=name,
                    check="preflight",
                    status="pass",
                    detail=f"under vLLM {new}'s rules ({wheel}) every check passes: {passed}{by}",
                )
            )
        if isinstance(parsed, vllm_parser.Unavailable):
            out.append(
                Verdict(
                    target=name,
                    check="serve-args",
                    status="unknown",
                    detail=f"not parsed by vLLM {new}'s own parser: {parsed.reason}",
                    fix=parsed.fix,
                )
            )
        else:  # a refusal is preflight:serve-args above; an acceptance is said here
            said = next((c for c in after.checks if c.name == "serve-args"), None)
            if said is not None and said.status == "pass":
                out.append(
                    Verdict(target=name, check="serve-args", status="pass", detail=said.detail)
                )
    return out


def judge_llama(lock: Lock, proposal: Proposal, trees: Trees) -> list[Verdict]:
    """Each llama target's flags against the new tree, and the /metrics gain."""
    new_flags = llama_tree.server_flags(trees.new.files[llama_tree.ARG])
    old_flags = (
        llama_tree.server_flags(trees.pinned.files[llama_tree.ARG]) if trees.pinned else None
    )
    out: list[Verdict] = []
    where = f"{proposal.version}'s {llama_tree.ARG} ({Path(trees.new.origin).name})"
    for name in proposal.targets:
        target = lock.target(name)
        if target.serve.runtime != "llama.cpp":
            continue
        flags = llama_tree.flags_of(target.serve.command)
        gone = [f for f in dict.fromkeys(flags) if f not in new_flags]
        if gone:
            was = [f for f in gone if old_flags is None or f in old_flags]
            out.append(
                Verdict(
                    target=name,
                    check="llama-flags",
                    status="fail",
                    detail=f"{where} has no {', '.join(gone)}"
                    + (f" ({proposal.pinned} had {', '.join(was)})" if old_flags and was else ""),
                    fix=f"replace {', '.join(gone)} in targets.{name}.serve.command with what "
                    f"{proposal.version}'s llama-server --help offers, or stay on "
                    f"{proposal.pinned}",
                )
            )
        else:
            out.append(
                Verdict(
                    target=name,
                    check="llama-flags",
                    status="pass",
                    detail=f"all {len(set(flags))} flags are in {where}",
                )
            )
    out += gains(proposal, trees)
    return out


def gains(proposal: Proposal, trees: Trees) -> list[Verdict]:
    """The /metrics counters the new tree exports that the pinned one lacks, where lockpipe
    has a use for them (:data:`GAINS`)."""
    out = []
    for pattern, what in GAINS.items():
        new = llama_tree.metric_names(trees.new, pattern)
        old = llama_tree.metric_names(trees.pinned, pattern) if trees.pinned else {}
        added = {n: where for n, where in new.items() if n not in old}
        if not added:
            continue
        sites = ", ".join(f"llamacpp:{n} ({w})" for n, w in sorted(added.items()))
        if trees.pinned is None:
            pinned = f"the pinned tree was not read: whether {proposal.pinned} had them is unknown"
        elif old:
            pinned = f"{proposal.pinned} already had {', '.join(sorted(old))}"
        else:
            pinned = f"{proposal.pinned}'s server code has none of them"
        for target in proposal.targets:
            out.append(
                Verdict(
                    target=target,
                    check="metrics",
                    status="gain",
                    detail=f"{what}: {proposal.version} exports {sites}; {pinned}",
                )
            )
    return out


def stale_baselines(lock: Lock, proposal: Proposal) -> list[Verdict]:
    """The smoke baselines of the affected targets, measured on the build being replaced."""
    path = lock.path.parent / "smoke.json"
    try:
        doc = loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for name in proposal.targets:
        probes: Mapping[str, Any] = ((doc.get("targets") or {}).get(name) or {}).get("probes") or {}
        for shape, table in sorted(probes.items()):
            if table:
                out.append(
                    Verdict(
                        target=name,
                        check="baselines",
                        status="warn",
                        detail=f"{path.name} targets.{name}.probes[{shape}] "
                        f"({', '.join(sorted(table))}) were measured on {proposal.pinned}; they "
                        f"stop applying to {proposal.version}",
                        fix=f"measure again on the upgraded build (nox -s smoke -- --gpu {name}) "
                        f"and file the figures under targets.{name}.probes in {path}",
                    )
                )
    return out


def judge(
    lock: Lock,
    proposals: Sequence[Proposal],
    *,
    trees: Mapping[str, Trees] | None = None,
    parser_for: ParserFor | None = None,
) -> list[Proposal]:
    """Each proposal with its verdicts (a held one is not judged). ``trees``: per source
    proposal key, the trees to judge it with; a source proposal without them says so."""
    out = []
    for p in proposals:
        if p.held:
            out.append(p)
            continue
        verdicts = list(p.verdicts)
        if p.kind == "bases":
            verdicts += judge_vllm(lock, p, parser_for=parser_for)
            verdicts += turboquant.verdicts(lock, p, parser_for)  # the seeds' shape (issue 17)
        elif p.kind == "sources":
            got = (trees or {}).get(f"{p.key}@{p.version}")
            if got is None:
                verdicts += [
                    Verdict(
                        target=t,
                        check="llama-flags",
                        status="unknown",
                        detail=f"{p.version}'s tree was not fetched",
                        fix="run the refresh where the archive can be fetched (--mirror)",
                    )
                    for t in p.targets
                ]
            else:
                verdicts += judge_llama(lock, p, got)
        verdicts += stale_baselines(lock, p)
        out.append(replace(p, verdicts=tuple(verdicts)))
    return out
