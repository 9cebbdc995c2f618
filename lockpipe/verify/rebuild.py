"""Rebuild a published image from the lock on this host and compare, down to the file.

The rebuild runs without cache, as ``reproduce``'s second build does, under a scratch tag,
and is not recorded. Its image ID is the
digest of its config, and a push keeps the config's bytes, so the rebuild
matches the published image exactly when its ID equals the config digest of
the published manifest (the config names every layer's diff ID). Manifest
digests are not compared: they also cover the layers' compression, which the
push chose, not the build. When they differ, the published image is copied
from the registry and both are explained file by file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lockpipe import cmd
from lockpipe.engines.base import Engine
from lockpipe.errors import EngineError, EngineMissing, RegistryError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.reproduce import scratch_tag
from lockpipe.imagebuild.run import Settings, build_key, run_build
from lockpipe.jsonshape import loads
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import Lock
from lockpipe.lock.refs import parse_ref
from lockpipe.log import step
from lockpipe.publish.outputs import images_path, published_for
from lockpipe.registry.names import is_loopback
from lockpipe.verify.explain import Explanation, explain
from lockpipe.verify.tree import exported, source_for


@dataclass(frozen=True, kw_only=True)
class Comparison:
    target: str
    engine: str
    published: str  # reference@digest
    published_config: str  # the config digest its manifest names
    rebuilt: str  # the rebuild's image ID (its config digest)
    explanation: Explanation | None  # None when they are the same

    @property
    def same(self) -> bool:
        return self.published_config == self.rebuilt

    def __str__(self) -> str:
        if self.same:
            return (
                f"{self.target}: the rebuild with {self.engine} matches {self.published} "
                f"(config {self.rebuilt})"
            )
        head = (
            f"{self.target}: the rebuild with {self.engine} ({self.rebuilt}) differs from "
            f"{self.published} (config {self.published_config})"
        )
        return head if self.explanation is None else f"{head}\n{self.explanation.text()}"


def pinned_reference(lock: Lock, target: str, published_digest: str) -> str:
    """``name@digest``: as given, or the bare digest with images.json's repository (its tag
    dropped: skopeo refuses a reference with both a tag and a digest)."""
    if "@" in published_digest:
        return published_digest
    if not published_digest.startswith("sha256:"):
        raise RegistryError(
            f"{published_digest!r} is not a digest; pass sha256:… or REFERENCE@sha256:…"
        )
    entry = published_for(images_path(lock.path), target)
    return f"{parse_ref(entry.reference).name}@{published_digest}"


def loopback(ref: str) -> bool:
    """Plain HTTP to this registry: the registry client's rule (one rule for every caller)."""
    return is_loopback(parse_ref(ref).registry)


def config_digest(pinned: str, *, tls_verify: bool) -> str:
    """The config digest that the manifest at ``pinned`` names."""
    try:
        out = cmd.call(
            ["skopeo", "inspect", "--raw", f"--tls-verify={str(tls_verify).lower()}",
             f"docker://{pinned}"],
            quiet=True, stdout_only=True,
        )  # fmt: skip
    except EngineMissing:
        raise
    except EngineError as exc:
        raise RegistryError(
            f"{pinned}: the registry did not serve this manifest; check the reference and that "
            f"the registry runs ({str(exc).splitlines()[-1] if str(exc) else exc!r})"
        ) from None
    try:
        return str(loads(out)["config"]["digest"])
    except (ValueError, KeyError, TypeError):
        raise RegistryError(
            f"{pinned}: not a single-image manifest (an index?); pass the digest of the "
            "platform's image manifest"
        ) from None


def rebuild_and_compare(
    lock: Lock, target: str, engine: Engine, settings: Settings, published_digest: str
) -> Comparison:
    """Rebuild ``target`` without cache, compare with the published image, explain a difference.

    Nothing is printed here: the caller prints the result once (``str(result)``).
    """
    pinned = pinned_reference(lock, target, published_digest)
    tls_verify = not loopback(pinned)
    published_config = config_digest(pinned, tls_verify=tls_verify)
    check_drift(lock, lock.target(target))
    plan = plan_target(lock, target)
    key = build_key(plan, engine.name, engine.version())
    with step(f"rebuild {target} with {engine.name} {engine.version()}, no cache"):
        # Under a scratch tag and unrecorded: the user's build and its record stay as they were.
        rebuild = replace(plan, tag=scratch_tag(target, "rebuild"))
        record = run_build(engine, rebuild, key, settings, no_cache=True)
    explanation = None
    if record.image_id != published_config:
        with (
            step(f"explain {target}: {pinned} vs the rebuild"),
            exported(f"docker://{pinned}", tls_verify=tls_verify) as published,
            exported(source_for(engine.name, record.image_id)) as rebuilt,
        ):
            explanation = explain(published, rebuilt)
    return Comparison(
        target=target, engine=engine.name, published=pinned, published_config=published_config,
        rebuilt=record.image_id, explanation=explanation,
    )  # fmt: skip
