"""Compare two images down to the file and name a known cause with its fix.

Pure: it takes two :class:`ImageTree` values (read by ``tree.py``) and returns
a frozen report. The config is compared field by field (created, history,
env, labels, entrypoint, cmd); the layers pairwise by diff ID; within a
differing layer, entries by path (content, mode, owner, mtime, link), then
their order, then, with equal entries in equal order, the tar encoding.
Before any file, two facts outrank the rest: a base that moved (a refresh
happened between the builds) and another engine or engine version.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lockpipe.imagebuild.plan import LABEL_PREFIX
from lockpipe.verify import causes
from lockpipe.verify.causes import Cause, classify, differing_fields, pyc_detail
from lockpipe.verify.tree import Entry, ImageTree, Layer

BASE_LABEL = f"{LABEL_PREFIX}.base."
FINGERPRINT = f"{LABEL_PREFIX}.fingerprint"
KEY = f"{LABEL_PREFIX}.build-key"
BUILDAH_LABEL = "io.buildah.version"
CONFIG_FIELDS = ("Env", "Labels", "Entrypoint", "Cmd", "WorkingDir", "User", "ExposedPorts")


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
class ConfigDiff:
    field: str
    a: str
    b: str


@dataclass(frozen=True, kw_only=True)
class Explanation:
    a: str
    b: str
    config: tuple[ConfigDiff, ...]
    layers: tuple[LayerDiff, ...]
    causes: tuple[Cause, ...]  # distinct, most telling first

    @property
    def same(self) -> bool:
        return not self.config and not self.layers

    def text(self, limit: int = 5) -> str:
        """The report a person reads: causes with fixes, then the first differing files."""
        if self.same:
            return f"{self.a} and {self.b}: same config and layers"
        lines = [f"{self.a} vs {self.b}:"]
        for c in self.causes:
            lines.append(f"  cause {c.name}: {c.why}; fix: {c.fix}")
        for d in self.config[:limit]:
            lines.append(f"  config {d.field}: {d.a} vs {d.b}")
        for layer in self.layers:
            lines.append(
                f"  layer {layer.index} ({layer.a[:19]} vs {layer.b[:19]}): {layer.total} "
                f"path(s) differ; {layer.cause.name}"
            )
            for f in layer.files[:limit]:
                extra = f"; {f.detail}" if f.detail else ""
                lines.append(f"    /{f.path}: {', '.join(f.fields)} -> {f.cause.name}{extra}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def config_diffs(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[ConfigDiff, ...]:
    """created, each history entry's created/created_by, and the runtime config fields."""
    out = []
    if a.get("created") != b.get("created"):
        out.append(
            ConfigDiff(field="created", a=_short(a.get("created")), b=_short(b.get("created")))
        )
    ha, hb = a.get("history") or [], b.get("history") or []
    if len(ha) != len(hb):
        out.append(ConfigDiff(field="history", a=f"{len(ha)} steps", b=f"{len(hb)} steps"))
    for i, (x, y) in enumerate(zip(ha, hb, strict=False), 1):
        for key in ("created", "created_by"):
            if x.get(key) != y.get(key):
                out.append(ConfigDiff(field=f"history[{i}].{key}", a=_short(x.get(key)),
                                      b=_short(y.get(key))))  # fmt: skip
    ca, cb = a.get("config") or {}, b.get("config") or {}
    for key in CONFIG_FIELDS:
        if key == "Labels":
            la, lb = ca.get(key) or {}, cb.get(key) or {}
            for name in sorted(set(la) | set(lb)):
                if la.get(name) != lb.get(name):
                    out.append(ConfigDiff(field=f"label {name}", a=_short(la.get(name, "(none)")),
                                          b=_short(lb.get(name, "(none)"))))  # fmt: skip
        elif ca.get(key) != cb.get(key):
            out.append(ConfigDiff(field=key, a=_short(ca.get(key)), b=_short(cb.get(key))))
    return tuple(out)


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
    config = config_diffs(a.config, b.config)
    layers = []
    la, lb = a.layers, b.layers
    for i, (x, y) in enumerate(zip(la, lb, strict=False), 1):
        if x.diff_id != y.diff_id:
            layers.append(layer_diff(i, x, y, limit))
    found: list[Cause] = []
    if bases_of(a) != bases_of(b):
        found.append(causes.MOVED_BASE)
    fa, fb = _label(a, FINGERPRINT), _label(b, FINGERPRINT)
    if fa != fb:
        found.append(causes.INPUTS)
    # The build key covers the lock inputs plus the engine and its version.
    if engine_of(a) != engine_of(b) or (fa == fb and _label(a, KEY) != _label(b, KEY)):
        found.append(causes.ENGINE)
    if len(la) != len(lb):
        found.append(causes.CONTENT)
    for layer in layers:
        found += [layer.cause, *(f.cause for f in layer.files)]
    if config and not layers and len(la) == len(lb):
        if _times_only(config):
            found.append(causes.CONFIG_TIMES)
        elif not found:
            found.append(causes.CONTENT)
    distinct = tuple(dict.fromkeys(found))
    return Explanation(a=a.ref, b=b.ref, config=config, layers=tuple(layers), causes=distinct)


def _times_only(config: tuple[ConfigDiff, ...]) -> bool:
    return all(d.field == "created" or d.field.endswith(".created") for d in config)
