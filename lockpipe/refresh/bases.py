"""Base images: re-resolve each ``bases.NAME.ref`` for the platforms the lock requires.

Every base is asked of its registry at once (``resolve_many``, a bounded pool
that shares tokens per host). The index digest stays the entry's ``digest``;
the child digest of each required platform goes to ``platforms``, the
image's version label to ``version_label``, so the next refresh can tell a
rebuild of the same version from a new one. A failure to resolve any base is
an error for the whole refresh: nothing is written on half an answer. That
includes a platform the lock records that the tag no longer offers ("platform
gone"): hosts of that platform could no longer pull the base, so a person
decides (drop the platform, or pin another tag), not the refresh.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lockpipe.errors import IntegrityError, RegistryError
from lockpipe.lock.model import Base, Lock
from lockpipe.lock.refs import parse_ref
from lockpipe.refresh import rules
from lockpipe.refresh.model import Change, Moved, Warn
from lockpipe.registry.platforms import PlatformMissing


class Answer(Protocol):
    """What :class:`lockpipe.registry.client.Resolved` offers a refresh."""

    @property
    def digest(self) -> str: ...
    @property
    def platforms(self) -> Any: ...  # Mapping[str, str]: required platform -> child digest
    @property
    def available(self) -> tuple[str, ...]: ...
    @property
    def version_label(self) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class Registry:
    """How bases are resolved: the registry client's functions, or a test's."""

    resolve_many: Callable[[Sequence[str], tuple[str, ...]], Sequence[Answer | RegistryError]]
    exists: Callable[[str], bool]


def default_registry(cache: Path | None = None) -> Registry:
    """The real registry client; ``cache`` is the manifest cache's folder (``--cache``/registry)."""
    from lockpipe.registry import client

    return Registry(
        resolve_many=lambda refs, platforms: client.resolve_many(
            refs, platforms=platforms, cache=cache
        ),
        exists=client.exists,
    )


def required(base: Base) -> tuple[str, ...]:
    """The lock's platform first, then every other platform it recorded."""
    return (base.platform, *sorted(set(base.platforms) - {base.platform}))


def resolve_all(bases: Sequence[Base], registry: Registry) -> dict[str, Answer]:
    """Each base's answer; a RegistryError for the first that fails, naming it."""
    groups: dict[tuple[str, ...], list[Base]] = defaultdict(list)
    for base in bases:
        groups[required(base)].append(base)
    out: dict[str, Answer] = {}
    for platforms, members in groups.items():
        answers = registry.resolve_many([b.ref for b in members], platforms)
        for base, answer in zip(members, answers, strict=True):
            if isinstance(answer, PlatformMissing):
                raise RegistryError(platform_gone(base, answer))
            if isinstance(answer, RegistryError):
                # altered bytes keep their exit code (9, as verify's), whatever else failed
                kind = IntegrityError if isinstance(answer, IntegrityError) else RegistryError
                raise kind(f"bases.{base.name}: {answer}; nothing was written")
            out[base.name] = answer
    return out


def platform_gone(base: Base, missing: PlatformMissing) -> str:
    """The one-line error for a required platform the tag no longer offers."""
    available = ", ".join(missing.available) or "none"
    own = missing.platform == base.platform
    recorded = "the lock's platform" if own else "recorded in platforms"
    return (f"bases.{base.name}: platform gone: {missing.platform} ({recorded}) is no longer "
            f"offered by {base.ref} (available: {available}); hosts of that platform can no "
            f"longer pull it: pick a tag that has it, or remove it from bases.{base.name} "
            "(platform/platforms) by hand; nothing was written")  # fmt: skip


def refresh_bases(
    lock: Lock, names: Sequence[str], registry: Registry
) -> tuple[list[Change], list[Warn]]:
    """The changes to the named bases (only those whose upstream moved) and the warnings."""
    bases = [lock.bases[n] for n in names]
    answers = resolve_all(bases, registry)
    changes, warns = [], []
    for base in bases:
        a = answers[base.name]
        platforms = {p: d for p, d in sorted(a.platforms.items()) if p in required(base)}
        # A single manifest has no children: recorded child digests would be stale.
        dropped = bool(base.platforms) and not platforms
        warns += rules.index_gone(base.name, sorted(base.platforms), dropped)
        moved = [Moved("digest", base.digest, a.digest)] if a.digest != base.digest else []
        moved += [Moved(f"platforms.{p}", base.platforms.get(p), d)
                  for p, d in platforms.items() if base.platforms.get(p) != d]  # fmt: skip
        moved += [Moved(f"platforms.{p}", d, None) for p, d in sorted(base.platforms.items())
                  if dropped]  # fmt: skip
        label = a.version_label
        if label is not None and label != base.version_label:
            moved.append(Moved("version_label", base.version_label, label))
        if not moved:
            continue
        digest_moved = a.digest != base.digest
        warns += rules.label_unchanged(base.name, base.version_label, label, digest_moved)
        if digest_moved and base.digest is not None:
            old = parse_ref(base.ref).pinned(base.digest)
            warns += rules.unfetchable(base.name, base.digest, registry.exists(old))
        updates: dict[str, Any] = {"digest": a.digest}
        if platforms or dropped:
            updates["platforms"] = platforms or None  # None: the key is removed
        if label is not None:
            updates["version_label"] = label
        registry_host = parse_ref(base.ref).registry
        changes.append(Change(
            kind="bases", name=base.name, what=base.ref, moved=tuple(moved), updates=updates,
            tag=label or parse_ref(base.ref).tag,
            source=f"registry {registry_host}: the tag's manifest"
            + (f" and its {', '.join(platforms)} child" if platforms else ""),
        ))  # fmt: skip
    return changes, warns
