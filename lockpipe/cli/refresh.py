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
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from lockpipe.errors import DriftError, FetchError, LockpipeError, RegistryError, UsageError
from lockpipe.fs import STDOUT, write_report
from lockpipe.lock.model import Lock, load_lock, write_lock
from lockpipe.log import echo, result, set_results_to_stderr
from lockpipe.payloads.sources import hub_offline
from lockpipe.refresh import report
from lockpipe.refresh.api import Api
from lockpipe.refresh.bases import default_registry
from lockpipe.refresh.model import Kind, Outcome, Warn
from lockpipe.refresh.plan import World, apply, no_drift, resolve, resolve_each, select

if TYPE_CHECKING:
    from lockpipe.refresh.judge import ParserFor as judge_parser_for
    from lockpipe.refresh.offer import TreeFetch as offer_fetch


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
        offline="HF_HUB_OFFLINE" if hub_offline(os.environ) else None,
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
        write_report(path, text)  # "-": stdout
    except OSError as exc:
        why = exc.strerror or exc
        raise UsageError(f"{option} {path}: cannot write the report ({why}); pass a path "
                         "in a folder that exists and is writable") from None  # fmt: skip


def _now() -> datetime:
    """The run's clock; LOCKPIPE_NOW (ISO 8601) sets it, for tests of --min-age."""
    fixed = os.environ.get("LOCKPIPE_NOW")
    if fixed:
        try:
            return datetime.fromisoformat(fixed.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"LOCKPIPE_NOW={fixed!r}: not an ISO 8601 time") from None
    return datetime.now(timezone.utc)


def _propose(
    args: argparse.Namespace,
    loaded: Lock,
    chosen: Mapping[Kind, Sequence[str]],
    w: World,
    outcome: Outcome,
) -> tuple[Outcome, Path | None, dict[str, dict[str, str]], tuple[LockpipeError, ...]]:
    """The outcome with its proposals, the first-seen record's path and its new content,
    and (``--dry-run``) the entries whose upstream could not be asked for newer versions:
    each one more line of the report, as an unresolved entry is."""
    if not args.propose:
        return outcome, None, {}, ()
    from lockpipe.cli.options import state_dir
    from lockpipe.cli.propose_options import FIRST_SEEN
    from lockpipe.refresh import firstseen, offer, propose
    from lockpipe.registry.tags import list_tags

    min_age = firstseen.parse_age(args.min_age)
    record_path = args.first_seen or state_dir(args, loaded) / FIRST_SEEN
    up = propose.Upstreams(tags=list_tags, github=w.github, pypi=w.pypi)
    got = offer.offer(
        loaded,
        chosen,
        up,
        record=firstseen.load(record_path),
        now=_now(),
        min_age=min_age,
        fetch=_tree_fetch(args, w),
        parser_for=_parser_for(args, loaded),
        each=args.dry_run,
    )
    warns = tuple(
        Warn(kind=kind, name=name, rule="unfetchable",
             message=f"not proposed: {str(exc).splitlines()[0]}")
        for kind, name, exc in got.failed
    )  # fmt: skip
    outcome = replace(outcome, proposals=got.proposals, warnings=outcome.warnings + warns)
    unasked = tuple(type(exc)(f"{kind}.{name}: not proposed: "
                              f"{str(exc).splitlines()[0].removeprefix(f'{kind}.{name}: ')}")
                    for kind, name, exc in got.failed)  # fmt: skip
    return outcome, record_path, got.record, unasked


def _tree_fetch(args: argparse.Namespace, w: World) -> offer_fetch | None:
    if w.archives is None:
        return None
    from lockpipe.payloads.cache import fetch_verified

    archives = w.archives

    def fetch(url: str, sha256: str | None) -> Path:
        if sha256:
            return fetch_verified(url, sha256, args.cache.expanduser(), args.mirror)
        return archives.fetch(url).path

    return fetch


def _parser_for(args: argparse.Namespace, loaded: Lock) -> judge_parser_for:
    from lockpipe.errors import LockError
    from lockpipe.preflight import vllm_parser, vllm_release

    def find(version: str) -> vllm_parser.ParserEnv | vllm_parser.Unavailable:
        try:
            wheel = vllm_release.rules_of(loaded, version)["wheel"]
        except LockError as exc:
            return vllm_parser.Unavailable(reason=str(exc), fix="lockpipe upgrade derives them")
        where = vllm_parser.env_dir(args.cache.expanduser(), version)
        return vllm_parser.find_env(where, version, wheel)

    return find


def _unresolved(failed: tuple[LockpipeError, ...]) -> LockpipeError:
    """One error for the entries a --dry-run could not resolve (its report has them all),
    of the first one's kind: a registry's (18) or a fetch's (8)."""
    kind = RegistryError if isinstance(failed[0], RegistryError) else FetchError
    lines = "\n  ".join(str(e).splitlines()[0] for e in failed)
    n = len(failed)
    return kind(f"{n} entr{'y' if n == 1 else 'ies'} could not be resolved (the report above "
                f"lists every entry):\n  {lines}")  # fmt: skip


def do_refresh(args: argparse.Namespace) -> int:
    if STDOUT in (args.report_md, args.report_json):  # the report has stdout to itself
        set_results_to_stderr(True)
    loaded: Lock = load_lock(args.lock)
    chosen = select(loaded, [*args.targets, *args.only], args.kind)
    no_drift(loaded)
    w = world(args, chosen)
    failed: tuple[LockpipeError, ...] = ()
    if args.dry_run:  # every entry, the unreachable ones among them, goes in the report
        outcome, failed = resolve_each(loaded, chosen, w)
    else:
        outcome = resolve(loaded, chosen, w)
    outcome, record_path, record, unasked = _propose(args, loaded, chosen, w, outcome)
    failed += unasked
    doc = apply(loaded, outcome)
    for line in report.lines(outcome):
        result(line)
    if not args.check:  # --check writes nothing, not even a report
        if args.report_md:
            _write_report(args.report_md, report.markdown(outcome, str(args.lock)), "--report-md")
        if args.report_json:
            _write_report(args.report_json, report.as_json(outcome, str(args.lock)),
                          "--report-json")  # fmt: skip
        # a failed run stamps nothing; a --dry-run whose unreachable entries are lines of its
        # report stamps what it saw of the others (else one upstream this host never reaches
        # would hold every version forever)
        if record_path is not None and (not failed or args.dry_run):
            from lockpipe.refresh import firstseen

            firstseen.save(record_path, record)
    if failed:
        raise _unresolved(failed)
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
