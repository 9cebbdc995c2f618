"""Literal locks for tests: a tiny repository with one target, built in a tmp folder."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import dump_lock, load_lock, parse_lock

if TYPE_CHECKING:
    from lockpipe.engines.base import Engine

DIGEST = "sha256:" + "ab" * 32
DOCKERFILE = """\
ARG BASE
FROM ${BASE}
RUN echo built > /built.txt
"""

DOC: dict[str, Any] = {
    "version": 1,
    "source_date_epoch": 1700000000,
    "bases": {
        "busybox": {"ref": "127.0.0.1:5000/lockpipe-test/busybox:1", "digest": DIGEST},
    },
    "targets": {
        "app": {
            "context": "images/app",
            "tag": "localhost/lockpipe-test/app:1",
            "bases": {"BASE": "busybox"},
            "build_args": {"GREETING": "hello"},
            "serve": {"runtime": "llama.cpp", "command": ["true"], "port": 8080},
        }
    },
}


def doc(**changes: Any) -> dict[str, Any]:
    """A deep copy of DOC with top-level keys replaced."""
    out = copy.deepcopy(DOC)
    out.update(changes)
    return out


def make_repo(
    root: Path,
    document: dict[str, Any] | None = None,
    dockerfile: str = DOCKERFILE,
    relocked: bool = True,
) -> Path:
    """Write images/app/Dockerfile and locks/digests.json under ``root``; return the lock path."""
    document = copy.deepcopy(DOC if document is None else document)
    for target in document["targets"].values():
        ctx = root / target["context"]
        ctx.mkdir(parents=True, exist_ok=True)
        (ctx / "Dockerfile").write_text(dockerfile)
    path = root / "locks" / "digests.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_lock(document))
    if relocked:
        path.write_text(dump_lock(relock(load_lock(path))))
    return path


def reparse(path: Path, mutate: Any) -> Any:
    """Parse the lock at ``path`` after ``mutate(document)`` edits a copy of it."""
    document = json.loads(path.read_text())
    mutate(document)
    return parse_lock(document, path)


def on_base(base: tuple[str, str], tag: str | None = None) -> dict[str, Any]:
    """DOC's app target FROM ``base`` (ref, digest: the loopback registry's busybox), tagged
    ``tag`` where given."""
    document = doc()
    document["bases"]["busybox"] = {"ref": base[0], "digest": base[1]}
    if tag is not None:
        document["targets"]["app"]["tag"] = tag
    return document


def usable_engine(name: str) -> Engine:
    """The engine ``name``; the test skips (fails on CI) where it is not usable."""
    from lockpipe.engines import get_engine
    from lockpipe.errors import EngineMissing
    from tests.policy import unavailable

    try:
        return get_engine(name)
    except EngineMissing as exc:
        unavailable(f"engine {name} is not usable: {exc}")


def buildah_built(root: Path, base: tuple[str, str], tag: str) -> tuple[Path, Path]:
    """The repository of :func:`make_repo` FROM ``base`` (ref, digest), its app target
    built with buildah as ``tag``; (lock, state folder). Skips (fails on CI) without buildah."""
    from lockpipe.imagebuild.run import Settings, build_target

    engine = usable_engine("buildah")
    lock = make_repo(root, on_base(base, tag))
    state = root / "state"
    build_target(load_lock(lock), "app", engine, Settings(state=state, cache=root / "c"))
    return lock, state
