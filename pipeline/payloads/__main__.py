"""``python -m pipeline.payloads``: the payloads verb on its own, until cli.py wires it.

Tests and the benchmark run it as a subprocess (so it can be killed mid-file).
Options mirror the planned ``python -m pipeline payloads`` verb.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pipeline.errors import PipelineError
from pipeline.lock import DEFAULT_LOCK, load_lock
from pipeline.log import console
from pipeline.payloads import Options, default_store, run_payloads


def parse(argv: Sequence[str]) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(prog="python -m pipeline.payloads", description=__doc__)
    p.add_argument("names", nargs="*", metavar="NAME", help="payloads or targets (default: all)")
    p.add_argument("--lock", type=Path, default=Path(env.get("PIPELINE_LOCK") or DEFAULT_LOCK))
    p.add_argument("--store", type=Path, default=None, help="PIPELINE_STORE")
    p.add_argument("--mirror", default=env.get("PIPELINE_MIRROR") or None)
    p.add_argument("--connections", type=int, default=8, help="parallel connections (8)")
    p.add_argument("--verify", action="store_true", help="re-hash every file in the store")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true")
    out.add_argument("--jsonl", action="store_true", help="JSON lines on stdout, for CI")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ)
    store = args.store or Path(env.get("PIPELINE_STORE") or default_store(env))
    output = "quiet" if args.quiet else "jsonl" if args.jsonl else "rich"
    try:
        options = Options(store, args.mirror, args.connections, args.verify, output, env=env)
        run_payloads(load_lock(args.lock), args.names, options)
    except PipelineError as exc:
        console.print(f"error: {exc}", style="bold red", markup=False, highlight=False)
        return exc.return_code
    except KeyboardInterrupt:
        console.print("interrupted; run again to resume", style="red")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
