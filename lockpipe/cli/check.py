"""The verbs that check and pin: plan, lint and lock (no engine).

plan and lint only read. lock writes the lock; it reaches PyPI only to derive a
requirements file again whose version (or closure facts) changed, or with --force, and
the wheel of a ``VLLM_VERSION`` whose preflight rules are missing (``vllm_release``).
"""

from __future__ import annotations

import argparse

from lockpipe.cli import jsonout
from lockpipe.cli.options import targets
from lockpipe.errors import LintError, LockError
from lockpipe.fs import read_utf8
from lockpipe.imagebuild import lint, plan
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import load_lock, write_lock
from lockpipe.log import echo, result
from lockpipe.preflight import vllm_release


def do_plan(args: argparse.Namespace) -> int:
    """Each target's plan on stdout (``--json FILE``: also as JSON; ``-``: JSON alone)."""
    jsonout.begin(args.json)
    loaded = load_lock(args.lock)
    docs = []
    for n in targets(args, loaded):
        t = loaded.target(n)
        if t.external is not None:
            result(plan.render_external(loaded, n) + "\n")
            docs.append({"target": n, "external": jsonout.as_json(t.external),
                         "serve": jsonout.as_json(t.serve)})  # fmt: skip
            continue
        check_drift(loaded, t)
        built = plan.plan_target(loaded, n)
        result(plan.render(built) + "\n")
        docs.append(jsonout.plan_json(built))
    jsonout.emit(args.json, "plan", {"lock": str(args.lock), "targets": docs})
    return 0


def do_lint(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    problems = []
    for t in (loaded.target(n) for n in plan.built_here(loaded, targets(args, loaded), "lint")):
        path = loaded.root / t.context / t.dockerfile
        found = lint.lint_dockerfile(
            read_utf8(path, LintError), pinned_args=set(t.bases), allow_copy=t.allow_copy
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
    result("lint: every Dockerfile is pinned")
    return 0


def do_lock(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    if args.check:
        if stale := vllm_release.missing(loaded):
            fix = vllm_release.fix_for(stale[0], vllm_release.beside(loaded))
            raise LockError(f"{args.lock}: no preflight rules for vLLM {', '.join(stale)} "
                            f"(VLLM_VERSION): {fix}")  # fmt: skip
        for n in plan.built_here(loaded, sorted(loaded.targets), "lock --check"):
            check_drift(loaded, loaded.target(n))
        result(f"{args.lock}: no drift")
        return 0
    from lockpipe.refresh.pip import relock_derived  # reaches PyPI: only lock loads it

    doc, derived = relock_derived(loaded, force=args.force)
    for change in derived:
        echo(str(change))
    for version in vllm_release.missing(loaded):  # a VLLM_VERSION moved: its wheel's rules
        echo(f"{args.lock}: derived vLLM {version}'s preflight rules: "
             f"{vllm_release.derive(version, vllm_release.beside(loaded))}")  # fmt: skip
    if doc == loaded.document:
        echo(f"{args.lock}: already current")
        return 0
    write_lock(args.lock, doc)
    echo(f"{args.lock}: fingerprints updated; review with git diff {args.lock}")
    return 0
