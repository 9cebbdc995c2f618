"""The verbs that run an engine: build, build-GROUP and reproduce."""

from __future__ import annotations

import argparse

from pipeline.build.plan import built_here
from pipeline.build.run import Settings, build_target
from pipeline.cli.options import state_dir, targets
from pipeline.engines import get_engine
from pipeline.lock.model import load_lock
from pipeline.log import echo
from pipeline.verify.reproduce import reproduce_and_explain


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
    # Two builds each; when they differ, both images are read and compared down to the file.
    names = built_here(loaded, targets(args, loaded), "reproduce")
    results = [reproduce_and_explain(loaded, n, engine, settings) for n in names]
    for r in results:
        echo(str(r), style=None if r.same else "yellow")
    return 0 if all(r.same for r in results) else 1
