"""The lock: one JSON file that pins every input, loaded into frozen dataclasses.

Loading validates the whole file and fails with the JSON path and the fix,
never with a traceback. Writing is canonical (sorted keys, two-space indent,
trailing newline) and atomic, so a refresh produces a small, reviewable diff.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lockpipe.errors import LockError, UsageError
from lockpipe.fs import read_utf8, write_atomic
from lockpipe.lock.refs import parse_ref
from lockpipe.lock.validate import cross_errors, decode, schema_errors, schema_key
from lockpipe.spelling import hint

Role = Literal["model", "mtp-assistant", "mmproj"]
Format = Literal["gguf", "safetensors", "json"]
Runtime = Literal["vllm", "llama.cpp", "halogen"]
Modality = Literal["text", "vision", "audio"]

DEFAULT_PLATFORM = "linux/amd64"
REFRESH = "run nox -s refresh-digests"
PIN_BY_HAND = (
    "pin it from the publisher's release or file page, or run nox -s refresh-digests -- NAME "
    "(it reads revisions, sizes and hashes from the Hub's API)"
)


@dataclass(frozen=True, kw_only=True)
class Base:
    name: str
    ref: str
    digest: str | None
    platform: str
    platforms: Mapping[str, str] = field(default_factory=dict)  # platform -> child digest
    version_label: str | None = None  # the image's version label when last refreshed

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


@dataclass(frozen=True, kw_only=True)
class Source:
    name: str
    repository: str
    commit: str | None
    url: str | None
    sha256: str | None
    root: str
    tree_sha256: str | None = None  # the extracted tree's hash (lockpipe.refresh.archive)
    follow: str | None = None  # what refresh-digests moves to (docs/refresh.md)

    def missing(self) -> list[str]:
        """What a build needs and the entry lacks. The commit is provenance: the
        archive's sha256 pins the bytes, so a source known only by archive builds."""
        return [k for k in ("url", "sha256") if getattr(self, k) is None]


@dataclass(frozen=True, kw_only=True)
class PayloadFile:
    """One file of a payload, pinned as the Hub's tree lists it."""

    path: str  # inside the repository, forward slashes
    size: int | None = None
    sha256: str | None = None  # LFS files: the sha256 of the bytes
    git_sha1: str | None = None  # files kept in git: sha1(b"blob <size>\0" + bytes)

    def missing(self) -> list[str]:
        """What is not pinned yet: the size, or any hash."""
        out = ["size"] if self.size is None else []
        return out + ([] if self.sha256 or self.git_sha1 else ["sha256 or git_sha1"])


@dataclass(frozen=True, kw_only=True)
class Payload:
    """Files from one repository at one revision: one file, or a whole snapshot folder.

    A single-file payload (``filename`` in the lock) has one entry in ``files``; a
    snapshot (``files`` in the lock) has every file a runtime reads from the folder.
    """

    name: str
    repository: str
    revision: str | None
    files: tuple[PayloadFile, ...]
    snapshot: bool
    role: Role
    format: Format
    expect: Mapping[str, Any] = field(default_factory=dict)
    follow: str = "main"  # the Hub branch refresh-digests follows (docs/refresh.md)

    @classmethod
    def one_file(
        cls, *, filename: str, size: int | None, sha256: str | None, **rest: Any
    ) -> Payload:
        """A single-file payload, as the lock's ``filename``/``size``/``sha256`` give it."""
        f = PayloadFile(path=filename, size=size, sha256=sha256)
        return cls(files=(f,), snapshot=False, **rest)

    @property
    def single(self) -> PayloadFile:
        """The one file of a single-file payload."""
        if self.snapshot:
            raise LockError(f"payloads.{self.name} is a snapshot folder, not one file")
        return self.files[0]

    @property
    def filename(self) -> str:
        return self.single.path

    @property
    def size(self) -> int | None:
        return self.single.size

    @property
    def sha256(self) -> str | None:
        return self.single.sha256

    def missing(self) -> list[str]:
        """Every value a fetch needs and the lock lacks, as lock keys."""
        out = ["revision"] if self.revision is None else []
        if self.snapshot and not self.files:
            return [*out, "files"]
        if not self.snapshot:
            return out + self.single.missing()
        return out + [f"files.{f.path}.{k}" for f in self.files for k in f.missing()]


def _payload(name: str, p: Mapping[str, Any]) -> Payload:
    if "files" in p:
        files = tuple(
            PayloadFile(path=path, size=f.get("size"), sha256=f.get("sha256"),
                        git_sha1=f.get("git_sha1"))
            for path, f in sorted(p["files"].items())
        )  # fmt: skip
        fmt = p.get("format", "safetensors")
    else:
        files = (PayloadFile(path=p["filename"], size=p.get("size"), sha256=p.get("sha256")),)
        # the suffix in any case: ".GGUF" is a GGUF file, and its checks apply
        fmt = p.get("format", Path(p["filename"]).suffix.lstrip(".").lower())
    return Payload(
        name=name, repository=p["repository"], revision=p.get("revision"), files=files,
        snapshot="files" in p, role=p["role"], format=fmt, expect=p.get("expect", {}),
        follow=p.get("follow", "main"),
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Serve:
    runtime: Runtime
    command: tuple[str, ...]  # empty only for an external image: its own entrypoint runs
    port: int
    env: Mapping[str, str] = field(default_factory=dict)  # the serving container's
    context: int | None = None
    parallel: int | None = None
    kv_dtype: str | None = None
    model: str | None = None
    modalities: tuple[Modality, ...] = ("text",)  # what it serves; vision/audio need an mmproj


@dataclass(frozen=True, kw_only=True)
class External:
    """An image built elsewhere, served as it is: ``image`` (no tag) pinned by ``digest``."""

    image: str
    digest: str | None

    def pinned(self, where: str) -> str:
        """``image@digest``; a LockError naming ``where`` and how to pin an absent digest."""
        if self.digest is None:
            raise LockError(unpinned(where, self.image))
        return f"{self.image}@{self.digest}"


def unpinned(where: str, image: str) -> str:
    """The message for an external image whose digest the lock lacks."""
    return (
        f"{where}.external.digest is absent: unpinned: run `podman image inspect --format "
        f"{{{{.Digest}}}} {image}` on the host whose local storage holds it and put it in "
        "the lock (it was built elsewhere; no reachable source knows its digest)"
    )


@dataclass(frozen=True, kw_only=True)
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
    # An image built elsewhere: nothing to build, fingerprint or fetch (context, tag,
    # bases, … are then empty); see External.
    external: External | None = None


@dataclass(frozen=True, kw_only=True)
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
            near = hint(name, self.targets)
            raise UsageError(f"{self.path}: no target {name!r}{near} (targets: {known})")
        return self.targets[name]


def checkout_root(lock_path: Path) -> Path:
    """The nearest folder above the lock that holds ``images/`` (for ``locks/digests.json``:
    the checkout); the lock's grandparent when none does."""
    here = lock_path.resolve().parent
    for folder in (here, *here.parents):
        if (folder / "images").is_dir():
            return folder
    return here.parent


def parse_lock(doc: Any, path: Path, root: Path | None = None, *, schema_ok: bool = False) -> Lock:
    """Validate a decoded lock document and return it as dataclasses.

    ``schema_ok``: these exact bytes already passed this schema (see load_lock).
    """
    root = root or checkout_root(path)
    errors = [] if schema_ok else schema_errors(doc)
    if not errors:
        errors = cross_errors(doc, root)
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
            n: Base(
                name=n,
                ref=b["ref"],
                digest=b.get("digest"),
                platform=b.get("platform", DEFAULT_PLATFORM),
                platforms=dict(b.get("platforms", {})),
                version_label=b.get("version_label"),
            )
            for n, b in doc["bases"].items()
        },
        pip={n: PipFile(n, p["file"], p["sha256"]) for n, p in doc.get("pip", {}).items()},
        sources={
            n: Source(
                name=n,
                repository=x["repository"],
                commit=x.get("commit"),
                url=x.get("url"),
                sha256=x.get("sha256"),
                root=x.get("root", ""),
                tree_sha256=x.get("tree_sha256"),
                follow=x.get("follow"),
            )
            for n, x in doc.get("sources", {}).items()
        },
        payloads={n: _payload(n, p) for n, p in doc.get("payloads", {}).items()},
        targets={
            n: Target(
                name=n,
                context=t.get("context", ""),
                dockerfile=t.get("dockerfile", "" if "external" in t else "Dockerfile"),
                tag=t.get("tag", t.get("external", {}).get("image", "")),
                bases=dict(t.get("bases", {})),
                source=t.get("source"),
                pip=tuple(t.get("pip", [])),
                payloads=tuple(t.get("payloads", [])),
                build_args=dict(t.get("build_args", {})),
                serve=Serve(
                    **{
                        **t["serve"],
                        "command": tuple(t["serve"].get("command", ())),
                        "env": dict(t["serve"].get("env", {})),
                        "modalities": tuple(t["serve"].get("modalities", ["text"])),
                    }
                ),
                allow_copy=t.get("allow_copy", True),
                external=External(image=t["external"]["image"], digest=t["external"].get("digest"))
                if "external" in t
                else None,
            )
            for n, t in s.items()
        },
        fingerprints=dict(doc.get("fingerprints", {})),
        document=doc,
    )


def load_lock(path: Path) -> Lock:
    """Read and validate the lock at ``path``."""
    try:
        text = read_utf8(path, LockError)
    except FileNotFoundError:
        raise LockError(
            f"{path}: no lock file here"
            + (" or in any folder above" if not path.is_absolute() else "")
            + "; run lockpipe inside a checkout, pass --lock PATH or set LOCKPIPE_LOCK"
        ) from None
    except OSError as exc:
        raise LockError(f"{path}: cannot read the lock ({exc.strerror})") from None
    doc = decode(text, path)
    root = checkout_root(path)
    # jsonschema costs a tenth of a second to import: a lock whose exact bytes passed
    # this exact schema before is not validated again (the cross-checks always run).
    marker = root / ".lockpipe" / "valid-locks" / schema_key(text)
    lock = parse_lock(doc, path, root, schema_ok=marker.is_file())
    with contextlib.suppress(OSError):  # a read-only checkout just validates every time
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return lock


def dump_lock(doc: Mapping[str, Any]) -> str:
    """The canonical text of a lock document."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_lock(path: Path, doc: Mapping[str, Any]) -> None:
    """Validate ``doc`` and write it canonically and atomically to ``path``."""
    parse_lock(doc, path)
    write_atomic(path, dump_lock(doc))
