"""One refresh: choose the entries, resolve them all, then make the new lock document.

:func:`select` is pure (names and ``--kind`` → entries per kind). :func:`resolve`
asks every upstream and returns an :class:`Outcome` without touching the lock
file; only when all of it succeeded does :func:`apply` make the new document
(each changed entry with a fresh ``origin``, every other entry as it was, the
fingerprints brought up to date). Writing it is the caller's one atomic step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any

from lockpipe.errors import DriftError, FetchError, RegistryError, UsageError
from lockpipe.fs import sha256_file
from lockpipe.lock.fingerprint import check_drift, relock
from lockpipe.lock.model import Lock, parse_lock
from lockpipe.refresh.api import Api
from lockpipe.refresh.bases import Registry, refresh_bases
from lockpipe.refresh.model import KINDS, Change, Kind, Newer, Outcome, Warn
from lockpipe.spelling import hint

if TYPE_CHECKING:  # each kind's module is imported when that kind is refreshed: a
    # `--kind bases` run (the scheduled check) starts without packaging, the archive
    # tools or the payload downloader
    from lockpipe.refresh.sources import Archives


@dataclass(frozen=True, kw_only=True)
class World:
    """Every upstream a refresh asks: real clients in the CLI, fakes' URLs in tests."""

    registry: Registry
    github: Api
    hub: Api
    pypi: Api
    archives: Archives | None  # None when no source is refreshed


def table(lock: Lock, kind: Kind) -> Mapping[str, Any]:
    return {"bases": lock.bases, "sources": lock.sources, "payloads": lock.payloads,
            "pip": lock.pip}[kind]  # fmt: skip


def select(lock: Lock, names: Sequence[str], kind: Kind | None) -> dict[Kind, list[str]]:
    """The entries to refresh, per kind: ``names`` (any kind's, or ``kind.name``), narrowed
    to ``kind``; every entry when no name is given. UsageError for a name the lock lacks."""
    kinds = [kind] if kind else list(KINDS)
    if not names:
        return {k: sorted(table(lock, k)) for k in kinds if table(lock, k)}
    out: dict[Kind, list[str]] = {k: [] for k in kinds}
    for name in _entries(lock, names, kinds):
        prefix, _, rest = name.partition(".")
        hits = [k for k in kinds if prefix == k and rest in table(lock, k)]
        hits = hits or [k for k in kinds if name in table(lock, k)]
        if not hits:
            where = f"in {kind}" if kind else "in bases, sources, payloads or pip"
            known = [n for k in kinds for n in sorted(table(lock, k))]
            near = hint(name, [*known, *lock.targets])
            raise UsageError(f"{name}: not {where} of {lock.path}, nor a target{near}; choose "
                             f"from {', '.join(known)}, or a target's name")  # fmt: skip
        for k in hits:
            entry = rest if prefix == k and rest in table(lock, k) else name
            if entry not in out[k]:
                out[k].append(entry)
    return {k: v for k, v in out.items() if v}


def _entries(lock: Lock, names: Sequence[str], kinds: Sequence[Kind]) -> list[str]:
    """``names`` with each target's name (one no entry has) replaced by ``KIND.NAME`` of
    every entry it builds from or serves, among ``kinds``: its bases, source, pip files
    and payloads."""
    out: list[str] = []
    for name in names:
        target = lock.targets.get(name)
        if target is None or any(name in table(lock, k) for k in KINDS):
            out.append(name)
            continue
        uses: dict[Kind, tuple[str, ...]] = {
            "bases": tuple(dict.fromkeys(target.bases.values())),
            "sources": (target.source,) if target.source else (),
            "pip": target.pip,
            "payloads": target.payloads,
        }
        out += [f"{k}.{entry}" for k in kinds for entry in uses[k]]
    return out


def no_drift(lock: Lock) -> None:
    """DriftError unless every pip file and every target's fingerprint matches the lock.

    A refresh rewrites fingerprints; on a drifted lock it would fold a hand edit (a
    Dockerfile, a requirements file) into the "refresh" commit unreviewed. So drift is
    refused before anything is asked, and ``nox -s lock`` comes first."""
    problems = []
    for name, pip in sorted(lock.pip.items()):
        try:
            actual = sha256_file(lock.root / pip.file)
        except OSError as exc:
            problems.append(f"pip.{name}: cannot read {pip.file} ({exc.strerror})")
            continue
        if actual != pip.sha256:
            problems.append(f"pip.{name}: {pip.file} has sha256 {actual[:12]}…, the lock says "
                            f"{(pip.sha256 or 'none')[:12]}…")  # fmt: skip
    if problems:  # a pip file's drift is also every target's that uses it: said once
        raise DriftError(_drift(lock, problems))
    for target in sorted(lock.targets.values(), key=lambda t: t.name):
        try:
            check_drift(lock, target)
        except DriftError as exc:
            problems.append(str(exc).split("; ")[0])
    if problems:
        raise DriftError(_drift(lock, problems))


def _drift(lock: Lock, problems: list[str]) -> str:
    return (f"{lock.path}: drift before refreshing: {'; '.join(problems)}; a refresh would "
            "fold it into its commit unreviewed: review it, run nox -s lock first, then "
            "refresh")  # fmt: skip


def resolve(lock: Lock, chosen: Mapping[Kind, Sequence[str]], world: World) -> Outcome:
    """Ask every upstream about the chosen entries; raises before anything is written."""
    changes: list[Change] = []
    warns: list[Warn] = []
    if chosen.get("bases"):
        c, w = refresh_bases(lock, chosen["bases"], world.registry)
        changes += c
        warns += w
    for name in chosen.get("sources", ()):
        from lockpipe.refresh.sources import refresh_source

        if world.archives is None:
            raise UsageError("refreshing sources needs a way to fetch archives (World.archives)")
        change, w = refresh_source(lock.sources[name], world.github, world.archives)
        changes += [change] if change else []
        warns += w
    for name in chosen.get("payloads", ()):
        from lockpipe.refresh.payloads import refresh_payload

        change, w = refresh_payload(lock.payloads[name], world.hub)
        changes += [change] if change else []
        warns += w
    pips = list(chosen.get("pip", ()))
    newer: tuple[Newer, ...] = ()
    if pips:
        from lockpipe.refresh.pypi import newer_releases

        newer = tuple(newer_releases(lock, pips, world.pypi))
    checked = {k: tuple(v) for k, v in chosen.items()}
    return Outcome(changes=tuple(changes), warnings=tuple(warns), newer=newer, checked=checked)


def resolve_each(
    lock: Lock, chosen: Mapping[Kind, Sequence[str]], world: World
) -> tuple[Outcome, tuple[FetchError | RegistryError, ...]]:
    """``--dry-run``: each entry resolved on its own, so an upstream that cannot be reached
    is one more line of the report (a warning, rule ``unfetchable``) rather than its end.
    The failures come back too, for the exit code once the report is out."""
    total = Outcome()
    failed: list[FetchError | RegistryError] = []
    for kind, names in chosen.items():
        for name in names:
            try:
                total = total + resolve(lock, {kind: [name]}, world)
            except (FetchError, RegistryError) as exc:
                failed.append(exc)
                first = str(exc).splitlines()[0]
                warn = Warn(
                    kind=kind, name=name, rule="unfetchable", message=f"not resolved: {first}"
                )
                total = total + Outcome(warnings=(warn,))
    return replace(total, checked={k: tuple(v) for k, v in chosen.items()}), tuple(failed)


def apply(lock: Lock, outcome: Outcome, today: str | None = None) -> dict[str, Any]:
    """The lock document with every change in it, fresh origins on changed entries only,
    fingerprints brought up to date. Pure: nothing is written."""
    doc: dict[str, Any] = copy.deepcopy(dict(lock.document))
    seen = today or date.today().isoformat()
    for change in outcome.changes:
        entry = doc[change.kind][change.name]
        for key, value in change.updates.items():
            if value is None:
                entry.pop(key, None)
            else:
                entry[key] = copy.deepcopy(value)
        entry["origin"] = {"source": change.source, "seen": seen}
    if not outcome.changes:
        return doc
    return relock(parse_lock(doc, lock.path, lock.root))
