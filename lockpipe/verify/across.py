"""Compare one target built by several engines by file tree, ignoring the tar encoding.

Engines split layers, order tar entries and encode headers each their own
way, so their digests never agree; what a container sees is the merged file
tree (later layers over earlier ones, whiteouts applied). This compares
that, path by path, and names a cause for each difference as ``explain``
does. Tar-encoding-only fields are ignored by default (TAR_ENCODING: the
owner's *name* in the header, which one engine writes and another leaves
empty for the same uid/gid); numeric owners, modes and times still count.
Agreeing trees are not the same image: the report says "same" only for one
config digest, and otherwise names the config fields that differ, with causes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import combinations

from lockpipe.engines.base import Engine
from lockpipe.errors import UsageError
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import Lock
from lockpipe.verify.causes import classify, differing_fields
from lockpipe.verify.explain import Explanation, FileDiff, explain
from lockpipe.verify.tree import ImageTree, exported, merged, source_for

TAR_ENCODING = frozenset({"owner name"})  # the uname/gname strings; uid/gid stay compared


@dataclass(frozen=True, kw_only=True)
class TreeComparison:
    a: str  # engine names
    b: str
    paths: int  # paths in the union of both trees
    differing: tuple[FileDiff, ...]  # sorted by path
    images: Explanation  # the images themselves: their digests and differing config fields

    @property
    def same(self) -> bool:
        """The merged file trees agree (what --across-engines promises); the digests may not."""
        return not self.differing

    def fields(self) -> set[str]:
        """Every kind of difference seen (content, mode, owner, mtime, link, only in A/B)."""
        return {f for d in self.differing for f in d.fields}

    def text(self, limit: int = 10) -> str:
        if self.images.same:
            config = self.images.digests[0][:19]
            return f"{self.a} vs {self.b}: the same image ({config}, {self.paths} paths)"
        if self.same:
            lines = [f"{self.a} vs {self.b}: the file trees agree ({self.paths} paths), "
                     "the images do not:"]  # fmt: skip
        else:
            lines = [f"{self.a} vs {self.b}: {len(self.differing)} of {self.paths} paths differ"]
        for d in self.differing[:limit]:
            lines.append(f"  /{d.path}: {', '.join(d.fields)} -> {d.cause.name}")
        return "\n".join(lines + self.images.field_lines(limit))

    def __str__(self) -> str:
        return self.text()


def compare_trees(
    a: ImageTree, b: ImageTree, *, names: tuple[str, str] = ("A", "B"),
    ignore: frozenset[str] = frozenset(),
) -> TreeComparison:  # fmt: skip
    """The merged file trees of two images, path by path; ``ignore`` drops fields (e.g. mtime)."""
    ta, tb = merged(a), merged(b)
    out = []
    for path in sorted(set(ta) | set(tb)):
        x, y = ta.get(path), tb.get(path)
        fields = tuple(f for f in differing_fields(x, y) if f not in ignore)
        if fields:
            out.append(FileDiff(path=path, fields=fields, cause=classify(x, y)))
    return TreeComparison(a=names[0], b=names[1], paths=len(set(ta) | set(tb)),
                          differing=tuple(out), images=explain(a, b))  # fmt: skip


def across_engines(
    images: Mapping[str, str], *, ignore: frozenset[str] = TAR_ENCODING
) -> tuple[TreeComparison, ...]:
    """Each pair of ``engine name → local image ID`` compared by file tree, without ``ignore``."""
    with ExitStack() as stack:
        trees = {
            name: stack.enter_context(exported(source_for(name, image)))
            for name, image in images.items()
        }
        return tuple(
            compare_trees(trees[x], trees[y], names=(x, y), ignore=ignore)
            for x, y in combinations(trees, 2)
        )


def build_across(
    lock: Lock, name: str, engines: Sequence[Engine], s: Settings,
    *, ignore: frozenset[str] = TAR_ENCODING,
) -> tuple[TreeComparison, ...]:  # fmt: skip
    """Build ``name`` with each engine (its record kept, as ``build`` does), then compare their
    file trees, ignoring the tar encoding (``ignore``) unless told otherwise. Two engines
    of one name are refused before any build: keyed by name, they would compare nothing."""
    seen = [e.name for e in engines]
    if len(set(seen)) != len(seen) or len(seen) < 2:
        raise UsageError(f"--across-engines {','.join(seen)}: name two different engines, "
                         "each once, e.g. buildah,podman")  # fmt: skip
    images: dict[str, str] = {
        e.name: build_target(lock, name, e, s).record.image_id for e in engines
    }
    return across_engines(images, ignore=ignore)
