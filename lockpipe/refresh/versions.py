"""Docker tags read as versions, the way Renovate's ``docker`` versioning reads them; pure.

A tag is ``[v]RELEASE[PRERELEASE][-SUFFIX]`` (Renovate, lib/modules/versioning/docker):
a leading ``v`` is dropped, the part before the first ``-`` must match
``^(\\d+(?:\\.\\d+)*)(\\w*)$`` (the release numbers, then a pre-release such as ``rc1``),
and everything after the first ``-`` is the compatibility suffix. A candidate is
**compatible** with the pinned tag only if its suffix is the same and its release has the
same number of parts (``12.9.1`` never proposes ``13.0``). A tag with a pre-release is
unstable and never proposed for a stable pin.

So ``v0.29.0-cu129`` proposes ``v0.33.0-cu129``, never ``v0.33.0`` (no suffix: another
CUDA), ``v0.31.0-cu130``, ``v0.32.0rc1-cu129`` or ``v0.32.0-cu129-ubuntu2404``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_RELEASE = re.compile(r"^(\d+(?:\.\d+)*)(\w*)$")
# the distribution spec's tag grammar, [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}: a longer "tag" in
# a tags/list is no tag, and its release numbers could pass int()'s 4300 digits
MAX_TAG = 128


@dataclass(frozen=True, kw_only=True, order=True)
class TagVersion:
    """One tag as a version: ``release`` compares; ``suffix`` and the precision must match."""

    release: tuple[int, ...]
    prerelease: str
    suffix: str
    prefix: str  # "v" or ""
    tag: str

    @property
    def version(self) -> str:
        """The release as a version string, ``0.33.0`` (what PyPI and labels say)."""
        return ".".join(map(str, self.release)) + self.prerelease

    @property
    def stable(self) -> bool:
        return not self.prerelease

    def compatible(self, other: TagVersion) -> bool:
        """Whether ``other`` may replace this one: same suffix, same precision."""
        return other.suffix == self.suffix and len(other.release) == len(self.release)

    def with_version(self, version: str) -> str:
        """This tag with another release, its prefix and suffix kept (``v0.33.0-cu129``)."""
        return f"{self.prefix}{version}" + (f"-{self.suffix}" if self.suffix else "")


def parse_tag(tag: str) -> TagVersion | None:
    """The tag as a version, or None when it is not one (``latest``, ``nightly-abc``, one
    longer than a tag may be)."""
    if len(tag) > MAX_TAG:
        return None
    prefix = "v" if tag.startswith("v") else ""
    head, _, suffix = tag[len(prefix) :].partition("-")
    m = _RELEASE.match(head)
    if m is None:
        return None
    release = tuple(int(p) for p in m[1].split("."))
    return TagVersion(release=release, prerelease=m[2], suffix=suffix, prefix=prefix, tag=tag)


def newer(pinned: str, tags: Iterable[str]) -> list[TagVersion]:
    """The stable tags compatible with ``pinned`` whose release is higher, oldest first.

    Empty when ``pinned`` is not a version (a ``latest`` pin follows its digest only)."""
    current = parse_tag(pinned)
    if current is None:
        return []
    found: dict[tuple[int, ...], TagVersion] = {}
    for tag in tags:
        v = parse_tag(tag)
        if v and v.stable and current.compatible(v) and v.release > current.release:
            found.setdefault(v.release, v)  # ``v1.0`` and ``1.0`` are one version: first wins
    return [found[r] for r in sorted(found)]
