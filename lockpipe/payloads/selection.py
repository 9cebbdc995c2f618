"""Which payloads a run covers, and the refusal to fetch unpinned ones. No I/O."""

from __future__ import annotations

from collections.abc import Sequence

from lockpipe.errors import LockError, UsageError
from lockpipe.lock.model import PIN_BY_HAND, Lock, Payload
from lockpipe.payloads.snapshot import missing_files, modalities_of
from lockpipe.spelling import hint


def select(lock: Lock, names: Sequence[str]) -> tuple[list[Payload], list[str]]:
    """The payloads named (directly or through a target) and the targets named; all if none."""
    if not names:
        return list(lock.payloads.values()), sorted(lock.targets)
    chosen: dict[str, Payload] = {}
    targets = []
    for n in names:
        if n in lock.payloads:
            chosen[n] = lock.payloads[n]
        elif n in lock.targets:
            targets.append(n)
            chosen.update({p: lock.payloads[p] for p in lock.targets[n].payloads})
        else:
            near = hint(n, [*lock.payloads, *lock.targets])
            raise UsageError(
                f"{n!r} is neither a payload nor a target in {lock.path}{near}; payloads: "
                f"{', '.join(sorted(lock.payloads))}; targets: {', '.join(sorted(lock.targets))}"
            )
    return list(chosen.values()), targets


def check_pinned(payloads: Sequence[Payload]) -> None:
    """Unpinned entries are never downloaded: fail before touching the network."""
    unpinned = [p for p in payloads if p.missing()]
    if unpinned:
        lines = [line for p in unpinned for line in _unpinned(p)]
        pinned = [p.name for p in payloads if not p.missing()]
        also = (
            f", or name only pinned ones: nox -s payloads -- {' '.join(pinned)}" if pinned else ""
        )
        head = "UNPINNED payloads (never fetched):"
        raise LockError("\n  ".join([head, *lines]) + f"\n{PIN_BY_HAND}{also}")


def check_complete(lock: Lock, payloads: Sequence[Payload]) -> None:
    """A snapshot must list every file its runtime reads: the lock is incomplete (exit 2)
    until it does, so nothing is fetched, as for an unpinned entry."""
    problems = [
        line for p in payloads if p.snapshot for line in missing_files(p, modalities_of(lock, p))
    ]
    if problems:
        raise LockError("\n".join(problems))


def _unpinned(p: Payload) -> list[str]:
    """One line per lock key that lacks values: the payload, or each file of a snapshot."""
    if not p.snapshot or not p.files:
        return [f"payloads.{p.name}: no {', '.join(p.missing())} pinned"]
    out = [f"payloads.{p.name}: no revision pinned"] if p.revision is None else []
    return out + [
        f"payloads.{p.name}.files.{f.path}: no {', '.join(f.missing())} pinned"
        for f in p.files
        if f.missing()
    ]
