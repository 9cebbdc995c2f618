"""The ``refresh-digests`` verb: re-resolve every pin upstream, write one reviewable change.

A lock with drift (a hand edit not yet relocked) is refused first: the refresh
commit must hold only what moved upstream. Everything is resolved before
anything is written; the report files and the lock are each written
atomically, the lock last, and only when something moved. ``--check`` writes
nothing at all (not even a report); ``--dry-run`` writes the reports, never the
lock. Any failure leaves the lock as it was and writes no report.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection
from pathlib import Path

from lockpipe.errors import DriftError, UsageError
from lockpipe.fs import write_atomic
from lockpipe.lock.model import Lock, load_lock, write_lock
from lockpipe.log import echo
from lockpipe.refresh import report
from lockpipe.refresh.api import Api
from lockpipe.refresh.bases import default_registry
from lockpipe.refresh.model import Kind
from lockpipe.refresh.plan import World, apply, no_drift, resolve, select


def world(args: argparse.Namespace, kinds: Collection[Kind]) -> World:
    """The real clients, configured from the options and the tokens in the environment.

    The archive tools and the Hub token reader are loaded only when their kind is
    refreshed, so the scheduled `--kind bases` check starts quickly."""
    cache, mirror = args.cache, args.mirror
    github = Api(
        base=args.github_api,
        name="GitHub's API",
        refused="set GITHUB_TOKEN to a token that can read the repository",
        token=os.environ.get("GITHUB_TOKEN") or None,
        no_token="set GITHUB_TOKEN (a token lifts the anonymous limit of 60 requests an hour)",
    )
    hub = Api(
        base=args.hub,
        name="the Hub",
        token=_hf_token() if "payloads" in kinds else None,
        refused="gated or private: set HF_TOKEN and accept the repository's licence "
        "on its Hub page",
    )
    pypi = Api(
        base=args.pypi,
        name="the package index",
        refused="check LOCKPIPE_PYPI and the index's credentials",
    )
    archives = None
    if "sources" in kinds:
        from lockpipe.refresh.archive import fetch_unpinned, tree_hash
        from lockpipe.refresh.sources import Archives

        archives = Archives(
            fetch=lambda url: fetch_unpinned(url, cache, mirror), tree=tree_hash, cache=cache
        )
    registry = default_registry(cache.expanduser() / "registry")
    return World(registry=registry, github=github, hub=hub, pypi=pypi,
                 archives=archives)  # fmt: skip


def _hf_token() -> str | None:
    from lockpipe.payloads.sources import hf_token

    return hf_token(os.environ)


def _write_report(path: Path, text: str, option: str) -> None:
    try:
        write_atomic(path, text)
    except OSError as exc:
        why = exc.strerror or exc
        raise UsageError(f"{option} {path}: cannot write the report ({why}); pass a path "
                         "in a folder that exists and is writable") from None  # fmt: skip


def do_refresh(args: argparse.Namespace) -> int:
    loaded: Lock = load_lock(args.lock)
    chosen = select(loaded, [*args.targets, *args.only], args.kind)
    no_drift(loaded)
    outcome = resolve(loaded, chosen, world(args, chosen))
    doc = apply(loaded, outcome)
    for line in report.lines(outcome):
        echo(line)
    if not args.check:  # --check writes nothing, not even a report
        if args.report_md:
            _write_report(args.report_md, report.markdown(outcome, str(args.lock)), "--report-md")
        if args.report_json:
            _write_report(args.report_json, report.as_json(outcome, str(args.lock)),
                          "--report-json")  # fmt: skip
    n = len(outcome.changes)
    if args.check:
        if n:
            raise DriftError(f"{args.lock}: {n} pin(s) moved upstream; run nox -s "
                             "refresh-digests and review the diff")  # fmt: skip
        echo(f"{args.lock}: every pin checked is current")
        return 0
    if not n or doc == loaded.document:
        echo(f"{args.lock}: every pin checked is current; nothing written")
        return 0
    if args.dry_run:
        echo(f"{args.lock}: {n} entr{'y' if n == 1 else 'ies'} would change (--dry-run: "
             "nothing written)")  # fmt: skip
        return 0
    write_lock(args.lock, doc)
    echo(f"{args.lock}: {n} entr{'y' if n == 1 else 'ies'} and their origins updated; "
         f"review with git diff {args.lock}")  # fmt: skip
    return 0
