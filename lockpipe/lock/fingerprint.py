"""Pure hashing of what determines a build: the drift check's checksum.

The lock stores one fingerprint per target over its context files
(Dockerfile, requirement files), its build config and the lock entries it
builds from. A Dockerfile edited without ``nox -s lock`` is caught before any
engine runs, as apko's config checksum does.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from lockpipe.errors import DriftError, LockError
from lockpipe.fs import sha256_file
from lockpipe.lock.model import Lock, Target, parse_lock
from lockpipe.lock.validate import LEFT_OUT  # the lock's checks refuse a dockerfile there

RELOCK = "review the change, then run nox -s lock"
SERVING = ("serve", "payloads")  # target keys that say how to run the image, not build it


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device"}  # fmt: skip


def _entry(path: Path, top: Path, root: Path) -> os.stat_result:
    """The stat of ``path`` (links followed), or LockError naming it: dangling or looping,
    no file or folder, or a link out of the context (``root``: ``top`` resolved)."""
    try:
        st = os.stat(path)
    except OSError as exc:  # a dangling link, or one that loops
        raise LockError(
            f"{path}: cannot be staged into the build context ({exc.strerror}); fix or delete it"
        ) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise LockError(
            f"{path}: {kind} in the build context; only files, folders and links to "
            f"them can be staged: move it out of {top} or delete it"
        )
    if path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(root):
        raise LockError(
            f"{path}: a link to {os.path.realpath(path)}, outside the build context {top}; "
            "another checkout would not have what it points to: copy it into the context"
        )
    return st


def context_paths(top: Path) -> list[str]:
    """Every file of the build context ``top``, relative and sorted: what the fingerprint
    hashes, the build key counts and staging copies (one list, so they cannot disagree).

    Links are followed where they stay inside the context (a linked folder's files are
    listed under the link's name); one that leaves it, dangles or loops, and a FIFO,
    socket or device, is a LockError naming it. ``__pycache__`` is left out."""
    if not top.is_dir():
        return []
    root = top.resolve()
    out: list[str] = []
    st = os.stat(top)
    todo: list[tuple[Path, str, tuple[tuple[int, int], ...]]] = [
        (top, "", ((st.st_dev, st.st_ino),))
    ]
    while todo:
        folder, rel, above = todo.pop()
        for name in sorted(os.listdir(folder)):
            if name in LEFT_OUT:
                continue
            path, sub = folder / name, f"{rel}{name}"
            st = _entry(path, top, root)
            if stat.S_ISREG(st.st_mode):
                out.append(sub)
                continue
            if (st.st_dev, st.st_ino) in above:
                raise LockError(
                    f"{path}: a link to {os.path.realpath(path)}, a folder that holds it, so "
                    "the build context would never end; delete the link"
                )
            todo.append((path, f"{sub}/", (*above, (st.st_dev, st.st_ino))))
    return sorted(out)


def context_files(lock: Lock, target: Target) -> dict[str, str]:
    """Relative path → sha256 for every file in the target's context folder
    (:func:`context_paths`; a link's target's content)."""
    top = lock.root / target.context
    return {rel: sha256_file(top / rel) for rel in context_paths(top)}


def _pins(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry without its ``origin``: where a value was found is not a build input."""
    return {k: v for k, v in entry.items() if k != "origin"}


def _entries(lock: Lock, target: Target) -> dict[str, Any]:
    doc = lock.document
    used: dict[str, Any] = {
        "bases": {b: _pins(doc["bases"][b]) for b in target.bases.values()},
        "pip": {p: _pins(doc["pip"][p]) for p in target.pip},
    }
    if target.source:
        used["sources"] = {target.source: _pins(doc["sources"][target.source])}
    return used


def fingerprint(lock: Lock, target: Target) -> str:
    """sha256 over the context files, the target's build config and the entries it builds from.

    How the image is served (``serve``, ``payloads``) is left out: it does not change
    the image, so editing it neither needs a relock nor triggers a rebuild.
    """
    build_config = {
        k: v for k, v in lock.document["targets"][target.name].items() if k not in SERVING
    }
    material = {
        "files": context_files(lock, target),
        "target": build_config,
        "entries": _entries(lock, target),
        "source_date_epoch": lock.source_date_epoch,
    }
    blob = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _digest(material: object) -> str:
    blob = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def served(lock: Lock, target: Target) -> dict[str, str]:
    """What a smoke run of ``target`` served, as two sha256 digests: ``serve`` (its serve
    section as the lock parses it: command, env, port, runtime, model, …) and ``payloads``
    (each payload it mounts: name, repository, revision, every file's path, size and hash).

    The fingerprint leaves both out (they do not change the image), so smoke records these
    and deploy's gate compares them with the lock's now (docs/deploy.md)."""
    serve = {f.name: _plain(getattr(target.serve, f.name)) for f in fields(target.serve)}
    if target.serve.env and target.external is None:
        # A built target's env reaches its container since 825335d; a run before it served
        # without, so its digest is not this one and deploy asks for that run again.
        serve["env_given"] = True
    payloads = {}
    for name in target.payloads:
        p = lock.payloads[name]
        files = [
            {"path": f.path, "size": f.size, "sha256": f.sha256, "git_sha1": f.git_sha1}
            for f in p.files
        ]
        payloads[name] = {"repository": p.repository, "revision": p.revision,
                          "snapshot": p.snapshot, "files": files}  # fmt: skip
    return {"serve": _digest(serve), "payloads": _digest(payloads)}


def check_pip(lock: Lock, target: Target) -> None:
    """Each hash-pinned requirements file still has the sha256 the lock records."""
    for name in target.pip:
        pip = lock.pip[name]
        actual = sha256_file(lock.root / pip.file)
        if actual != pip.sha256:
            raise DriftError(
                f"pip.{name}: {pip.file} has sha256 {actual}, the lock says {pip.sha256}; {RELOCK}"
            )


def check_drift(lock: Lock, target: Target) -> None:
    """Raise DriftError if the target's inputs changed since the lock was written.

    An external target has no inputs here, so it cannot drift (callers note the skip)."""
    if target.external is not None:
        return
    check_pip(lock, target)
    recorded = lock.fingerprints.get(target.name)
    if recorded is None:
        raise DriftError(f"{lock.path}: fingerprints.{target.name} is missing; run nox -s lock")
    if recorded != fingerprint(lock, target):
        raise DriftError(
            f"fingerprints.{target.name}: {target.context}/ (Dockerfile or files), the target's "
            f"config or its lock entries changed since {lock.path} was written; {RELOCK}"
        )


def relock(lock: Lock) -> dict[str, Any]:
    """A copy of the lock document with pip hashes and fingerprints brought up to date."""
    doc: dict[str, Any] = json.loads(json.dumps(lock.document))
    for name, pip in lock.pip.items():
        doc["pip"][name]["sha256"] = sha256_file(lock.root / pip.file)
    lock = parse_lock(doc, lock.path, lock.root)
    # An external image is built elsewhere: nothing here determines it.
    doc["fingerprints"] = {
        n: fingerprint(lock, t) for n, t in sorted(lock.targets.items()) if t.external is None
    }
    if not doc["fingerprints"]:
        raise LockError(f"{lock.path}: no targets to fingerprint")
    return doc
