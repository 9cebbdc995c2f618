"""Newer versions of the lock's entries, proposed (never applied); pure but for the asking.

- **bases**: the registry's ``tags/list`` for the base's repository, read as Renovate reads
  Docker tags (:mod:`.versions`): every newer stable tag with the same suffix and precision.
- **sources** (llama.cpp): the repository's latest release (GitHub's
  ``/repos/{o}/{r}/releases/latest``), when its tag ``bNNNN`` is above the pinned one
  (llama.cpp releases every build, so one proposal, with how many build numbers it skips).
- **the pip side**: a requirements file derived for ``vllm[audio]==V`` moves with the base
  whose tag says V, so a base proposal carries it when PyPI has that vLLM release (and is
  refused when it does not: the audio extra could not be derived). A derived file no base
  carries gets proposals of its own: every newer stable release on PyPI.

Each candidate is stamped in the first-seen record (:mod:`.firstseen`); one first seen less
than ``min_age`` ago is listed as held.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from packaging.version import Version

from lockpipe.errors import FetchError, LockError, RegistryError
from lockpipe.fs import read_utf8
from lockpipe.jsonshape import Reader
from lockpipe.lock import requirements as rq
from lockpipe.lock.model import Base, Lock, Source, Target
from lockpipe.lock.refs import parse_ref
from lockpipe.refresh import firstseen
from lockpipe.refresh.api import Api
from lockpipe.refresh.model import Kind
from lockpipe.refresh.proposal import Proposal, Verdict
from lockpipe.refresh.rules import build_number, iso_time
from lockpipe.refresh.versions import newer, parse_tag
from lockpipe.urls import shown

ListTags = Callable[[str], Sequence[str]]


@dataclass(frozen=True, kw_only=True)
class Upstreams:
    """Where candidates come from: the registry's tag lists, GitHub's API, the index."""

    tags: ListTags  # ref -> every tag of its repository (lockpipe.registry.tags.list_tags)
    github: Api
    pypi: Api


@dataclass(frozen=True, kw_only=True)
class Derived:
    """A requirements file derived for ``package[extra]==version`` (one target builds it)."""

    pip: str
    file: str
    derivation: rq.Derivation
    target: str
    arg: str  # the build arg that says the version (VLLM_VERSION)


def derived_files(lock: Lock) -> list[Derived]:
    out = []
    for target in sorted(lock.targets.values(), key=lambda t: t.name):
        for name in target.pip:
            path = lock.root / lock.pip[name].file
            d = rq.derived_for(read_utf8(path, LockError)) if path.is_file() else None
            if d is not None:
                out.append(
                    Derived(
                        pip=name,
                        file=lock.pip[name].file,
                        derivation=d,
                        target=target.name,
                        arg=rq.version_arg(d.package),
                    )
                )
    return out


def users(lock: Lock, base: str) -> list[Target]:
    return [t for _, t in sorted(lock.targets.items()) if base in t.bases.values()]


def carried(lock: Lock, base: Base) -> list[Derived]:
    """The derived files that move with ``base``: their target builds FROM it and its
    version build arg is the version the base's tag says."""
    tag = parse_tag(parse_ref(base.ref).tag or "")
    mine = {t.name for t in users(lock, base.name)}
    return [
        d
        for d in derived_files(lock)
        if tag and d.target in mine and lock.targets[d.target].build_args.get(d.arg) == tag.version
    ]


def releases(index: Api, package: str, what: str) -> dict[str, str]:
    """Every stable, not yanked release of ``package`` on the index: version -> the day its
    first file was uploaded (``an unknown day`` where no upload_time is a date).

    The answer is checked where it enters: a table or a release's file list of another
    shape is a FetchError naming the URL and the key, never a TypeError further on."""
    url = index.url(f"pypi/{package}/json")
    read = Reader(where=f"{what}: {url}", root="the answer", error=FetchError,
                  fix="is LOCKPIPE_PYPI a PyPI JSON API?")  # fmt: skip
    doc = index.get(f"pypi/{package}/json", what)
    table = read.get(doc, ("releases",), dict)
    out = {}
    for version in table:
        files = read.get(doc, ("releases", version), list, [])
        try:
            if Version(version).is_prerelease:
                continue
        except ValueError:  # InvalidVersion, or a release number past int()'s 4300 digits
            continue
        live = [f for f in files if isinstance(f, dict) and not f.get("yanked")]
        # the day for the reviewer ("on PyPI since"), never a pin: an upload_time that is
        # not an ISO 8601 time (a lone surrogate, which no report takes) is not one
        days = sorted(d[:10] for f in live if (d := iso_time(f.get("upload_time"))))
        if live:
            out[version] = days[0] if days else "an unknown day"
    return out


def base_proposals(lock: Lock, names: Sequence[str], up: Upstreams) -> list[Proposal]:
    out: list[Proposal] = []
    for name in sorted(names):
        base = lock.bases[name]
        ref = parse_ref(base.ref)
        if ref.tag is None:
            continue
        found = newer(ref.tag, up.tags(base.ref))
        if not found:
            continue
        targets = tuple(t.name for t in users(lock, name))
        moves = carried(lock, base)
        on_pypi: dict[str, dict[str, str]] = {}
        for d in moves:
            on_pypi.setdefault(
                d.derivation.package,
                releases(up.pypi, d.derivation.package, f"bases.{name}: {d.derivation.package}"),
            )
        for v in found:
            also, verdicts = [], []
            for d in moves:
                pkg, seen = d.derivation.package, on_pypi[d.derivation.package]
                also.append(
                    f"targets.{d.target}.build_args.{d.arg}: {d.derivation.version} -> {v.version}"
                )
                if v.version in seen:
                    also.append(
                        f"pip.{d.pip}: {d.file} derived again for {pkg}[{d.derivation.extra}]"
                        f"=={v.version} ({pkg} {v.version} on PyPI since {seen[v.version]})"
                    )
                else:
                    verdicts.append(
                        Verdict(
                            target=d.target,
                            check="pip",
                            status="fail",
                            detail=f"{pkg} {v.version} is not on the index ({up.pypi.shown}): "
                            f"{d.file} ({pkg}[{d.derivation.extra}]) cannot be derived for it",
                            fix=f"wait for {pkg} {v.version} on PyPI, or stay on {ref.tag}",
                        )
                    )
            out.append(
                Proposal(
                    kind="bases",
                    name=name,
                    pinned=ref.tag,
                    version=v.version,
                    new=f"{base.ref.rsplit(':', 1)[0]}:{v.tag}",
                    targets=targets,
                    also=tuple(also),
                    verdicts=tuple(verdicts),
                )
            )
    return out


def source_proposals(lock: Lock, names: Sequence[str], up: Upstreams) -> list[Proposal]:
    from lockpipe.refresh.sources import pinned_tag

    out: list[Proposal] = []
    for name in sorted(names):
        source = lock.sources[name]
        pinned = pinned_tag(source) or _root_tag(source)
        at = build_number(pinned)
        if pinned is None or at is None:
            continue
        newest = _latest_build(source, up.github)
        if newest <= at:
            continue
        targets = tuple(t for t, x in sorted(lock.targets.items()) if x.source == name)
        between = newest - at - 1
        skipped = (f"up to {between} build number(s) between them (GitHub's latest release is "
                   "read, not every tag)",) if between > 0 else ()  # fmt: skip
        out.append(
            Proposal(
                kind="sources",
                name=name,
                pinned=pinned,
                version=f"b{newest}",
                new=f"{source.repository}/releases/tag/b{newest}",
                targets=targets,
                also=skipped,
            )
        )
    return out


def _latest_build(source: Source, github: Api) -> int:
    """The build number of the repository's latest release (``bNNNN``).

    GitHub's ``/releases/latest`` is documented as the most recent non-prerelease,
    non-draft release by ``created_at`` (docs.github.com/rest/releases/releases#get-the-
    latest-release), and llama.cpp makes a release of every build tag. Its ``/tags`` list
    is not documented as ordered at all, and holds thousands of tags: every page of it was
    read, past MAX_PAGES (issue 18). A latest release whose tag is no build number is a
    FetchError naming the fix."""
    from lockpipe.refresh.sources import slug

    what, path = f"sources.{source.name}", f"repos/{slug(source)}/releases/latest"
    read = Reader(where=f"{what}: {github.url(path)}", root="the answer", error=FetchError,
                  fix=f"is {github.shown} {github.name}?")  # fmt: skip
    tag = read.get(github.get(path, what), ("tag_name",), str)
    number = build_number(tag)
    if number is None:
        raise FetchError(f"{what}: {github.url(path)}: the latest release's tag_name "
                         f"{shown(tag, 60)} is no build tag "
                         "(bNNNN), so no newer build can be proposed; propose one by hand: "
                         "set the source's url to a newer build tag's archive")  # fmt: skip
    return number


def _root_tag(source: Source) -> str | None:
    """``llama.cpp-b10069`` (GitHub's archive folder) -> ``b10069``."""
    root = source.root or ""
    return root.rsplit("-", 1)[-1] if "-" in root else None


def pip_proposals(lock: Lock, names: Sequence[str], up: Upstreams) -> list[Proposal]:
    """Derived files no base carries: every newer stable release of their package."""
    moving = {d.pip for b in lock.bases.values() for d in carried(lock, b)}
    out = []
    for d in derived_files(lock):
        if d.pip in moving or d.pip not in names:
            continue
        pkg, pinned = d.derivation.package, d.derivation.version
        for version, day in sorted(
            releases(up.pypi, pkg, f"pip.{d.pip}").items(), key=lambda kv: Version(kv[0])
        ):
            if Version(version) > Version(pinned):
                out.append(
                    Proposal(
                        kind="pip",
                        name=d.pip,
                        pinned=pinned,
                        version=version,
                        new=f"{pkg}[{d.derivation.extra}]=={version}",
                        targets=(d.target,),
                        also=(f"on PyPI since {day}",),
                    )
                )
    return out


def hold(
    proposals: Sequence[Proposal], record: firstseen.Record, now: datetime, min_age: timedelta
) -> tuple[list[Proposal], dict[str, dict[str, str]]]:
    """Each proposal stamped from the first-seen record (the new ones stamped ``now``), and
    held when first seen less than ``min_age`` ago; the record with the new stamps."""
    seen: dict[str, dict[str, str]] = {k: dict(v) for k, v in record.items()}
    for p in proposals:
        seen = firstseen.observe(seen, p.key, [p.version], now)
    out = []
    for p in proposals:
        when = firstseen.first_seen(seen, p.key, p.version)
        age = firstseen.age(seen, p.key, p.version, now)
        held = None
        if age < min_age:
            held = (
                f"first seen {firstseen.stamp(when or now)}, {_days(age)} ago; --min-age "
                f"{_days(min_age)}"
            )
        out.append(replace(p, first_seen=firstseen.stamp(when or now), held=held))
    return out, seen


def _days(d: timedelta) -> str:
    return f"{d.total_seconds() / 86400:.1f} days"


def propose(lock: Lock, chosen: Mapping[Kind, Sequence[str]], up: Upstreams) -> list[Proposal]:
    """Every proposal for the chosen entries, per kind (a base brings the pip side it
    carries; payloads have no versions to propose)."""
    return [
        *base_proposals(lock, chosen.get("bases", ()), up),
        *source_proposals(lock, chosen.get("sources", ()), up),
        *pip_proposals(lock, chosen.get("pip", ()), up),
    ]


KINDS: tuple[Kind, ...] = ("bases", "sources", "pip")  # the order proposals are listed in


def propose_each(
    lock: Lock, chosen: Mapping[Kind, Sequence[str]], up: Upstreams
) -> tuple[list[Proposal], list[tuple[Kind, str, FetchError | RegistryError]]]:
    """``--dry-run``: each entry proposed on its own, as :func:`lockpipe.refresh.plan.
    resolve_each` resolves them, so an upstream that cannot be reached (its ``tags/list``,
    GitHub, the index) costs that entry's proposals, not the report; its failure comes back
    with the entry, for the report's line and the exit code."""
    found: list[Proposal] = []
    failed: list[tuple[Kind, str, FetchError | RegistryError]] = []
    for kind in KINDS:
        for name in sorted(chosen.get(kind, ())):
            try:
                found += propose(lock, {kind: [name]}, up)
            except (FetchError, RegistryError) as exc:
                failed.append((kind, name, exc))
    return found, failed
