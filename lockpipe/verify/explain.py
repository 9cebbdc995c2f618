"""Compare two images down to the file and name a known cause with its fix.

Pure: it takes two :class:`ImageTree` values (read by ``tree.py``) and returns
a frozen report. Whether the images are the same is their digests' answer,
never the comparison's: the same config digest is the same config and layers,
and only then does a manifest count (layer media types, compression,
annotations). Configs that differ are compared whole, every key at any depth
(``fields.py``), each difference with its cause; where no field differs the
report says the bytes differ, never "same". The layers are compared pairwise
by diff ID; within a differing layer, entries by path (content, mode, owner,
mtime, link), then their order, then, with equal entries in equal order, the
tar encoding. Before any file, two facts outrank the rest: a base that moved
(a refresh happened between the builds) and another engine or engine version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lockpipe.imagebuild.plan import LABEL_PREFIX
from lockpipe.verify import causes
from lockpipe.verify.causes import Cause, classify, differing_fields, field_cause, pyc_detail
from lockpipe.verify.fields import FieldDiff, Path, diff
from lockpipe.verify.tree import Entry, ImageTree, Layer

BASE_LABEL = f"{LABEL_PREFIX}.base."
FINGERPRINT = f"{LABEL_PREFIX}.fingerprint"
KEY = f"{LABEL_PREFIX}.build-key"
BUILDAH_LABEL = "io.buildah.version"
FIRST = ("created", "history", "config")  # the config's keys, in the order a reader needs
LAST = ("rootfs",)  # the diff IDs: the layers section says more about them


@dataclass(frozen=True, kw_only=True)
class FileDiff:
    path: str
    fields: tuple[str, ...]  # content, kind, mode, owner, mtime, link, "only in A/B"
    cause: Cause
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class LayerDiff:
    index: int  # 1-based
    a: str  # diff IDs
    b: str
    files: tuple[FileDiff, ...]  # the first ``limit`` differing paths, in A's tar order
    total: int  # how many paths differ in all
    cause: Cause  # the layer's leading cause: the first file's, or order/encoding


@dataclass(frozen=True, kw_only=True)
class Explanation:
    a: str
    b: str
    digests: tuple[str, str]  # the config digests (image IDs): these decide "same"
    manifests: tuple[str, str]  # the manifest digests
    config: tuple[FieldDiff, ...]  # empty where the config digests are equal
    manifest: tuple[FieldDiff, ...]  # only where the config digests are equal
    layers: tuple[LayerDiff, ...]
    causes: tuple[Cause, ...]  # distinct, most telling first

    @property
    def same_config(self) -> bool:
        """One config digest: the same config and, since it names their diff IDs, layers."""
        return self.digests[0] == self.digests[1]

    @property
    def same(self) -> bool:
        """One config and one manifest digest: nothing else makes two images the same."""
        return self.same_config and self.manifests[0] == self.manifests[1]

    def text(self, limit: int = 5) -> str:
        """The report a person reads: causes with fixes, then the first differences."""
        da, db = (d[:19] for d in self.digests)
        if self.same:
            return f"{self.a} and {self.b}: same config and layers (config {da})"
        if self.same_config:
            ma, mb = (m[:19] for m in self.manifests)
            lines = [f"{self.a} vs {self.b}: one config ({da}) and its layers, in two "
                     f"manifests ({ma} vs {mb}):"]  # fmt: skip
        else:
            lines = [f"{self.a} vs {self.b}: the configs differ ({da} vs {db}):"]
        lines += [f"  cause {c.name}: {c.why}; fix: {c.fix}" for c in self.causes]
        lines += self.field_lines(limit)
        for layer in self.layers:
            lines.append(
                f"  layer {layer.index} ({layer.a[:19]} vs {layer.b[:19]}): {layer.total} "
                f"path(s) differ; {layer.cause.name}"
            )
            for f in layer.files[:limit]:
                extra = f"; {f.detail}" if f.detail else ""
                lines.append(f"    /{f.path}: {', '.join(f.fields)} -> {f.cause.name}{extra}")
        return "\n".join(lines)

    def field_lines(self, limit: int = 5) -> list[str]:
        """The differing config (or manifest) fields, each with both values and its cause;
        where none differs, that the bytes do."""
        what, found = ("manifest", self.manifest) if self.same_config else ("config", self.config)
        if not found:
            return [f"  the {what}s differ in bytes only (key order or whitespace): no field does"]
        lines = [f"  {what} {d.field}: {d.a} vs {d.b} -> {d.cause.name}" for d in found[:limit]]
        if len(found) > limit:
            lines.append(f"  ... and {len(found) - limit} more {what} field(s)")
        return lines

    def __str__(self) -> str:
        return self.text()


def engine_of(tree: ImageTree) -> str:
    """The engine that built the image, per its config: buildah's label or BuildKit's history."""
    labels = (tree.config.get("config") or {}).get("Labels") or {}
    if BUILDAH_LABEL in labels:
        return f"buildah {labels[BUILDAH_LABEL]}"
    history = tree.config.get("history") or []
    if any("buildkit" in (h.get("comment") or "") for h in history):
        return "BuildKit"
    return "unknown"


def _label(tree: ImageTree, name: str) -> str | None:
    labels = (tree.config.get("config") or {}).get("Labels") or {}
    value = labels.get(name)
    return None if value is None else str(value)


def bases_of(tree: ImageTree) -> dict[str, str]:
    """The lock's bases, pinned by digest, as the build labelled them."""
    labels = (tree.config.get("config") or {}).get("Labels") or {}
    # Not the manifest's org.opencontainers.image.base.digest: buildah writes the digest of
    # an intermediate image there, which differs between two no-cache builds of one base.
    return {k: v for k, v in labels.items() if k.startswith(BASE_LABEL)}


def layer_diff(index: int, a: Layer, b: Layer, limit: int) -> LayerDiff:
    """Entries of two layers by path; then their order; then their encoding."""
    ea: dict[str, Entry] = {e.path: e for e in a.entries}
    eb: dict[str, Entry] = {e.path: e for e in b.entries}
    order = list(ea) + [p for p in eb if p not in ea]
    files = []
    for path in order:
        x, y = ea.get(path), eb.get(path)
        fields = differing_fields(x, y)
        if fields:
            cause = classify(x, y)
            detail = pyc_detail(x, y) if cause is causes.PYC else ""
            files.append(FileDiff(path=path, fields=fields, cause=cause, detail=detail))
    if files:
        lead = _lead(files)
    elif list(ea) != list(eb):
        lead = causes.FILE_ORDER
    else:
        lead = causes.ENCODING
    return LayerDiff(index=index, a=a.diff_id, b=b.diff_id, files=tuple(files[:limit]),
                     total=len(files), cause=lead)  # fmt: skip


def _lead(files: list[FileDiff]) -> Cause:
    """The first file's cause, unless a more specific one appears (generic ones rank last)."""
    generic = (causes.CONTENT, causes.METADATA, causes.TIMESTAMPS)
    specific = [f.cause for f in files if f.cause not in generic]
    return specific[0] if specific else files[0].cause


def explain(a: ImageTree, b: ImageTree, *, limit: int = 10) -> Explanation:
    """Every difference between two images that matters to their digests, with causes."""
    layers = []
    la, lb = a.layers, b.layers
    for i, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x.diff_id != y.diff_id:
            layers.append(layer_diff(i, x, y, limit))
    same_config = a.config_digest == b.config_digest
    config: tuple[FieldDiff, ...] = ()
    manifest: tuple[FieldDiff, ...] = ()
    if not same_config:
        cause = _config_cause(a, b, {d.index: d.cause for d in layers})
        config = diff(a.config, b.config, cause, first=FIRST, last=LAST)
    elif a.manifest_digest != b.manifest_digest:
        manifest = diff(a.manifest, b.manifest, lambda *_: causes.MANIFEST)
    found = _facts(a, b)
    if len(la) != len(lb):
        found.append(causes.CONTENT)
    for layer in layers:
        found += [layer.cause, *(f.cause for f in layer.files)]
    found += [d.cause for d in (*config, *manifest)]
    if not same_config and not config:
        found.append(causes.CONFIG_BYTES)
    if same_config and a.manifest_digest != b.manifest_digest and not manifest:
        found.append(causes.MANIFEST)
    return Explanation(
        a=a.ref, b=b.ref, digests=(a.config_digest, b.config_digest),
        manifests=(a.manifest_digest, b.manifest_digest), config=config, manifest=manifest,
        layers=tuple(layers), causes=tuple(dict.fromkeys(found)),
    )  # fmt: skip


def _facts(a: ImageTree, b: ImageTree) -> list[Cause]:
    """What outranks any file: a moved base, other lock inputs, another engine or version."""
    found: list[Cause] = []
    if bases_of(a) != bases_of(b):
        found.append(causes.MOVED_BASE)
    fa, fb = _label(a, FINGERPRINT), _label(b, FINGERPRINT)
    if fa != fb:
        found.append(causes.INPUTS)
    # The build key covers the lock inputs plus the engine and its version.
    if engine_of(a) != engine_of(b) or (fa == fb and _label(a, KEY) != _label(b, KEY)):
        found.append(causes.ENGINE)
    return found


def _config_cause(
    a: ImageTree, b: ImageTree, layers: dict[int, Cause]
) -> Callable[[Path, Any, Any], Cause]:
    """The cause of each config field: labels by what they record, a diff ID by its layer's
    cause, the rest by ``causes.field_cause``."""
    inputs = _label(a, FINGERPRINT) != _label(b, FINGERPRINT)
    la, lb = _labels(a), _labels(b)
    changed = [n for n in la if n in lb and la[n] != lb[n]]

    def label(name: str) -> Cause:
        if name.startswith(BASE_LABEL):
            return causes.MOVED_BASE
        if name == FINGERPRINT or (name == KEY and inputs):
            return causes.INPUTS
        return causes.ENGINE if name in (KEY, BUILDAH_LABEL) else causes.CONFIG

    def cause(path: Path, x: Any, y: Any) -> Cause:
        if path[:2] == ("config", "Labels") and len(path) == 3:
            return label(str(path[2]))
        if path[:2] == ("rootfs", "diff_ids") and len(path) == 3:
            return layers.get(int(path[2]), causes.CONTENT)
        if path[:1] == ("history",) and path[-1:] == ("created_by",) and isinstance(x, str):
            # A LABEL step's created_by holds the labels' values: a label's change, not a step's.
            for name in changed:
                x = x.replace(str(la[name]), str(lb[name]))
                if x == y:
                    return label(name)
        return field_cause(path, x, y)

    return cause


def _labels(tree: ImageTree) -> dict[str, Any]:
    return dict((tree.config.get("config") or {}).get("Labels") or {})
