"""Which image a deploy pins, and whether the last smoke run allows it.

The image is the one the build record holds, by image ID (never its tag, which the next
build moves). A smoke report, where one exists, must show the target passing against
that same image; ``--force`` overrides both refusals with a loud warning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import DeployError
from lockpipe.imagebuild.records import BuildRecord, read_record, record_path
from lockpipe.log import echo

# quadlet runs podman; buildah shares podman's image storage (containers-storage).
PODMAN_STORAGE = ("podman", "buildah")


@dataclass(frozen=True, kw_only=True)
class Pinned:
    record: BuildRecord
    image: str  # the bare image ID, which podman run and quadlet's Image= take

    @property
    def short(self) -> str:
        return self.image[:12]


def pinned_image(state: Path, target: str, engine: str | None = None) -> Pinned:
    """The image of ``target``'s build record (``engine``'s, else podman's, else buildah's)."""
    engines = (engine,) if engine else PODMAN_STORAGE
    if engine == "docker":
        raise DeployError(
            f"{target}: quadlet runs podman, which cannot see docker's image storage; build "
            f"with --engine podman or buildah (or copy it: podman pull docker-daemon:TAG)"
        )
    for e in engines:
        record = read_record(state, e, target)
        if record is not None:
            return Pinned(record=record, image=record.image_id.removeprefix("sha256:"))
    looked = ", ".join(str(record_path(state, e, target)) for e in engines)
    raise DeployError(
        f"{target}: no build record ({looked}), so there is no image to pin; build it first: "
        f"lockpipe build --engine podman {target}"
    )


def _refuse(message: str, force: bool) -> None:
    if not force:
        raise DeployError(message + "; or pass --force to deploy anyway")
    echo(f"WARNING (--force): {message}", style="bold red")


def check_fingerprint(pinned: Pinned, fingerprint: str | None, *, force: bool) -> None:
    """Refuse an image built from other inputs than the lock pins now."""
    if fingerprint is not None and pinned.record.fingerprint != fingerprint:
        _refuse(
            f"{pinned.record.target}: the image {pinned.short} was built from other inputs than "
            f"the lock pins now (fingerprint {pinned.record.fingerprint[:12]}, lock "
            f"{fingerprint[:12]}); rebuild: lockpipe build {pinned.record.target}",
            force,
        )


def last_smoke(report: Path, target: str) -> dict[str, Any] | None:
    """The target's entry in a smoke.json (the last one if several), or None."""
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise DeployError(f"{report}: unreadable smoke report ({exc}); re-run lockpipe smoke "
                          "or remove the file") from None  # fmt: skip
    entries = [r for r in doc.get("reports", []) if r.get("target") == target]
    return entries[-1] if entries else None


def check_smoke(report: Path, pinned: Pinned, *, force: bool) -> str:
    """Refuse a target whose last smoke failed or ran another image; say what was checked."""
    target = pinned.record.target
    entry = last_smoke(report, target)
    fix = f"run `lockpipe smoke --gpu {target}` against this image and fix what fails"
    if entry is None:
        note = f"{target} has no smoke result in {report}: deploying an untested image"
        echo(f"warning: {note}", style="yellow")
        return note
    ran = str(entry.get("image_id", "")).removeprefix("sha256:")
    if ran != pinned.image:
        _refuse(
            f"{target}: the last smoke run in {report} tested image {ran[:12] or '?'}, not "
            f"{pinned.short} that the build record holds; {fix}",
            force,
        )
        return f"smoke ran {ran[:12]}, not this image (forced)"
    if not entry.get("ok"):
        failed = [r["name"] for r in entry.get("results", []) if r.get("status") == "FAIL"]
        which = ", ".join(failed) or "see the report"
        _refuse(
            f"{target}: its last smoke run in {report} failed ({which}) on image "
            f"{pinned.short}; {fix}",
            force,
        )
        return "smoke failed (forced)"
    return f"smoke passed on {pinned.short} ({report})"
