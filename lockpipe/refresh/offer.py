"""``refresh-digests --propose``: list, hold, judge, record. The steps that touch the world.

:func:`offer` asks for candidates (:mod:`.propose`), stamps them in the first-seen record
and holds the young ones (``--min-age``), fetches the llama.cpp trees a source proposal is
judged with, and judges every proposal (:mod:`.judge`). The record is written by the
caller, after the refresh succeeded, so a failed run stamps nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from lockpipe.errors import FetchError, LockpipeError, RegistryError
from lockpipe.lock.model import Lock
from lockpipe.log import echo
from lockpipe.refresh import firstseen, judge, llama_tree, propose
from lockpipe.refresh.model import Kind
from lockpipe.refresh.proposal import Proposal


@dataclass(frozen=True, kw_only=True)
class Offer:
    proposals: tuple[Proposal, ...]
    record: dict[str, dict[str, str]]  # the first-seen record with this run's stamps
    # --dry-run (each=True): the entries whose upstream could not be asked, and why
    failed: tuple[tuple[Kind, str, FetchError | RegistryError], ...] = ()


TreeFetch = Callable[[str, str | None], Path]  # (url, sha256 or None) -> local archive


def trees_for(
    lock: Lock, proposals: Sequence[Proposal], fetch: TreeFetch
) -> dict[str, judge.Trees]:
    """The pinned and the new tree of each source proposal; a fetch that fails is said and
    the proposal is judged without it."""
    out: dict[str, judge.Trees] = {}
    for p in proposals:
        if p.kind != "sources" or p.held:
            continue
        source = lock.sources[p.name]
        base = source.repository.rstrip("/").removesuffix(".git")
        try:
            new = llama_tree.read_archive(
                fetch(f"{base}/archive/refs/tags/{p.version}.tar.gz", None)
            )
        except LockpipeError as exc:
            echo(
                f"note: {p.key} {p.version}: the new tree could not be read ({exc}); its "
                "flags are not judged",
                style="yellow",
            )
            continue
        pinned = None
        if source.url and source.sha256:
            try:
                pinned = llama_tree.read_archive(fetch(source.url, source.sha256))
            except LockpipeError as exc:
                echo(f"note: {p.key}: the pinned tree could not be read ({exc})", style="yellow")
        out[f"{p.key}@{p.version}"] = judge.Trees(pinned=pinned, new=new)
    return out


def offer(
    lock: Lock,
    chosen: Mapping[Kind, Sequence[str]],
    up: propose.Upstreams,
    *,
    record: firstseen.Record,
    now: datetime,
    min_age: timedelta,
    fetch: TreeFetch | None,
    parser_for: judge.ParserFor | None,
    each: bool = False,
) -> Offer:
    """Every proposal for the ``chosen`` entries (per kind), held or judged; nothing is
    written. ``each`` (``--dry-run``): an entry whose upstream fails is left out and named
    in ``failed``, as :func:`lockpipe.refresh.plan.resolve_each` does, instead of the end."""
    failed: list[tuple[Kind, str, FetchError | RegistryError]] = []
    if each:
        found, failed = propose.propose_each(lock, chosen, up)
    else:
        found = propose.propose(lock, chosen, up)
    held, seen = propose.hold(found, record, now, min_age)
    trees = trees_for(lock, held, fetch) if fetch else {}
    judged = judge.judge(lock, held, trees=trees, parser_for=parser_for)
    return Offer(proposals=tuple(judged), record=seen, failed=tuple(failed))
