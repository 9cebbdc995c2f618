"""``lockpipe demo``: the pipeline end to end on the small llama-cpu target, offline."""

from __future__ import annotations

import argparse

from lockpipe.demo.plan import parse_registry
from lockpipe.demo.run import DemoOptions, run_demo
from lockpipe.errors import UsageError
from lockpipe.log import echo
from lockpipe.urls import redact


def do_demo(args: argparse.Namespace) -> int:
    if args.targets:
        raise UsageError(f"demo takes no TARGET ({' '.join(args.targets)}): it runs llama-cpu "
                         "from locks/demo/digests.json; drop the name")  # fmt: skip
    if args.mirror:
        echo(f"note: demo serves its inputs from a loopback mirror of its own; --mirror "
             f"(LOCKPIPE_MIRROR) {redact(args.mirror)} is not used")  # fmt: skip
    registry = parse_registry(args.registry) if args.registry else None
    options = DemoOptions(lock=args.lock, engine=args.engine or "buildah", registry=registry,
                          work=args.work, cache=args.cache, state=args.state,
                          store=args.store)  # fmt: skip
    return run_demo(options)
