"""The verbs that check and pin: plan, lint and lock (no engine).

plan and lint only read. lock writes the lock; it reaches PyPI only to derive a
requirements file again whose version (or closure facts) changed, or with --force, and
the wheel of a ``VLLM_VERSION`` whose preflight rules are missing (``vllm_release``).
"""

from __future__ import annotations

import argparse

from lockpipe.cli.options import targets
from lockpipe.errors import LintError, LockError
from lockpipe.imagebuild import lint, plan
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import load_lock, write_lock
from lockpipe.log import echo
from lockpipe.preflight import vllm_release


def do_plan(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    for n in targets(args, loaded):
        if loaded.target(n).external is not None:
            print(plan.render_external(loaded, n), end="\n\n")
            continue
        check_drift(loaded, loaded.target(n))
        print(plan.render(plan.plan_target(loaded, n)), end="\n\n")
    return 0


def do_lint(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    problems = []
    for t in (loaded.target(n) for n in plan.built_here(loaded, targets(args, loaded), "lint")):
        path = loaded.root / t.context / t.dockerfile
        found = lint.lint_dockerfile(
            path.read_text(), pinned_args=set(t.bases), allow_copy=t.allow_copy
        )
        problems += [f.render(f"{t.context}/{t.dockerfile}") for f in found]
        problems += [
            f"targets.{t.name}.build_args.{k}: apt packages without APT_SNAPSHOT install "
            "whatever is current; add APT_SNAPSHOT (a date like 20261101T000000Z)"
            for k in lint.unpinned_apt(t.build_args)
        ]
        problems += lint.derived_problems(loaded, t)
        problems += lint.mtp_problems(loaded, t)
    if problems:
        raise LintError("Dockerfile pinning rules broken:\n  " + "\n  ".join(problems))
    echo("lint: every Dockerfile is pinned")
    return 0


def do_lock(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    if args.check:
        for n in plan.built_here(loaded, sorted(loaded.targets), "lock --check"):
            check_drift(loaded, loaded.target(n))
        if stale := vllm_release.missing(loaded):
            raise LockError(f"{args.lock}: no preflight rules for vLLM {', '.join(stale)} "
                            f"(VLLM_VERSION): {vllm_release.fix_for(stale[0])}")  # fmt: skip
        echo(f"{args.lock}: no drift")
        return 0
    from lockpipe.refresh.pip import relock_derived  # reaches PyPI: only lock loads it

    doc, derived = relock_derived(loaded, force=args.force)
    for change in derived:
        echo(str(change))
    for version in vllm_release.missing(loaded):  # a VLLM_VERSION moved: its wheel's rules
        echo(f"{args.lock}: derived vLLM {version}'s preflight rules: "
             f"{vllm_release.derive(version)}")  # fmt: skip
    if doc == loaded.document:
        echo(f"{args.lock}: already current")
        return 0
    write_lock(args.lock, doc)
    echo(f"{args.lock}: fingerprints updated; review with git diff {args.lock}")
    return 0
