"""Pure: the closure facts of a derived requirements file, and the static closure check.

A derived requirements file (``lockpipe.lock.requirements``) pins what
``vllm[audio]==V`` adds to ``vllm==V``: the base image already carries vLLM's core
closure, and the image installs the file with ``--no-deps``, so nothing checks at
install time that each pinned wheel's own requirements are met. The derivation
(``lockpipe.refresh.pip``) writes, beside the file, the facts this check needs
(``requirements-audio.closure.json``): the core closure's versions, the metadata of
every pinned wheel, and that of core packages the extra asks more of
(``vllm[audio]``, ``mistral_common[audio]``). The facts are tied to the file by its
sha256. The check evaluates every ``Requires-Dist`` for the base's Python on Linux
x86_64, and each requirement must be met, name, version and extras, by the pinned
set or the core closure. The derivation walks pip's graph with the same markers
(``reach``). No network here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from lockpipe.errors import LintError
from lockpipe.jsonshape import loads
from lockpipe.lock.requirements import (
    REGENERATE,
    Derivation,
    Pin,
    canonical,
    derived_for,
    parse_pins,
)

MACHINE = "x86_64"


# -- requirements as pip evaluates them on the base image -----------------------------------


def marker_env(python: str) -> dict[str, str]:
    """The PEP 508 marker environment of CPython ``python`` (``3.12``) on Linux x86_64."""
    full = f"{python}.0"
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": "posix",
        "platform_machine": MACHINE,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": full,
        "python_version": python,
        "sys_platform": "linux",
    }


def parse_requirement(text: str, where: str) -> Requirement:
    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise LintError(f"{where}: {text!r} is not a PEP 508 requirement ({exc})") from None


def applies(req: Requirement, extras: Iterable[str], env: Mapping[str, str]) -> bool:
    """Whether ``req`` is needed by a package installed with ``extras``, as pip decides."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": e}) for e in ("", *extras))


def bare(req: Requirement) -> str:
    """``req`` without its marker: ``name[extras]specifier``."""
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return f"{req.name}{extras}{req.specifier}"


# -- the closure facts ----------------------------------------------------------------------


def closure_path(requirements: Path) -> Path:
    """``requirements-audio.txt`` → ``requirements-audio.closure.json`` beside it."""
    return requirements.with_name(f"{requirements.stem}.closure.json")


def sha256_text(text: str) -> str:
    """What the facts record of a requirements file's text, to tie the two together."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Package:
    """One distribution's facts: what the check needs to evaluate its requirements."""

    version: str
    extras: tuple[str, ...] = ()
    requires_dist: tuple[str, ...] = ()
    sha256: str | None = None  # pinned wheels only
    wheel: str | None = None  # pinned wheels only: the file name, for review

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "extras": list(self.extras),
                               "requires_dist": list(self.requires_dist)}  # fmt: skip
        if self.sha256 is not None:
            out["sha256"] = self.sha256
        if self.wheel is not None:
            out["wheel"] = self.wheel
        return out


@dataclass(frozen=True, kw_only=True)
class Closure:
    """The facts a derivation found, as ``*.closure.json`` stores them."""

    package: str
    extra: str
    version: str
    python: str
    platform: str
    requirements_sha256: str
    core: Mapping[str, str]  # the closure of package==version: name -> version
    core_extras: Mapping[str, tuple[str, ...]]  # extras that closure asks of its packages
    extended: Mapping[str, Package]  # core packages the extra asks more extras of
    pinned: Mapping[str, Package]  # what the requirements file pins

    @property
    def derivation(self) -> Derivation:
        return Derivation(package=self.package, extra=self.extra, version=self.version)

    def to_json(self) -> str:
        doc = {
            "generated_by": "nox -s lock (lockpipe/refresh/pip.py); do not edit by hand",
            "package": self.package,
            "extra": self.extra,
            "version": self.version,
            "python": self.python,
            "platform": self.platform,
            "requirements_sha256": self.requirements_sha256,
            "core": dict(sorted(self.core.items())),
            "core_extras": {k: list(v) for k, v in sorted(self.core_extras.items())},
            "extended": {k: v.to_json() for k, v in sorted(self.extended.items())},
            "pinned": {k: v.to_json() for k, v in sorted(self.pinned.items())},
        }
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _package(doc: Any, where: str) -> Package:
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), str):
        raise LintError(f"{where}: not an object with a version; {REGENERATE}")
    return Package(
        version=doc["version"],
        extras=tuple(doc.get("extras", ())),
        requires_dist=tuple(doc.get("requires_dist", ())),
        sha256=doc.get("sha256"),
        wheel=doc.get("wheel"),
    )


def parse_closure(text: str, where: str) -> Closure:
    """A ``*.closure.json`` text; LintError naming the fix if it is not one."""
    try:
        doc = loads(text)
        return Closure(
            package=doc["package"],
            extra=doc["extra"],
            version=doc["version"],
            python=doc["python"],
            platform=doc["platform"],
            requirements_sha256=doc["requirements_sha256"],
            core=dict(doc["core"]),
            core_extras={k: tuple(v) for k, v in doc["core_extras"].items()},
            extended={k: _package(v, f"{where}: extended.{k}") for k, v in doc["extended"].items()},
            pinned={k: _package(v, f"{where}: pinned.{k}") for k, v in doc["pinned"].items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LintError(f"{where}: not closure facts ({type(exc).__name__}: {exc}); "
                        f"{REGENERATE}") from None  # fmt: skip


# -- the graph walk (the derivation's) and the check (lint's) -------------------------------


@dataclass(frozen=True)
class Node:
    version: str
    requires_dist: tuple[str, ...]


@dataclass(frozen=True)
class Reached:
    """What a walk from a root reached: name → extras asked of it, and requirements with no node."""

    extras: Mapping[str, frozenset[str]]
    missing: tuple[str, ...]  # bare requirements (no marker) the graph has no package for


def reach(
    graph: Mapping[str, Node], root: str, extras: Iterable[str], env: Mapping[str, str]
) -> Reached:
    """Walk ``graph`` (canonical name → node) from ``root[extras]``, with ``env``'s markers."""
    asked: dict[str, frozenset[str]] = {}
    missing: list[str] = []
    todo = [(canonical(root), frozenset(extras))]
    while todo:
        name, want = todo.pop()
        before = asked.get(name)
        if before is not None and want <= before:
            continue
        asked[name] = want | (before or frozenset())
        for text in graph[name].requires_dist:
            req = parse_requirement(text, f"{name} {graph[name].version}")
            if not applies(req, asked[name], env):
                continue
            dep = canonical(req.name)
            if dep in graph:
                todo.append((dep, frozenset(req.extras)))
            elif bare(req) not in missing:
                missing.append(bare(req))
    return Reached(extras=asked, missing=tuple(missing))


def unmet(closure: Closure) -> list[str]:
    """Every applicable requirement of the pinned wheels (and of the core packages' new
    extras) that the pinned set and the core closure do not meet, one line each."""
    env = marker_env(closure.python)
    versions = {**closure.core, **{n: p.version for n, p in closure.pinned.items()}}
    extras: dict[str, set[str]] = {n: set(e) for n, e in closure.core_extras.items()}
    for n, p in [*closure.extended.items(), *closure.pinned.items()]:
        extras.setdefault(n, set()).update(p.extras)
    core = f"{closure.package} {closure.version}'s core closure"
    problems = []
    for name, pkg, base_too in [
        *((n, p, False) for n, p in sorted(closure.extended.items())),
        *((n, p, True) for n, p in sorted(closure.pinned.items())),
    ]:
        asked = f"[{','.join(pkg.extras)}]" if pkg.extras else ""
        for text in pkg.requires_dist:
            req = parse_requirement(text, f"{name} {pkg.version}")
            if not applies(req, pkg.extras, env):
                continue
            if not base_too and applies(req, (), env):
                continue  # the core closure met it: only the extras' requirements are new
            why = _why_unmet(req, versions, extras, core)
            if why:
                problems.append(f"{name}{asked} {pkg.version} requires {bare(req)}: {why}")
    return problems


def _why_unmet(
    req: Requirement, versions: Mapping[str, str], extras: Mapping[str, set[str]], core: str
) -> str | None:
    dep = canonical(req.name)
    have = versions.get(dep)
    if have is None:
        return f"not pinned, and not in {core}"
    if not req.specifier.contains(have, prereleases=True):
        return f"the closure has {dep} {have}"
    known = {canonical(e) for e in extras.get(dep, ())}
    lacking = sorted({canonical(e) for e in req.extras} - known)
    if lacking:
        return f"the closure has no facts for {dep}'s extras {', '.join(lacking)}"
    return None


def problems(
    requirements: str,
    closure_text: str | None,
    *,
    where: str,
    closure_where: str,
    expected_version: str | None,
    version_from: str,
) -> list[str]:
    """Everything wrong with a derived requirements file and its closure facts, one line each.

    ``expected_version``: the version the target builds with (its build arg named by
    ``version_from``); the file must have been derived for that one.
    """
    derivation = derived_for(requirements)
    if derivation is None:
        return [f"{where}: no `# derived-for: PKG[EXTRA]==V` header, so its closure cannot be "
                f"checked; {REGENERATE}"]  # fmt: skip
    out = []
    if expected_version is None:
        out.append(f"{version_from} is missing; {where} is derived for {derivation} and must "
                   "match the version the image is built with")  # fmt: skip
    elif expected_version != derivation.version:
        out.append(f"{where} was derived for {derivation}, but {version_from} is "
                   f"{expected_version}; re-derive with nox -s lock")  # fmt: skip
    if closure_text is None:
        return [*out, f"{closure_where} is missing; {REGENERATE}"]
    try:
        closure = parse_closure(closure_text, closure_where)
        if closure.requirements_sha256 != sha256_text(requirements):
            return [*out, f"{closure_where} records sha256 {closure.requirements_sha256} of "
                    f"{where}, the file has {sha256_text(requirements)}: one of them was edited "
                    f"by hand; {REGENERATE}"]  # fmt: skip
        if closure.derivation != derivation:
            out.append(f"{closure_where} is for {closure.derivation}, {where} says "
                       f"{derivation}; {REGENERATE}")  # fmt: skip
        out += _pins_match(parse_pins(requirements, where), closure, where, closure_where)
        out += [f"{where}: {p}" for p in unmet(closure)]
    except LintError as exc:
        out.append(str(exc))
    return out


def _pins_match(pins: Mapping[str, Pin], closure: Closure, where: str, cwhere: str) -> list[str]:
    facts = {n: (p.version, p.sha256) for n, p in closure.pinned.items()}
    pinned = {n: (p.version, p.sha256) for n, p in pins.items()}
    if facts == pinned:
        return []
    differ = sorted(n for n in facts.keys() | pinned.keys() if facts.get(n) != pinned.get(n))
    return [f"{where} and {cwhere} pin {', '.join(differ)} differently; {REGENERATE}"]
