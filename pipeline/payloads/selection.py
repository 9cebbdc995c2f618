"""Which payloads a run covers, and the refusal to fetch unpinned ones. No I/O."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.errors import LockError, UsageError
from pipeline.lock.model import PIN_BY_HAND, Lock, Payload


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
            raise UsageError(
                f"{n!r} is neither a payload nor a target in {lock.path}; payloads: "
                f"{', '.join(sorted(lock.payloads))}; targets: {', '.join(sorted(lock.targets))}"
            )
    return list(chosen.values()), targets


def check_pinned(payloads: Sequence[Payload]) -> None:
    """Unpinned entries are never downloaded: fail before touching the network."""
    unpinned = [p for p in payloads if p.missing()]
    if unpinned:
        lines = [f"payloads.{p.name}: no {', '.join(p.missing())} pinned" for p in unpinned]
        pinned = [p.name for p in payloads if not p.missing()]
        also = (
            f", or name only pinned ones: nox -s payloads -- {' '.join(pinned)}" if pinned else ""
        )
        raise LockError("\n  ".join(["unpinned payloads:", *lines]) + f"\n{PIN_BY_HAND}{also}")
