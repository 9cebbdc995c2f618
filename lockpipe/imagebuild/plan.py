"""Pure planning: a lock target becomes a frozen BuildPlan, touching nothing.

The plan holds every build arg and label an engine will be given, so the
same plan renders identically whichever engine later runs it, and the unit
tests check it from a literal lock.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from lockpipe.errors import LockError
from lockpipe.lock.fingerprint import context_files, fingerprint
from lockpipe.lock.model import PIN_BY_HAND, Lock, Payload, PayloadFile, Serve, Target, unpinned
from lockpipe.log import echo
from lockpipe.payloads.contract import unmet

LABEL_PREFIX = "io.github.lockpipe"
SOURCE_ARCHIVE = "source.tar.gz"


@dataclass(frozen=True, kw_only=True)
class SourceFetch:
    """A source archive the pipeline fetches, checks and puts into the build context."""

    name: str
    url: str
    sha256: str
    commit: str | None
    root: str
    filename: str = SOURCE_ARCHIVE


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    target: str
    tag: str
    context: Path
    dockerfile: str
    platform: str
    timestamp: int
    build_args: tuple[tuple[str, str], ...]
    bases: tuple[tuple[str, str], ...]  # lock entry name -> pinned reference
    labels: tuple[tuple[str, str], ...]
    files: tuple[tuple[str, str], ...]
    source: SourceFetch | None
    payloads: tuple[Payload, ...]
    serve: Serve
    fingerprint: str

    def identity(self) -> str:
        """sha256 over everything the plan feeds an engine (the engine is added by build).

        Payloads and the serve command are carried for ``plan`` to show, but they do
        not change the image, so they are not part of its identity.
        """
        material = asdict(self)
        material["context"] = str(self.context.name)
        del material["payloads"], material["serve"]
        blob = json.dumps(material, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _source(lock: Lock, target: Target) -> SourceFetch | None:
    if target.source is None:
        return None
    src = lock.sources[target.source]
    missing = src.missing()
    if missing:
        raise LockError(
            f"targets.{target.name}.source: sources.{src.name} has no {', '.join(missing)}; "
            f"{PIN_BY_HAND}"
        )
    assert src.url and src.sha256  # for mypy: missing() was empty
    return SourceFetch(
        name=src.name, url=src.url, sha256=src.sha256, commit=src.commit, root=src.root
    )


def plan_target(lock: Lock, name: str) -> BuildPlan:
    """Resolve one target into a BuildPlan; LockError if an input is unpinned."""
    target = lock.target(name)
    if target.external is not None:
        raise LockError(
            f"targets.{name}: an external image ({target.external.image}), built elsewhere: "
            "there is nothing to plan or build here (smoke and deploy run it by digest)"
        )
    args: dict[str, str] = {}
    labels: dict[str, str] = {
        "org.opencontainers.image.created": datetime.fromtimestamp(
            lock.source_date_epoch, timezone.utc
        ).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "org.opencontainers.image.title": target.name,
        f"{LABEL_PREFIX}.target": target.name,
        f"{LABEL_PREFIX}.fingerprint": lock.fingerprints.get(name, ""),
    }
    platforms = set()
    bases = {}
    for arg, base_name in sorted(target.bases.items()):
        base = lock.bases[base_name]
        args[arg] = bases[base_name] = base.pinned(f"targets.{name}.bases.{arg}")
        labels[f"{LABEL_PREFIX}.base.{base_name}"] = args[arg]
        platforms.add(base.platform)
    if len(platforms) > 1:
        raise LockError(f"targets.{name}.bases: mixed platforms {sorted(platforms)}")
    source = _source(lock, target)
    if source is not None:
        args.update(SOURCE_SHA256=source.sha256, SOURCE_ROOT=source.root)
        labels["org.opencontainers.image.source"] = lock.sources[source.name].repository
        if source.commit:
            labels["org.opencontainers.image.revision"] = source.commit
        commit = source.commit or "commit-unknown"
        labels[f"{LABEL_PREFIX}.source.{source.name}"] = f"{commit} sha256:{source.sha256}"
    for pip in target.pip:
        labels[f"{LABEL_PREFIX}.pip.{pip}"] = f"sha256:{lock.pip[pip].sha256}"
    args.update(target.build_args)
    args["SOURCE_DATE_EPOCH"] = str(lock.source_date_epoch)
    return BuildPlan(
        target=name,
        tag=target.tag,
        context=lock.root / target.context,
        dockerfile=target.dockerfile,
        platform=platforms.pop(),
        timestamp=lock.source_date_epoch,
        build_args=tuple(sorted(args.items())),
        bases=tuple(sorted(bases.items())),
        labels=tuple(sorted(labels.items())),
        files=tuple(sorted(context_files(lock, target).items())),
        source=source,
        payloads=tuple(lock.payloads[p] for p in target.payloads),
        serve=target.serve,
        fingerprint=fingerprint(lock, target),
    )


def built_here(lock: Lock, names: list[str], verb: str) -> list[str]:
    """``names`` without the external targets, each skipped with a one-line note.

    An external image (frank-large) was built elsewhere: there is nothing to build,
    reproduce, lint or fingerprint here; smoke and deploy run it by its digest.
    """
    out = []
    for n in names:
        ext = lock.target(n).external
        if ext is None:
            out.append(n)
        else:
            echo(f"{verb}: {n}: skipped, an external image ({ext.image}) built elsewhere")
    return out


def render_external(lock: Lock, name: str) -> str:
    """``plan``'s view of an external target: the image it runs and how, nothing built."""
    t = lock.target(name)
    assert t.external is not None, name
    ext, serve = t.external, t.serve
    pin = (
        f"{ext.image}@{ext.digest}"
        if ext.digest
        else f"{ext.image} UNPINNED: {unpinned(f'targets.{name}', ext.image)}"
    )
    shape = ", ".join(
        f"{k}={v}" for k, v in (("context", serve.context), ("parallel", serve.parallel)) if v
    )
    lines = [f"{name} -> EXTERNAL (built elsewhere: no build, no payloads)", f"  image       {pin}"]
    lines += [f"  env         {k}={v}" for k, v in sorted(serve.env.items())]
    lines.append(f"  serve       {serve.runtime} :{serve.port} {shape}")
    command = " ".join(serve.command) or "(the image's own entrypoint and command)"
    lines.append(f"              {command}")
    return "\n".join(lines)


def render(plan: BuildPlan) -> str:
    """The plan as a person reads it: every value an engine will receive."""
    lines = [f"{plan.target} -> {plan.tag}  ({plan.platform}, SOURCE_DATE_EPOCH={plan.timestamp})"]
    lines.append(f"  context     {plan.context.name}/ ({len(plan.files)} files), {plan.dockerfile}")
    for k, v in plan.build_args:
        lines.append(f"  build-arg   {k}={v}")
    if plan.source:
        s = plan.source
        commit = s.commit or "(commit unknown: pinned by archive sha256 only)"
        lines.append(f"  source      {s.name} {commit} from {s.url} (sha256 {s.sha256})")
    for k, v in plan.labels:
        lines.append(f"  label       {k}={v}")
    for p in plan.payloads:
        lines += _payload_lines(p, plan.serve)
    serve = plan.serve
    shape = ", ".join(
        f"{k}={v}"
        for k, v in (
            ("context", serve.context),
            ("parallel", serve.parallel),
            ("kv", serve.kv_dtype),
        )
        if v is not None
    )
    lines.append(f"  serve       {serve.runtime} :{serve.port} {shape}")
    lines.append(f"              {' '.join(serve.command)}")
    return "\n".join(lines)


def _file_state(f: PayloadFile) -> str:
    gaps = f.missing()
    if gaps:
        return f"UNPINNED: no {', '.join(gaps)}"
    pins = f"sha256 {f.sha256}" if f.sha256 else f"git blob {f.git_sha1}"
    return f"{f.size} B {pins}"


def _payload_lines(p: Payload, serve: Serve) -> list[str]:
    """One line per file: pinned, or UNPINNED with what is missing; for a snapshot, also
    each file the runtime reads that the lock does not list yet."""
    where = f"{p.name} [{p.role}] {p.repository}@{p.revision or '?'}"
    if not p.snapshot:
        return [f"  payload     {where}/{p.filename} {_file_state(p.single)}"]
    lines = [f"  payload     {where}/ (snapshot, {len(p.files)} files)"]
    lines += [f"              {f.path} {_file_state(f)}" for f in p.files]
    for need in unmet(p.role, serve.modalities, {f.path for f in p.files}):
        names = " or ".join(need.names)
        lines.append(f"              {names} UNPINNED: {serve.runtime} reads the {need.what}; "
                     "not in the lock yet")  # fmt: skip
    return lines
