"""The command line: ``python -m pipeline <verb>``, the same verbs as the nox sessions.

Every option has an environment variable, read here and nowhere else.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from pipeline import build, cli_serve, lint, lock, plan, refresh, reproduce
from pipeline.engines import ENGINES, get_engine
from pipeline.errors import DriftError, LintError, UsageError
from pipeline.fingerprint import check_drift, relock
from pipeline.log import echo

# build-GROUP builds the target GROUP and its variants GROUP-* (llama-cuda, llama-cuda-mtp).
GROUPS = ("frank-small", "llama-cuda", "llama-cpu")


def _env_path(var: str, default: str) -> Path:
    return Path(os.environ.get(var) or default)


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; here 2 means an invalid lock, so usage exits 64."""

    def error(self, message: str) -> NoReturn:
        self.print_usage()
        self.exit(UsageError.return_code, f"{self.prog}: error: {message}\n")


def _options() -> _Parser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--lock",
        type=Path,
        default=_env_path("PIPELINE_LOCK", str(lock.DEFAULT_LOCK)),
        help="the lock file (PIPELINE_LOCK; default locks/digests.json)",
    )
    common.add_argument(
        "--engine",
        choices=list(ENGINES),
        default=os.environ.get("PIPELINE_ENGINE") or None,
        help="buildah, podman or docker (PIPELINE_ENGINE; default: the first that works)",
    )
    common.add_argument(
        "--mirror",
        default=os.environ.get("PIPELINE_MIRROR") or None,
        help="base URL tried before upstream for every fetched file (PIPELINE_MIRROR)",
    )
    common.add_argument(
        "--state",
        type=Path,
        default=Path(os.environ["PIPELINE_STATE"]) if os.environ.get("PIPELINE_STATE") else None,
        help="where build records live (PIPELINE_STATE; default .pipeline beside the lock's "
        "checkout)",
    )
    common.add_argument(
        "--cache",
        type=Path,
        default=_env_path(
            "PIPELINE_CACHE", os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "lockpipe")
        ),
        help="verified downloads by sha256 (PIPELINE_CACHE; default ~/.cache/lockpipe)",
    )
    common.add_argument(
        "--force", action="store_true", help="rebuild even when the record is current"
    )
    return common


def state_dir(args: argparse.Namespace, loaded: lock.Lock) -> Path:
    """--state, else ``.pipeline`` in the checkout the lock belongs to (not the cwd)."""
    return Path(args.state).expanduser() if args.state else loaded.root / ".pipeline"


def _targets(args: argparse.Namespace, loaded: lock.Lock) -> list[str]:
    names: list[str] = args.targets or sorted(loaded.targets)
    group = args.verb.removeprefix("build-")
    if group in GROUPS:
        members = [t for t in sorted(loaded.targets) if t == group or t.startswith(group + "-")]
        if not members:
            raise UsageError(f"{loaded.path}: no targets named {group} or {group}-*")
        names = args.targets or members
        wrong = [n for n in names if n not in members]
        if wrong:
            raise UsageError(
                f"{', '.join(wrong)}: not a {group} variant; choose from {', '.join(members)}"
            )
    for n in names:
        loaded.target(n)
    return names


def do_plan(args: argparse.Namespace) -> int:
    loaded = lock.load_lock(args.lock)
    for n in _targets(args, loaded):
        check_drift(loaded, loaded.target(n))
        print(plan.render(plan.plan_target(loaded, n)), end="\n\n")
    return 0


def do_build(args: argparse.Namespace) -> int:
    loaded = lock.load_lock(args.lock)
    names = _targets(args, loaded)
    engine = get_engine(args.engine)
    settings = build.Settings(
        state_dir(args, loaded), args.cache.expanduser(), args.mirror, args.force
    )
    for n in names:
        build.build_target(loaded, n, engine, settings)
    return 0


def do_reproduce(args: argparse.Namespace) -> int:
    loaded = lock.load_lock(args.lock)
    engine = get_engine(args.engine)
    settings = build.Settings(
        state_dir(args, loaded), args.cache.expanduser(), args.mirror, force=True
    )
    results = [
        reproduce.reproduce_target(loaded, n, engine, settings) for n in _targets(args, loaded)
    ]
    for r in results:
        echo(str(r), style=None if r.same else "yellow")
    return 0 if all(r.same for r in results) else 1


def do_lint(args: argparse.Namespace) -> int:
    loaded = lock.load_lock(args.lock)
    problems = []
    for t in (loaded.target(n) for n in _targets(args, loaded)):
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
    if problems:
        raise LintError("Dockerfile pinning rules broken:\n  " + "\n  ".join(problems))
    echo("lint: every Dockerfile is pinned")
    return 0


def do_refresh(args: argparse.Namespace) -> int:
    loaded = lock.load_lock(args.lock)
    doc, changes = refresh.refresh_bases(loaded, args.targets)
    for change in changes:
        echo(str(change))
    if args.check:
        if changes:
            raise DriftError(f"{args.lock}: {len(changes)} base digest(s) moved; run nox -s "
                             "refresh-digests and review the diff")  # fmt: skip
        echo(f"{args.lock}: every base digest is current")
        return 0
    if doc == loaded.document:
        echo(f"{args.lock}: every base digest is current; nothing written")
        return 0
    lock.write_lock(args.lock, doc)
    echo(f"{args.lock}: {len(changes)} digest(s) and their origins updated; "
         f"review with git diff {args.lock}")  # fmt: skip
    return 0


def do_lock(args: argparse.Namespace) -> int:
    loaded = lock.load_lock(args.lock)
    if args.check:
        for t in loaded.targets.values():
            check_drift(loaded, t)
        echo(f"{args.lock}: no drift")
        return 0
    doc = relock(loaded)
    if doc == loaded.document:
        echo(f"{args.lock}: already current")
        return 0
    lock.write_lock(args.lock, doc)
    echo(f"{args.lock}: fingerprints updated; review with git diff {args.lock}")
    return 0


Verb = Callable[[argparse.Namespace], int]
VERBS: dict[str, tuple[Verb, str]] = {
    "plan": (do_plan, "print the fully resolved build plan of each target"),
    "build": (do_build, "build every target (or those named)"),
    "build-frank-small": (do_build, "build the vLLM frank-small image"),
    "build-llama-cuda": (do_build, "build the llama.cpp CUDA variants (all, or those named)"),
    "build-llama-cpu": (do_build, "build llama.cpp without CUDA"),
    "reproduce": (do_reproduce, "build each target twice without cache and compare the images"),
    "lint": (do_lint, "check every Dockerfile against the pinning rules"),
    "lock": (do_lock, "bring pip hashes and drift fingerprints up to date (after review)"),
    "refresh-digests": (do_refresh, "re-resolve base image digests from their registries"),
    "payloads": (cli_serve.do_payloads, "fetch and verify the payloads of the lock (or NAME…)"),
    "smoke": (cli_serve.do_smoke, "run each built image with its payloads and check it serves"),
}
EXTRA_OPTIONS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "payloads": cli_serve.add_payload_options,
    "smoke": cli_serve.add_smoke_options,
}


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = _Parser(prog="python -m pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB", parser_class=_Parser)
    common = _options()
    for verb, (_, help_text) in VERBS.items():
        p = sub.add_parser(verb, parents=[common], help=help_text, description=help_text)
        if verb == "lock":
            p.add_argument("--check", action="store_true", help="fail on drift instead of writing")
            p.set_defaults(targets=[])
        elif verb == "refresh-digests":
            p.add_argument("targets", nargs="*", metavar="BASE")
            p.add_argument("--check", action="store_true", help="fail if a digest moved; no write")
        else:
            p.add_argument("targets", nargs="*", metavar="TARGET")
        if verb in EXTRA_OPTIONS:
            EXTRA_OPTIONS[verb](p)
    return parser.parse_args(argv)


def run(argv: Sequence[str]) -> int:
    args = parse(argv)
    return VERBS[args.verb][0](args)
