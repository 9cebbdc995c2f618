"""The ``payloads`` verb: fetch and verify the lock's payloads into the store.

Apart from ``smoke`` (:mod:`lockpipe.cli.serve`), which reads the same options, so that
fetching imports neither the smoke runner nor the engines.
"""

from __future__ import annotations

import argparse
import os

from lockpipe.cli import jsonout
from lockpipe.errors import UsageError
from lockpipe.fs import STDOUT
from lockpipe.lock.model import load_lock
from lockpipe.log import result, set_results_to_stderr
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.store import default_store
from lockpipe.publish.ocimirror import oci_mirror


def payload_options(args: argparse.Namespace) -> Options:
    env = dict(os.environ)
    store = args.store or default_store(env)
    output = "quiet" if args.quiet else "jsonl" if args.jsonl else "rich"
    # Resolved once: the smoke runner maps store paths into the container relative to it.
    store = store.expanduser().resolve()
    mirror, blob_mirror = oci_mirror(args.mirror)  # --mirror oci://…, or registries.conf's
    return Options(store=store, mirror=mirror, connections=args.connections,
                   verify=args.verify, output=output, env=env, blob_mirror=blob_mirror)  # fmt: skip


def do_payloads(args: argparse.Namespace) -> int:
    if args.targets[:1] == ["publish"]:  # lockpipe payloads publish --to REGISTRY/PREFIX
        from lockpipe.cli.artifacts import do_payloads_publish

        return do_payloads_publish(args)
    if args.to:
        raise UsageError("--to is for `lockpipe payloads publish --to REGISTRY/PREFIX`")
    json_begin(args)
    done = run_payloads(load_lock(args.lock), args.targets, payload_options(args))
    for r in done:  # the result, on stdout; the progress went to stderr
        result(f"{r.name}: {r.status}, {r.fetched:,} bytes fetched: {r.path}")
    jsonout.emit(args.json, "payloads", {"payloads": jsonout.as_json(done)})
    return 0


def json_begin(args: argparse.Namespace) -> None:
    """--json (``-``: stdout) is checked first; --jsonl's progress lines would share stdout.
    With --jsonl stdout is JSON lines only: the result lines (each already a ``done`` event
    there) go to stderr, as the tables do under ``--json -``."""
    if args.jsonl and args.json == STDOUT:
        raise UsageError("--jsonl writes progress to stdout, so --json - cannot: give --json "
                         "a FILE, or drop --jsonl")  # fmt: skip
    if args.jsonl:
        set_results_to_stderr(True)
    jsonout.begin(args.json)
