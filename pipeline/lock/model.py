"""The lock: one JSON file that pins every input, loaded into frozen dataclasses.

Loading validates the whole file and fails with the JSON path and the fix,
never with a traceback. Writing is canonical (sorted keys, two-space indent,
trailing newline) and atomic, so a refresh produces a small, reviewable diff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from pipeline.errors import LockError, UsageError
from pipeline.fs import write_atomic
from pipeline.lock.refs import ReferenceError, parse_ref
from pipeline.lock.schema import LOCK_SCHEMA

DEFAULT_LOCK = Path("locks/digests.json")
DEFAULT_PLATFORM = "linux/amd64"
REFRESH = "run nox -s refresh-digests"
# refresh-digests re-resolves base images; sources and payloads are pinned by hand for now.
PIN_BY_HAND = (
    "pin it from the publisher's release or file page (nox -s refresh-digests covers "
    "base images only, for now)"
)
_PATTERN_HINTS = {
    "^sha256:[0-9a-f]{64}$": "must be 'sha256:' and 64 lowercase hex digits",
    "^[0-9a-f]{64}$": "must be 64 lowercase hex digits (a sha256)",
    "^[0-9a-f]{40}$": "must be a full 40-hex-digit commit",
}


@dataclass(frozen=True)
class Base:
    name: str
    ref: str
    digest: str | None
    platform: str

    def pinned(self, where: str) -> str:
        """``ref@digest``; a LockError naming ``where`` if the digest is unknown."""
        if self.digest is None:
            raise LockError(f"{where}: {self.ref!r} has no digest; {REFRESH}")
        return parse_ref(self.ref).pinned(self.digest)


@dataclass(frozen=True)
class PipFile:
    name: str
    file: str
    sha256: str


@dataclass(frozen=True)
class Source:
    name: str
    repository: str
    commit: str | None
    url: str | None
    sha256: str | None
    root: str

    def missing(self) -> list[str]:
        """What a build needs and the entry lacks. The commit is provenance: the
        archive's sha256 pins the bytes, so a source known only by archive builds."""
        return [k for k in ("url", "sha256") if getattr(self, k) is None]


@dataclass(frozen=True)
class Payload:
    name: str
    repository: str
    revision: str | None
    filename: str
    size: int | None
    sha256: str | None
    role: str
    format: str
    expect: Mapping[str, Any] = field(default_factory=dict)

    def missing(self) -> list[str]:
        return [k for k in ("revision", "size", "sha256") if getattr(self, k) is None]


@dataclass(frozen=True)
class Serve:
    runtime: str
    command: tuple[str, ...]
    port: int
    context: int | None = None
    parallel: int | None = None
    kv_dtype: str | None = None
    model: str | None = None
    modalities: tuple[str, ...] = ("text",)  # what it serves; vision/audio need an mmproj


@dataclass(frozen=True)
class Target:
    name: str
    context: str
    dockerfile: str
    tag: str
    bases: Mapping[str, str]
    source: str | None
    pip: tuple[str, ...]
    payloads: tuple[str, ...]
    build_args: Mapping[str, str]
    serve: Serve
    allow_copy: bool = True


@dataclass(frozen=True)
class Lock:
    path: Path
    root: Path
    source_date_epoch: int
    bases: Mapping[str, Base]
    pip: Mapping[str, PipFile]
    sources: Mapping[str, Source]
    payloads: Mapping[str, Payload]
    targets: Mapping[str, Target]
    fingerprints: Mapping[str, str]
    document: Mapping[str, Any]

    def target(self, name: str) -> Target:
        if name not in self.targets:
            known = ", ".join(sorted(self.targets)) or "none"
            raise UsageError(f"{self.path}: no target {name!r} (targets: {known})")
        return self.targets[name]


def _json_path(parts: Any) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _schema_errors(doc: Any) -> list[str]:
    validator = jsonschema.Draft202012Validator(LOCK_SCHEMA)
    out = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        msg = err.message
        if err.validator == "pattern":
            msg = f"{err.instance!r} {_PATTERN_HINTS.get(str(err.validator_value), msg)}"
        elif err.validator == "additionalProperties" and err.path:
            msg = f"{msg} (check the spelling against README.md's lock fields)"
        out.append(f"{_json_path(err.absolute_path)}: {msg}")
    return out


def _cross_errors(doc: dict[str, Any], root: Path) -> list[str]:
    out = []
    for name, base in doc["bases"].items():
        try:
            ref = parse_ref(base["ref"])
        except ReferenceError as exc:
            out.append(f"bases.{name}.ref: {exc}")
            continue
        if ref.digest:
            out.append(f"bases.{name}.ref: put the digest in bases.{name}.digest, not in the ref")
        if ref.tag in (None, "latest"):
            out.append(f"bases.{name}.ref: {base['ref']!r} needs a tag other than 'latest'")
    for name, pip in doc.get("pip", {}).items():
        if not (root / pip["file"]).is_file():
            out.append(f"pip.{name}.file: {pip['file']} does not exist under {root}")
    tables = {"bases": "bases", "source": "sources", "pip": "pip", "payloads": "payloads"}
    for tname, target in doc["targets"].items():
        if not (root / target["context"] / target.get("dockerfile", "Dockerfile")).is_file():
            out.append(
                f"targets.{tname}.context: no Dockerfile in {root / target['context']} (paths "
                "are relative to the nearest folder above the lock that holds images/)"
            )
        for key, table in tables.items():
            value = target.get(key)
            used = value.values() if isinstance(value, dict) else value
            used = [used] if isinstance(used, str) else used or []
            out += [
                f"targets.{tname}.{key}: {u!r} is not in {table}; add it or fix the name"
                for u in used
                if u not in doc.get(table, {})
            ]
    return out


def checkout_root(lock_path: Path) -> Path:
    """The nearest folder above the lock that holds ``images/`` (for ``locks/digests.json``:
    the checkout); the lock's grandparent when none does."""
    here = lock_path.resolve().parent
    for folder in (here, *here.parents):
        if (folder / "images").is_dir():
            return folder
    return here.parent


def parse_lock(doc: Any, path: Path, root: Path | None = None) -> Lock:
    """Validate a decoded lock document and return it as dataclasses."""
    root = root or checkout_root(path)
    errors = _schema_errors(doc)
    if not errors:
        errors = _cross_errors(doc, root)
    if errors:
        shown = "\n  ".join(errors[:12])
        more = f"\n  … and {len(errors) - 12} more" if len(errors) > 12 else ""
        raise LockError(f"{path} is not a valid lock:\n  {shown}{more}")
    s = doc["targets"]
    return Lock(
        path=path,
        root=root,
        source_date_epoch=doc["source_date_epoch"],
        bases={
            n: Base(n, b["ref"], b.get("digest"), b.get("platform", DEFAULT_PLATFORM))
            for n, b in doc["bases"].items()
        },
        pip={n: PipFile(n, p["file"], p["sha256"]) for n, p in doc.get("pip", {}).items()},
        sources={
            n: Source(
                n,
                x["repository"],
                x.get("commit"),
                x.get("url"),
                x.get("sha256"),
                x.get("root", ""),
            )
            for n, x in doc.get("sources", {}).items()
        },
        payloads={
            n: Payload(
                n,
                p["repository"],
                p.get("revision"),
                p["filename"],
                p.get("size"),
                p.get("sha256"),
                p["role"],
                p.get("format", Path(p["filename"]).suffix.lstrip(".")),
                p.get("expect", {}),
            )
            for n, p in doc.get("payloads", {}).items()
        },
        targets={
            n: Target(
                name=n,
                context=t["context"],
                dockerfile=t.get("dockerfile", "Dockerfile"),
                tag=t["tag"],
                bases=dict(t["bases"]),
                source=t.get("source"),
                pip=tuple(t.get("pip", [])),
                payloads=tuple(t.get("payloads", [])),
                build_args=dict(t.get("build_args", {})),
                serve=Serve(
                    **{
                        **t["serve"],
                        "command": tuple(t["serve"]["command"]),
                        "modalities": tuple(t["serve"].get("modalities", ["text"])),
                    }
                ),
                allow_copy=t.get("allow_copy", True),
            )
            for n, t in s.items()
        },
        fingerprints=dict(doc.get("fingerprints", {})),
        document=doc,
    )


def load_lock(path: Path = DEFAULT_LOCK) -> Lock:
    """Read and validate the lock at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockError(
            f"{path}: no lock file here; pass --lock PATH or set PIPELINE_LOCK"
        ) from None
    except OSError as exc:
        raise LockError(f"{path}: cannot read the lock ({exc.strerror})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LockError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
            "fix it by hand or restore it with git checkout"
        ) from None
    return parse_lock(doc, path)


def dump_lock(doc: Mapping[str, Any]) -> str:
    """The canonical text of a lock document."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_lock(path: Path, doc: Mapping[str, Any]) -> None:
    """Validate ``doc`` and write it canonically and atomically to ``path``."""
    parse_lock(doc, path)
    write_atomic(path, dump_lock(doc))
