"""The verbs that run an engine: build, build-GROUP and reproduce."""

from __future__ import annotations

import argparse
from dataclasses import replace

from lockpipe.cli.options import state_dir, targets
from lockpipe.engines import get_engine
from lockpipe.errors import CheckFailed, UsageError
from lockpipe.imagebuild.plan import built_here
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import Lock, load_lock
from lockpipe.log import result
from lockpipe.verify.reproduce import reproduce_and_explain


def do_build(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    names = built_here(loaded, targets(args, loaded), "build")
    engine = get_engine(args.engine)
    settings = Settings(state=state_dir(args, loaded), cache=args.cache.expanduser(),
                        mirror=args.mirror, force=args.force)  # fmt: skip
    for n in names:
        build_target(loaded, n, engine, settings)
    return 0


def do_reproduce(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    engine = get_engine(args.engine)
    settings = Settings(state=state_dir(args, loaded), cache=args.cache.expanduser(),
                        mirror=args.mirror, force=True)  # fmt: skip
    # A cached and a clean build each; when they differ, both images are read and compared.
    names = built_here(loaded, targets(args, loaded), "reproduce")
    if args.across_engines:
        return _across(args, loaded, names, settings)
    results = [reproduce_and_explain(loaded, n, engine, settings) for n in names]
    for r in results:
        result(str(r), style=None if r.same else "yellow")
    return 0 if all(r.same for r in results) else CheckFailed.return_code


def _across(args: argparse.Namespace, lock: Lock, names: list[str], settings: Settings) -> int:
    """One build per engine (records kept, so a later plain build is a no-op), then the
    file trees compared pairwise; exit 16 (a failed check) when any pair differs, as a
    failed reproduce."""
    from lockpipe.verify.across import build_across

    wanted = [e.strip() for e in args.across_engines.split(",") if e.strip()]
    twice = sorted({e for e in wanted if wanted.count(e) > 1})
    if twice:  # podman,podman built twice and compared nothing, which passed
        raise UsageError(
            f"--across-engines {args.across_engines!r}: {', '.join(twice)} named twice; "
            "name two different engines, e.g. buildah,podman"
        )
    if len(wanted) < 2:
        raise UsageError(f"--across-engines {args.across_engines!r}: name two engines or more")
    engines = [get_engine(e) for e in wanted]  # EngineMissing names what to install
    same = True
    for n in names:
        comparisons = build_across(lock, n, engines, replace(settings, force=False))
        if not comparisons:  # nothing compared is no verdict, never a pass
            raise CheckFailed(f"{n}: no two engines' builds were compared; give "
                              "--across-engines two different engines")  # fmt: skip
        for comparison in comparisons:
            result(f"{n}: {comparison}", style=None if comparison.same else "yellow")
            same = same and comparison.same
    return 0 if same else CheckFailed.return_code
