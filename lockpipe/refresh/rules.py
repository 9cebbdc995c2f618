"""The warning rules: pure checks on old and new values, each one tested on its own.

A warning never blocks a refresh (the lock is still written, or ``--check``
still fails only on changes); it is put at the top of the report, where the
reviewer of the refresh PR reads it before merging.
"""

from __future__ import annotations

import re

from lockpipe.refresh.model import Kind, Warn

SIZE_JUMP = 0.05  # a model file whose size moves by more than this share is worth a look
_BUILD = re.compile(r"b(\d{1,18})")  # past 18 digits no build number: int() refuses 4300


# A date or time as GitHub, the Hub and PyPI give them (2026-11-10T00:00:00Z,
# 2024-01-01T00:00:00.000Z, 2026-11-02T10:00:00): ASCII alone, so one goes into a report
# as it is, and two compare as strings (revision_backwards).
_ISO_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:T[0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?"
)


def iso_time(value: object) -> str | None:
    """``value`` where it is an ISO 8601 date or time (``2026-11-10T00:00:00Z``); None for
    anything else: a number, a lone surrogate (JSON's ``"\\ud800"``, which no report, log
    or terminal takes), free text. A server's date is for the reviewer, never a pin: one
    that is not a date reads as unknown, and the pins are still resolved."""
    return value if isinstance(value, str) and _ISO_TIME.fullmatch(value) else None


def build_number(tag: str | None) -> int | None:
    """llama.cpp's release tags are ``bNNNN``: the number, or None for any other name
    (``b`` and more than 18 digits, or a trailing newline, included)."""
    m = _BUILD.fullmatch(tag or "")
    return int(m[1]) if m else None


def tag_backwards(kind: Kind, name: str, old: str | None, new: str | None) -> list[Warn]:
    """A release tag lower than the pinned one (``b10069`` → ``b10001``)."""
    before, after = build_number(old), build_number(new)
    if before is None or after is None or after >= before:
        return []
    return [Warn(kind=kind, name=name, rule="backwards",
                 message=f"tag moved backwards: {old} -> {new}; the release followed is older "
                 "than the pinned one (a deleted or re-cut release?)")]  # fmt: skip


def commits_backwards(kind: Kind, name: str, status: str | None, old: str, new: str) -> list[Warn]:
    """GitHub's compare status of old...new: ``behind`` means the new commit is an ancestor."""
    if status not in ("behind", "diverged"):
        return []
    return [Warn(kind=kind, name=name, rule="backwards",
                 message=f"commit {new[:12]} is {status} the pinned {old[:12]}: the history "
                 "moved backwards or was rewritten")]  # fmt: skip


def revision_backwards(
    kind: Kind, name: str, old: str, new: str, old_date: str | None, new_date: str | None
) -> list[Warn]:
    """A Hub revision dated before the pinned one (a branch reset to an older commit)."""
    if not old_date or not new_date or new_date >= old_date:
        return []
    return [Warn(kind=kind, name=name, rule="backwards",
                 message=f"revision {new[:12]} ({new_date}) is older than the pinned "
                 f"{old[:12]} ({old_date}): the branch was reset")]  # fmt: skip


def index_gone(name: str, recorded: list[str], dropped: bool) -> list[Warn]:
    """The tag was a multi-arch index and is now one manifest: its child digests go."""
    if not dropped:
        return []
    return [Warn(kind="bases", name=name, rule="index-gone",
                 message=f"no longer a multi-arch index: the tag is one manifest now, so the "
                 f"recorded child digests ({', '.join(recorded)}) are removed")]  # fmt: skip


def unfetchable(name: str, pinned: str, fetchable: bool) -> list[Warn]:
    """The previously pinned digest is gone from the registry: nothing can roll back to it."""
    if fetchable:
        return []
    return [Warn(kind="bases", name=name, rule="unfetchable",
                 message=f"the pinned {pinned} can no longer be fetched; builds of the old "
                 "lock fail, and there is no rolling back to it")]  # fmt: skip


def label_unchanged(name: str, old: str | None, new: str | None, moved: bool) -> list[Warn]:
    """The digest moved but the image's version label did not: a silent rebuild."""
    if not moved or old is None or new is None or old != new:
        return []
    return [Warn(kind="bases", name=name, rule="label-unchanged",
                 message=f"the digest changed while the version label stayed {new!r}: a "
                 "rebuild of the same version; read its changelog before trusting it")]  # fmt: skip


def size_jump(name: str, path: str, old: int | None, new: int | None) -> list[Warn]:
    """A model file whose size moved by more than 5 %: another quantisation or a broken upload."""
    if not old or new is None or abs(new - old) * 100 <= old * round(SIZE_JUMP * 100):
        return []
    tenths = abs(new - old) * 1000 // old  # whole numbers: a float overflows past 10**308
    share = f"{'-' if new < old else '+'}{tenths // 10:,}.{tenths % 10}"
    return [Warn(kind="payloads", name=name, rule="size-jump",
                 message=f"{path}: size {old:,} -> {new:,} B ({share} %), more than "
                 f"{SIZE_JUMP:.0%}; check it is the same model")]  # fmt: skip
