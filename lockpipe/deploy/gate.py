"""Which image a deploy pins, and whether a smoke run allows it.

The image is the one the build record holds, by image ID (never its tag, which the next
build moves). The smoke report (``smoke.json``, one result per target and image) must
show this target's latest run on that same image passing: no result is a refusal like a
failed one. That run must also have served what the lock says now: its recorded digests
of the serve section and the payload pins (fingerprint.served, which the build
fingerprint leaves out) must equal the lock's; a result without them predates the check
and is refused too. ``--force`` overrides every refusal with a loud warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lockpipe.errors import DeployError, LockpipeError
from lockpipe.imagebuild.records import BuildRecord, load_record, record_path
from lockpipe.log import echo
from lockpipe.smoke.report import SmokeRecord, read_records

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
        try:
            record = load_record(record_path(state, e, target))
        except LockpipeError as exc:  # the header shows its fields: a NUL was a unit line
            raise DeployError(str(exc)) from None
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


def check_fingerprint(pinned: Pinned, fingerprint: str | None, *, lock: Path, force: bool) -> None:
    """Refuse an image built from other inputs than the lock pins now, and a lock that does
    not say which inputs those are (plan and build refuse it too: fingerprint.check)."""
    if fingerprint is None:
        _refuse(f"{lock}: fingerprints.{pinned.record.target} is missing; run nox -s lock", force)
    elif pinned.record.fingerprint != fingerprint:
        _refuse(
            f"{pinned.record.target}: the image {pinned.short} was built from other inputs than "
            f"the lock pins now (fingerprint {pinned.record.fingerprint[:12]}, lock "
            f"{fingerprint[:12]}); rebuild: lockpipe build {pinned.record.target}",
            force,
        )


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What the smoke gate allowed: the unit header's line, and the store the run mounted."""

    note: str
    store: Path | None = None  # the payload store of the result judged (None: not recorded)


def smoke_records(report: Path, target: str) -> tuple[SmokeRecord, ...]:
    """The results ``report`` keeps for ``target``, oldest first; DeployError on a bad file."""
    records, _ = read_records(report, DeployError)
    return tuple(r for r in records if r.target == target)


def _ran(r: SmokeRecord) -> str:
    """One result as a person reads it: which image, how it went, when."""
    when = f" at {r.at}" if r.at else ""
    if r.image_id or r.image:
        what = f"image {r.image_id.removeprefix('sha256:')[:12]}" if r.image_id else r.image
        return f"{what} ({'passed' if r.ok else 'failed'}{when})"
    return f"a run that started no image{when} ({r.reason or 'see the report'})"


def _store(r: SmokeRecord) -> Path | None:
    return Path(r.store) if r.store else None


def _changed(target: str, recorded: Mapping[str, str], now: Mapping[str, str]) -> str:
    """What of ``target``'s serving differs from what its smoke run recorded ("" if none)."""
    what = {
        "serve": f"serve section (targets.{target}.serve: command, env, port, …)",
        "payloads": f"payload pins (the revisions and files of targets.{target}.payloads)",
    }
    return " and its ".join(what[k] for k in what if recorded.get(k) != now.get(k))


def check_smoke(
    report: Path, target: str, image: str, matches: Callable[[SmokeRecord], bool], *,
    served: Mapping[str, str], force: bool, fix: str, again: str,
) -> Verdict:  # fmt: skip
    """Refuse unless ``report``'s latest result for ``target`` on this ``image`` passed,
    serving what the lock says now.

    ``matches`` picks the results of this image (by image ID, or by published reference);
    ``image`` is how the messages name it. No result for it, or a failed one, is refused
    (``--force`` deploys anyway, with a red warning), and so is a passing one whose
    recorded digests (``served``: fingerprint.served) differ from the lock's now or are
    absent; ``again`` is the smoke command that tests it again. The verdict names what
    was checked."""
    runs = smoke_records(report, target)
    mine = [r for r in runs if matches(r)]
    if not mine:
        if runs:
            held = "; ".join(_ran(r) for r in runs[-3:])
            why = f"{report} has no smoke result for image {image}, only for {held}"
        elif report.exists():
            why = f"{report} has no smoke result for it"
        else:
            why = f"no smoke report at {report}"
        _refuse(f"{target}: {why}; {fix}", force)
        return Verdict(note=f"Smoke: none for {image} in {report}: deployed untested (forced).")
    last = mine[-1]
    if not last.ok:
        which = ", ".join(last.failed) or "see the report"
        _refuse(
            f"{target}: its last smoke run in {report} failed ({which}) on image {image}; {fix}",
            force,
        )
        return Verdict(note=f"Smoke: failed on {image} (forced).", store=_store(last))
    when = f" at {last.at}" if last.at else ""
    if last.served is None:
        _refuse(
            f"{target}: its smoke run that passed on image {image}{when} in {report} predates "
            "the record of what a run served (serve command, env, port and payload pins), so "
            f"it does not show that this lock's serving was tested; run `{again}` again",
            force,
        )
        return Verdict(note=f"Smoke: passed on {image}{when}, serving unrecorded (forced).",
                       store=_store(last))  # fmt: skip
    changed = _changed(target, last.served, served)
    if changed:
        _refuse(
            f"{target}: the lock's {changed} changed since its smoke run passed on image "
            f"{image}{when} in {report}, so that run did not test what this unit would "
            f"serve; run `{again}` again",
            force,
        )
        return Verdict(note=f"Smoke: passed on {image}{when}, but the lock's {changed} "
                       "changed since (forced).", store=_store(last))  # fmt: skip
    return Verdict(note=f"Smoke: passed on {image}{when} ({report}).", store=_store(last))


def check_built(report: Path, pinned: Pinned, *, served: Mapping[str, str], force: bool) -> Verdict:
    """The gate for a local build: a passing result on the build record's image ID, which
    served what ``served`` (the lock's fingerprint.served now) digests."""
    target = pinned.record.target
    again = f"lockpipe smoke --gpu {target}"
    return check_smoke(
        report, target, pinned.short,
        lambda r: r.image_id.removeprefix("sha256:") == pinned.image, served=served,
        force=force, fix=f"run `{again}` against this image and fix what fails", again=again,
    )  # fmt: skip


def check_reference(
    report: Path, target: str, image: str, *, served: Mapping[str, str], force: bool,
    external: bool = False,
) -> Verdict:  # fmt: skip
    """The gate for an image deployed by reference (published, external): that reference,
    which served what ``served`` digests. An ``external`` target's smoke runs its pinned
    digest without --image."""
    again = f"lockpipe smoke --gpu {'' if external else f'--image {image} '}{target}"
    return check_smoke(
        report, target, image, lambda r: r.image == image, served=served, force=force,
        fix=f"run `{again}` on a host that holds it and fix what fails", again=again,
    )  # fmt: skip
