"""``lockpipe upgrade NAME VERSION``: apply one proposal as one reviewable change.

- a **base** (``vllm-openai 0.33.0``): its tag becomes the pinned tag with the new version
  and the same prefix and suffix (``v0.33.0-cu129``), resolved in its registry (digest,
  platforms, version label); every target built FROM it whose version build arg
  (``VLLM_VERSION``) said the old version says the new one; the requirements files derived
  for that version (the audio extra) are derived again (:mod:`.pip`, as ``nox -s lock``);
  preflight's rules for that vLLM version are extracted from its wheel when lockpipe has
  none (:func:`lockpipe.preflight.vllm_release.derive`); then the lock is relocked;
- a **source** (``llama.cpp b11434``): the tag is resolved as refresh-digests resolves a
  pinned tag (commit, archive, sha256, tree hash, root).

Everything the lock says is resolved before the lock is written, so a failure leaves the
lock as it was; the derived requirements files and the rules are written as ``nox -s lock``
writes them, and the lock, written last, names their sha256.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from lockpipe.errors import LockError, UsageError
from lockpipe.lock.model import Lock, parse_lock
from lockpipe.lock.refs import parse_ref
from lockpipe.log import echo
from lockpipe.refresh.api import Api
from lockpipe.refresh.bases import Registry, required, resolve_all
from lockpipe.refresh.model import Outcome
from lockpipe.refresh.propose import carried
from lockpipe.refresh.versions import parse_tag


@dataclass(frozen=True, kw_only=True)
class Upgraded:
    document: dict[str, Any]
    said: tuple[str, ...]  # one line per thing that moved


def base_document(
    lock: Lock, name: str, version: str, registry: Registry
) -> tuple[dict[str, Any], list[str]]:
    """The lock document with ``bases.NAME`` on ``version``'s tag and the build args that
    named the old version moved; nothing derived yet."""
    base = lock.bases[name]
    ref = parse_ref(base.ref)
    tag = parse_tag(ref.tag or "")
    if tag is None:
        raise UsageError(
            f"bases.{name}: {base.ref} is not pinned to a versioned tag; edit its ref by hand"
        )
    new_ref = f"{base.ref.rsplit(':', 1)[0]}:{tag.with_version(version)}"
    answer = resolve_all([replace(base, ref=new_ref)], registry)[name]
    doc: dict[str, Any] = copy.deepcopy(dict(lock.document))
    entry = doc["bases"][name]
    entry.update(ref=new_ref, digest=answer.digest)
    platforms = {p: d for p, d in sorted(answer.platforms.items()) if p in required(base)}
    if platforms:
        entry["platforms"] = platforms
    else:
        entry.pop("platforms", None)
    if answer.version_label:
        entry["version_label"] = answer.version_label
    else:
        entry.pop("version_label", None)
    entry["origin"] = {
        "source": f"lockpipe upgrade {name} {version}: registry {ref.registry}, the tag's manifest",
        "seen": date.today().isoformat(),
    }
    said = [f"bases.{name}: {base.ref} -> {new_ref} ({answer.digest})"]
    for d in carried(lock, base):
        doc["targets"][d.target]["build_args"][d.arg] = version
        said.append(f"targets.{d.target}.build_args.{d.arg}: {d.derivation.version} -> {version}")
    return doc, said


def rules(lock: Lock, version: str, data: Path | None, wheel: Path | None) -> list[str]:
    """vLLM ``version``'s preflight rules where preflight finds them, derived from its wheel
    when missing (:func:`lockpipe.preflight.vllm_release.derive`, into the lock's
    ``vllm-rules/`` as ``lockpipe lock`` does, or into ``data``)."""
    from lockpipe.preflight import vllm_release

    where = data or vllm_release.beside(lock)
    try:
        if data is None:
            vllm_release.rules_of(lock, version)
        else:
            vllm_release.rules_for(version, data)
        return []
    except LockError:
        echo(f"deriving preflight's rules for vLLM {version} from its wheel into {where}")
    path = vllm_release.derive(version, where, wheel)
    facts = vllm_release.rules_for(version, where)
    return [
        f"{path}: preflight's rules, extracted from {facts['wheel']['file']} "
        f"(sha256 {str(facts['wheel']['sha256'])[:12]}…)"
    ]


def upgrade_base(
    lock: Lock,
    name: str,
    version: str,
    *,
    registry: Registry,
    rules_dir: Path | None = None,
    wheel: Path | None = None,
    derive: Callable[[Lock], tuple[dict[str, Any], list[Any]]] | None = None,
) -> Upgraded:
    """Move the base, derive what depends on it, relock; writes the derived files and the
    rules, not the lock."""
    from lockpipe.refresh.pip import relock_derived

    doc, said = base_document(lock, name, version, registry)
    moved = parse_lock(doc, lock.path, lock.root)
    carries = carried(lock, lock.bases[name])
    if any(d.derivation.package == "vllm" for d in carries):
        said += rules(moved, version, rules_dir, wheel)
    relocked, changes = (derive or relock_derived)(moved)
    said += [str(c) for c in changes]
    return Upgraded(document=relocked, said=tuple(said))


def upgrade_source(lock: Lock, name: str, tag: str, *, github: Api, archives: Any) -> Upgraded:
    """The source on ``tag``, resolved as refresh-digests resolves a pinned tag."""
    from lockpipe.refresh.plan import apply
    from lockpipe.refresh.sources import refresh_source

    source = lock.sources[name]
    base = source.repository.rstrip("/").removesuffix(".git")
    pinned = replace(source, follow=None, url=f"{base}/archive/refs/tags/{tag}.tar.gz")
    change, _ = refresh_source(pinned, github, archives)
    if change is None:
        raise UsageError(f"sources.{name} is already on {tag}")
    change = replace(
        change,
        source=f"lockpipe upgrade {name} {tag}: {change.source}",
        updates={**change.updates, "url": pinned.url},
    )
    doc = apply(lock, Outcome(changes=(change,)))
    moved = "; ".join(f"{m.key} {m.old} -> {m.new}" for m in change.moved)
    return Upgraded(document=doc, said=(f"sources.{name}: {moved}",))
