"""The demo's plan, pure: its bases, its run-local lock and the stages it runs.

The committed lock (``locks/demo/digests.json``) cannot pin the bases' digests:
mmdebstrap's root filesystem follows the day's Debian archive. It leaves them
absent; :func:`run_document` fills in the digests of the bases this run built (and
the registry they went to), and the run writes that document as a run-local lock.
Nothing here touches the world.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import LockError, UsageError

TARGET = "llama-cpu"
LOCK = Path("locks/demo/digests.json")  # in the checkout
SMOKE = Path("locks/demo/smoke.json")
REGISTRY = "127.0.0.1:5000"  # the committed lock's base references name it
SUITE = "bookworm"
_HOST_PORT = re.compile(r"^[A-Za-z0-9.-]+:\d{1,5}$")


@dataclass(frozen=True, kw_only=True)
class BaseRecipe:
    """One Debian base: ``mmdebstrap --variant=VARIANT --include=… SUITE``, FROM scratch."""

    name: str  # the lock's bases.NAME
    include: tuple[str, ...]
    suite: str = SUITE
    variant: str = "apt"

    def mmdebstrap(self, tar: Path) -> list[str]:
        """The command that writes this base's root filesystem to ``tar``."""
        return ["mmdebstrap", f"--variant={self.variant}", f"--include={','.join(self.include)}",
                self.suite, str(tar)]  # fmt: skip


BASES = (
    BaseRecipe(name="debian-build", include=("build-essential", "cmake", "libgomp1")),
    BaseRecipe(name="debian-runtime", include=("libgomp1", "curl")),
)
CONTAINERFILE = 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n'


def parse_registry(text: str) -> str:
    """``--registry HOST:PORT``, checked; a UsageError naming the option otherwise."""
    if not _HOST_PORT.match(text) or not 1 <= int(text.rpartition(":")[2]) <= 65535:
        raise UsageError(f"--registry {text!r}: give HOST:PORT, e.g. {REGISTRY}")
    return text


def on_registry(ref: str, registry: str) -> str:
    """``ref`` (``HOST:PORT/repo:tag``) with its registry replaced by ``registry``."""
    return f"{registry}/{ref.partition('/')[2]}"


def base_refs(doc: Mapping[str, Any], registry: str) -> dict[str, str]:
    """Each demo base's reference on ``registry``; a LockError if the lock lacks one."""
    bases = doc.get("bases", {})
    missing = [b.name for b in BASES if b.name not in bases]
    if missing:
        raise LockError(f"the demo lock has no bases.{', bases.'.join(missing)}; restore "
                        f"{LOCK} from the repository")  # fmt: skip
    return {b.name: on_registry(bases[b.name]["ref"], registry) for b in BASES}


def run_document(
    doc: Mapping[str, Any], digests: Mapping[str, str], registry: str, seen: str
) -> dict[str, Any]:
    """A copy of the committed lock ``doc`` with each base on ``registry`` and pinned by
    the digest this run built (``digests``: name → digest), its origin saying so.

    A digest the committed lock does pin must be the one built: a LockError otherwise.
    Fingerprints are left as they are; the caller relocks (they cover the digests).
    """
    out: dict[str, Any] = copy.deepcopy(dict(doc))
    refs = base_refs(doc, registry)
    for name, digest in digests.items():
        base = out["bases"][name]
        pinned = base.get("digest")
        if pinned is not None and pinned != digest:
            raise LockError(
                f"bases.{name}: the demo lock pins {pinned}, but the base built here is "
                f"{digest}; remove bases.{name}.digest from {LOCK} (the demo fills it in)"
            )
        base["ref"] = refs[name]
        base["digest"] = digest
        base["origin"] = {
            "source": f"built by lockpipe demo on this host (mmdebstrap, Debian's archive), "
            f"pushed to {registry}",
            "seen": seen,
        }
    return out


def filled(doc: Mapping[str, Any]) -> list[str]:
    """The demo bases whose digest the committed lock leaves to the run."""
    return [b.name for b in BASES if "digest" not in doc["bases"].get(b.name, {})]


def payload_url(doc: Mapping[str, Any], name: str, hub: str = "https://huggingface.co") -> str:
    """The Hub resolve URL of single-file payload ``name``: where the mirror serves it."""
    p = doc["payloads"][name]
    return f"{hub}/{p['repository']}/resolve/{p['revision']}/{p['filename']}"


@dataclass(frozen=True, kw_only=True)
class Paths:
    """Where one demo run keeps its things (all under ``work`` but the caches)."""

    checkout: Path
    work: Path
    cache: Path  # the pipeline's --cache, for this run's stages
    inputs: Path  # the demo's own downloads and root filesystems, kept across runs
    state: Path
    store: Path

    @property
    def lock(self) -> Path:
        """The run-local lock; the target's recipe is copied beside it (``WORK/images/…``)."""
        return self.work / "lock" / "digests.json"

    @property
    def deploy(self) -> Path:
        return self.work / "deploy"


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    verb: str
    argv: tuple[str, ...]  # after ``lockpipe``
    proves: str


def stages(
    paths: Paths, engine: str, mirror: str, smoke: Path, render_for: str | None = None
) -> tuple[Stage, ...]:
    """The pipeline's own verbs on the run-local lock, in order, each with what it proves.

    ``render_for``: the podman version deploy renders for, where this host's has no quadlet.
    """
    podman = ("--podman-version", render_for) if render_for else ()
    renders = f" (rendered for podman {render_for})" if render_for else ""
    lock = ("--lock", str(paths.lock))
    state = ("--state", str(paths.state))
    store = ("--store", str(paths.store))
    eng = ("--engine", engine)

    def stage(name: str, verb: str, *args: str, proves: str) -> Stage:
        return Stage(name=name, verb=verb, argv=(verb, TARGET, *lock, *args), proves=proves)

    return (
        stage("plan", "plan", proves="the lock resolves: bases by digest, the llama.cpp "
              "archive by sha256, the GGUF by size and sha256"),
        stage("build", "build-llama-cpu", *state, "--cache", str(paths.cache), "--mirror", mirror,
              *eng, proves="llama-server built from the committed recipe and pinned inputs "
              "alone (the archive's sha256 checked before and inside the build)"),
        stage("payloads", "payloads", *store, "--mirror", mirror, proves="the GGUF is in the "
              "store byte for byte (size, sha256) and its header is the lock's (gemma3, 18 "
              "blocks)"),
        stage("smoke", "smoke", *state, *store, "--mirror", mirror, "--expect", str(smoke), *eng,
              proves="the image serves the model: ready, real completions checked, /metrics"),
        stage("deploy", "deploy", *state, *store, *eng, "--out", str(paths.deploy), *podman,
              proves=f"a podman quadlet{renders} pinned by image ID, gated on that smoke run, "
              "checked by systemd-analyze verify (not installed)"),
    )  # fmt: skip
