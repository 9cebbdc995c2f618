"""Provenance: an in-toto Statement v1 with a SLSA provenance v1 predicate, per build.

It is a pure function of the build plan, the build record and the pip files'
contents, so the same record always yields the same bytes (no host name, no
clock read here), and ``publish`` can re-derive it for any current record. It
is not the same for two builds of one key: ``runDetails.metadata.finishedOn``
is the record's ``built_at``, the one per-invocation field. SLSA's
``invocationId`` (an ID to find this invocation's logs by) is omitted, as
lockpipe keeps no such log; the build key, which is the same for every build
of the same inputs, is ``internalParameters.buildKey``. It lives in ``build``
because every build writes one (:func:`record_build` writes it beside the
record); ``publish`` attaches it to the pushed image as a referrer.

At build time the subject is the local image (named by its tag, digested by
its image ID, i.e. the config digest); ``publish`` makes it the pushed
manifest. The image ID stays in ``runDetails.byproducts`` either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe import __version__
from lockpipe.errors import LockError
from lockpipe.fs import read_utf8, write_atomic
from lockpipe.imagebuild.plan import BuildPlan
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.lock.model import Lock

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://slsa.dev/provenance/v1"
BUILD_TYPE = "urn:lockpipe:build:v1"  # what externalParameters mean: a lock target, built
MEDIA_TYPE = "application/vnd.in-toto+json"
_HASH = re.compile(r"--hash[= ](sha256:[0-9a-f]{64})")


@dataclass(frozen=True, kw_only=True)
class PipInput:
    """A hash-pinned requirements file: the lock entry, its sha256 and each line's hashes."""

    name: str
    file: str
    sha256: str
    requirements: tuple[tuple[str, tuple[str, ...]], ...]  # "pkg==1.0" -> ("sha256:…", …)


def parse_requirements(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``pkg==ver --hash=sha256:…`` lines (backslash continuations joined), sorted by name."""
    joined = re.sub(r"\\\s*\n", " ", text)
    out = {}
    for line in joined.splitlines():
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("--") else ""
        if not line:
            continue
        spec = line.split()[0].split(";")[0]
        out[spec] = tuple(sorted(_HASH.findall(line)))
    return tuple(sorted(out.items()))


def read_pip(lock: Lock, plan: BuildPlan) -> tuple[PipInput, ...]:
    """The target's pip entries with the hashes inside each file (the file's sha256 is the
    lock's, which the drift check before every build has just confirmed)."""
    out = []
    for name in lock.target(plan.target).pip:
        pip = lock.pip[name]
        try:
            text = read_utf8(lock.root / pip.file, LockError)
        except OSError as exc:
            raise LockError(f"pip.{name}: cannot read {pip.file} ({exc}); restore it") from None
        out.append(PipInput(name=name, file=pip.file, sha256=pip.sha256,
                            requirements=parse_requirements(text)))  # fmt: skip
    return tuple(out)


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def _dependencies(plan: BuildPlan, record: BuildRecord, pip: tuple[PipInput, ...]) -> list[Any]:
    deps: list[dict[str, Any]] = []
    for name, pinned in plan.bases:
        deps.append({"name": f"bases.{name}", "uri": f"oci://{pinned}",
                     "digest": {"sha256": _hex(pinned.rpartition("@")[2])}})  # fmt: skip
    for p in pip:
        hashes = {spec: list(h) for spec, h in p.requirements}
        deps.append({"name": f"pip.{p.name}", "uri": f"file:{p.file}",
                     "digest": {"sha256": p.sha256},
                     "annotations": {"requirements": hashes}})  # fmt: skip
    if plan.source is not None:
        src = plan.source
        digest = {"sha256": src.sha256, **({"gitCommit": src.commit} if src.commit else {})}
        deps.append({"name": f"sources.{src.name}", "uri": src.url, "digest": digest})
    for path, sha in plan.files:
        deps.append({"name": f"context:{path}", "uri": f"file:{plan.context.name}/{path}",
                     "digest": {"sha256": sha}})  # fmt: skip
    deps.append({"name": f"engine:{record.engine}", "uri": f"urn:lockpipe:engine:{record.engine}",
                 "annotations": {"version": record.engine_version}})  # fmt: skip
    return deps


def statement(
    plan: BuildPlan,
    record: BuildRecord,
    pip: tuple[PipInput, ...],
    *,
    subject: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The statement for ``record``, built from ``plan``; ``subject`` is (name, digest),
    by default the local image (tag, image ID)."""
    if record.target != plan.target:
        raise ValueError(f"record of {record.target} given with the plan of {plan.target}")
    name, digest = subject or (record.tag, record.image_id)
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": _hex(digest)}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "target": plan.target,
                    "tag": plan.tag,
                    "dockerfile": plan.dockerfile,
                    "platform": plan.platform,
                    "sourceDateEpoch": plan.timestamp,
                    "buildArgs": dict(plan.build_args),
                    "labels": dict(plan.labels),
                },
                "internalParameters": {
                    "buildKey": record.key,
                    "engine": record.engine,
                    "engineVersion": record.engine_version,
                    "fingerprint": record.fingerprint,
                    "reproducible": record.reproducible,
                    "reproducibleHow": record.reproducible_how,
                },
                "resolvedDependencies": _dependencies(plan, record, pip),
            },
            "runDetails": {
                "builder": {
                    "id": f"urn:lockpipe:{record.engine}",
                    "version": {"lockpipe": __version__, record.engine: record.engine_version},
                },
                "metadata": {"finishedOn": record.built_at},
                "byproducts": [{"name": "image-id", "digest": {"sha256": _hex(record.image_id)}}],
            },
        },
    }


def dumps(doc: Mapping[str, Any]) -> bytes:
    """Canonical bytes: the blob digest of a statement depends on its content only."""
    return (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()


def provenance_path(state: Path, engine: str, target: str) -> Path:
    return state / "provenance" / engine / f"{target}.intoto.json"


def write_provenance(state: Path, doc: Mapping[str, Any]) -> Path:
    params = doc["predicate"]["buildDefinition"]
    internal, external = params["internalParameters"], params["externalParameters"]
    path = provenance_path(state, internal["engine"], external["target"])
    write_atomic(path, dumps(doc).decode())
    return path


def record_build(state: Path, lock: Lock, plan: BuildPlan, record: BuildRecord) -> Path:
    """Write ``record`` and its provenance together, so the provenance file always describes
    the record beside it (every path that keeps a build uses this); the record's path."""
    path = write_record(state, record)
    write_provenance(state, statement(plan, record, read_pip(lock, plan)))
    return path
