"""What a refresh found: changes to write, warnings for the reviewer, newer pip releases,
proposed upgrades.

Plain frozen data, shared by the resolvers (``bases``, ``sources``, ``payloads``,
``pypi``), the planner (``plan``) and the report (``report``), so the report can
be rendered and tested from literals without any server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lockpipe.refresh.proposal import Proposal

Kind = Literal["bases", "sources", "payloads", "pip"]
KINDS: tuple[Kind, ...] = ("bases", "sources", "payloads", "pip")
Rule = Literal["backwards", "index-gone", "unfetchable", "label-unchanged", "size-jump"]


@dataclass(frozen=True)
class Moved:
    """One pinned value: ``key`` (``digest``, ``commit``, ``files.config.json.size``) old → new.

    ``new`` is None for a value that is removed (a child digest of an index that became
    a single manifest)."""

    key: str
    old: str | None
    new: str | None


@dataclass(frozen=True)
class Link:
    label: str
    url: str


@dataclass(frozen=True, kw_only=True)
class Change:
    """One lock entry whose upstream moved (or whose unpinned values became known).

    ``updates`` are the entry's keys to set (a None value removes the key); every other
    key (notes, role, …) is kept.
    ``source`` becomes the entry's new ``origin.source``.
    """

    kind: Kind
    name: str
    what: str  # the reference followed: ``ref``, ``repository@follow``, ``repo@main``
    moved: tuple[Moved, ...]
    updates: Mapping[str, Any]
    source: str
    tag: str | None = None  # the tag, release or label the new value carries
    dates: tuple[tuple[str, str], ...] = ()  # (what, ISO date)
    links: tuple[Link, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.kind}.{self.name}"


@dataclass(frozen=True, kw_only=True)
class Warn:
    """Something a reviewer must look at before merging; it never blocks the write."""

    kind: Kind
    name: str
    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"warning: {self.kind}.{self.name}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class Newer:
    """A newer release of a requirement the lock pins; reported, never moved."""

    pip: str  # the lock's pip entry
    file: str
    package: str
    pinned: str
    latest: str
    url: str


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """Everything one refresh resolved, before anything is written."""

    changes: tuple[Change, ...] = ()
    warnings: tuple[Warn, ...] = ()
    newer: tuple[Newer, ...] = ()
    checked: Mapping[Kind, tuple[str, ...]] = field(default_factory=dict)
    proposals: tuple[Proposal, ...] = ()  # newer versions (--propose), never applied

    def __add__(self, other: Outcome) -> Outcome:
        return Outcome(
            changes=self.changes + other.changes,
            warnings=self.warnings + other.warnings,
            newer=self.newer + other.newer,
            checked={**self.checked, **other.checked},
            proposals=self.proposals + other.proposals,
        )
