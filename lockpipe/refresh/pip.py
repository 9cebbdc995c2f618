"""Derive a requirements file from PyPI: what ``PKG[EXTRA]==V`` adds to ``PKG==V``.

The base image carries ``vllm==V`` and its closure; the image adds the audio
extra with ``pip install --no-deps --require-hashes``. So the file must pin the
closure of ``vllm[audio]==V`` minus the closure of ``vllm==V``, for the base's
Python and platform. pip resolves both without installing anything
(``install --dry-run --report``, wheels only, ``--python-version`` and
``--platform`` for the base): with pip >= 25.3 a dry run reads each wheel's
metadata alone, from PyPI's ``.metadata`` files (PEP 658) or, where the index
does not offer them, by HTTP range requests into the wheel (``fast-deps``), so
torch's gigabytes are never downloaded.

pip evaluates environment markers for the Python that runs it, not for
``--python-version``; so the closure is walked again here with the target's
markers (``lockpipe.lock.closure.reach``), and what the target needs that pip
left out is asked for explicitly in another round. The result is written with
its closure facts and checked (``closure.unmet``) before anything is written.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from lockpipe.cmd import QUERY_TIMEOUT, call
from lockpipe.errors import EngineError, FetchError, LintError, LockError, UsageError
from lockpipe.fs import read_utf8, write_atomic
from lockpipe.lock import closure as cl
from lockpipe.lock import requirements as rq
from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import Lock
from lockpipe.log import echo

INDEX = "https://pypi.org/simple"
PYTHON = "3.12"  # the vllm/vllm-openai base's Python
PLATFORM = "manylinux_2_35_x86_64"  # its glibc (Ubuntu 22.04): wheels for 2.35 and older
PIP_MIN = (25, 3)  # older pips download every wheel in full at the end of a dry run
ROUNDS = 4  # re-resolutions for requirements whose markers differ between host and target
_MANYLINUX = re.compile(r"^manylinux_2_(\d+)_(\w+)$")


@dataclass(frozen=True, kw_only=True)
class Spec:
    """What to derive: ``package[extra]==version`` minus ``package==version``, for a platform."""

    package: str
    extra: str
    version: str
    python: str = PYTHON
    platform: str = PLATFORM
    index: str = INDEX

    @property
    def derivation(self) -> rq.Derivation:
        return rq.Derivation(package=self.package, extra=self.extra, version=self.version)

    def where(self) -> str:
        return f"CPython {self.python} on {self.platform}"


@dataclass(frozen=True)
class Wheel:
    url: str
    sha256: str

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """One closure as pip resolved it, walked with the target's markers."""

    graph: dict[str, cl.Node]
    wheels: dict[str, Wheel]
    reached: cl.Reached
    asked: tuple[str, ...]  # requirements asked for beside the root, for the target's markers


@dataclass(frozen=True)
class Derived:
    requirements: str
    closure: cl.Closure


def platforms(platform: str) -> list[str]:
    """``manylinux_2_35_x86_64`` → every manylinux tag a glibc 2.35 machine takes, newest first."""
    m = _MANYLINUX.match(platform)
    if m is None:
        raise UsageError(f"{platform}: not a manylinux_2_N_ARCH platform tag")
    newest, arch = int(m[1]), m[2]
    tags = [f"manylinux_2_{n}_{arch}" for n in range(newest, 4, -1)]
    return [*tags, f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]


def check_pip() -> None:
    """The pip beside this Python resolves from metadata alone, or UsageError naming the fix."""
    try:
        out = call([sys.executable, "-m", "pip", "--version"], quiet=True, timeout=QUERY_TIMEOUT)
    except EngineError:
        out = "no pip"
    m = re.match(r"pip (\d+)\.(\d+)", out)
    if m is None or (int(m[1]), int(m[2])) < PIP_MIN:
        found = m.group(0) if m else out.strip()
        want = ".".join(map(str, PIP_MIN))
        raise UsageError(f"{found} here; deriving needs pip >= {want}, whose dry run reads "
                         "wheel metadata alone (older ones download every wheel, gigabytes for "
                         f"torch): {sys.executable} -m pip install 'pip>={want}'")  # fmt: skip


def pip_report(requests: Sequence[str], spec: Spec, work: Path) -> dict[str, Any]:
    """pip's installation report for ``requests``, resolved for ``spec``'s platform; nothing
    is installed. FetchError with pip's own error lines if it cannot resolve them."""
    report = work / "report.json"
    args = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet",
            "--disable-pip-version-check", "--ignore-installed", "--only-binary=:all:",
            "--index-url", spec.index, "--use-feature=fast-deps", "--timeout", "60",
            "--implementation", "cp", "--python-version", spec.python,
            *(f"--platform={p}" for p in platforms(spec.platform)),
            "--target", str(work / "target"), "--report", str(report), *requests]  # fmt: skip
    try:
        call(args, quiet=True)
    except EngineError as exc:
        said = [ln.strip() for ln in str(exc).splitlines() if ln.strip().startswith("ERROR:")]
        raise FetchError(f"pip could not resolve {' '.join(requests)} from {spec.index} for "
                         f"{spec.where()}: {' '.join(said) or str(exc)[-400:]}; check the "
                         "version and that PyPI can be reached") from None  # fmt: skip
    doc: dict[str, Any] = json.loads(read_utf8(report, FetchError))  # pip writes UTF-8
    env = doc.get("environment", {})
    if env.get("sys_platform") != "linux" or env.get("platform_machine") != cl.MACHINE:
        raise UsageError(f"pip evaluated markers for {env.get('sys_platform')} "
                         f"{env.get('platform_machine')}; derive on Linux {cl.MACHINE}, "
                         "the base image's platform")  # fmt: skip
    return doc


def graph_of(report: dict[str, Any]) -> tuple[dict[str, cl.Node], dict[str, Wheel]]:
    """Each package of a pip report: its version and requirements, and its wheel."""
    graph, wheels = {}, {}
    for item in report["install"]:
        meta, info = item["metadata"], item["download_info"]
        name = rq.canonical(meta["name"])
        graph[name] = cl.Node(version=meta["version"],
                              requires_dist=tuple(meta.get("requires_dist") or ()))  # fmt: skip
        sha256 = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if not sha256:
            raise FetchError(f"the index gave no sha256 for {info.get('url')}; use an index "
                             "that publishes hashes (PyPI does) for lock to pin it")  # fmt: skip
        wheels[name] = Wheel(url=info["url"], sha256=sha256)
    return graph, wheels


def resolve(spec: Spec, extras: Sequence[str], work: Path, asked: Sequence[str] = ()) -> Resolution:
    """The closure of ``spec.package[extras]==spec.version`` for the target's markers.

    ``asked``: requirements the target's markers need and the host's leave out, known
    from an earlier resolution (each round that finds more costs a whole pip run).
    """
    root = f"{spec.package}[{','.join(extras)}]" if extras else spec.package
    asked = list(asked)
    for _ in range(ROUNDS):
        echo(f"  pip resolves {' '.join([f'{root}=={spec.version}', *asked])} (metadata only)")
        graph, wheels = graph_of(pip_report([f"{root}=={spec.version}", *asked], spec, work))
        reached = cl.reach(graph, spec.package, extras, cl.marker_env(spec.python))
        new = [r for r in reached.missing if r not in asked]
        if not reached.missing:
            return Resolution(graph=graph, wheels=wheels, reached=reached, asked=tuple(asked))
        if not new:
            break
        asked += new
    raise FetchError(f"{root}=={spec.version}: pip's resolution still lacks "
                     f"{', '.join(reached.missing)} for {spec.where()}")  # fmt: skip


def derive(spec: Spec) -> Derived:
    """Resolve both closures, take the difference, check it, and render the two files."""
    check_pip()
    echo(f"deriving {spec.derivation} minus {spec.package}=={spec.version} for {spec.where()}")
    with tempfile.TemporaryDirectory(prefix="lockpipe-pip-") as tmp:
        core = resolve(spec, (), Path(tmp))
        full = resolve(spec, (spec.extra,), Path(tmp), core.asked)
    core_x, full_x = core.reached.extras, full.reached.extras
    pinned = {
        n: cl.Package(version=full.graph[n].version, extras=tuple(sorted(full_x[n])),
                      requires_dist=full.graph[n].requires_dist,
                      sha256=full.wheels[n].sha256, wheel=full.wheels[n].filename)
        for n in sorted(full_x.keys() - core_x.keys())
    }  # fmt: skip
    extended = {
        n: cl.Package(version=core.graph[n].version, extras=tuple(sorted(full_x[n] - core_x[n])),
                      requires_dist=core.graph[n].requires_dist)
        for n in sorted(full_x.keys() & core_x.keys())
        if full_x[n] - core_x[n]
    }  # fmt: skip
    text = rq.render_requirements(
        spec.derivation,
        (rq.Pin(name=n, version=p.version, sha256=p.sha256 or "") for n, p in pinned.items()),
        python=spec.python, platform=spec.platform,
    )  # fmt: skip
    facts = cl.Closure(
        package=spec.package, extra=spec.extra, version=spec.version, python=spec.python,
        platform=spec.platform, requirements_sha256=cl.sha256_text(text),
        core={n: core.graph[n].version for n in sorted(core_x)},
        core_extras={n: tuple(sorted(e)) for n, e in sorted(core_x.items()) if e},
        extended=extended, pinned=pinned,
    )  # fmt: skip
    broken = cl.unmet(facts)
    if broken:
        raise LintError(f"{spec.derivation}: the derived set fails its closure check, so no "
                        "--no-deps install of it can work:\n  " + "\n  ".join(broken))  # fmt: skip
    return Derived(requirements=text, closure=facts)


def write(derived: Derived, requirements: Path) -> None:
    """Write the requirements file and its closure facts beside it."""
    write_atomic(requirements, derived.requirements)
    write_atomic(cl.closure_path(requirements), derived.closure.to_json())


@dataclass(frozen=True, kw_only=True)
class Change:
    pip: str
    file: str
    derivation: rq.Derivation
    pinned: dict[str, str]

    def __str__(self) -> str:
        pins = ", ".join(f"{n} {v}" for n, v in self.pinned.items())
        return f"pip.{self.pip}: {self.file} derived for {self.derivation}: {pins}"


def _stale(lock: Lock, file: str, wanted: str) -> bool:
    """Whether ``file`` must be derived again: another version, or facts that do not match."""
    path = lock.root / file
    facts = cl.closure_path(path)
    text = read_utf8(path, LockError)
    derivation = rq.derived_for(text)
    if derivation is None or derivation.version != wanted or not facts.is_file():
        return True
    try:
        closure = cl.parse_closure(read_utf8(facts, LintError), str(facts))
    except LintError:
        return True
    return closure.requirements_sha256 != cl.sha256_text(text)


def rederive(lock: Lock, *, force: bool = False) -> list[Change]:
    """Derive each derived requirements file again whose version or facts are stale (all of
    them with ``force``); hand-written files are left alone. Writes the files, not the lock."""
    changes: list[Change] = []
    done: set[str] = set()
    for target in sorted(lock.targets.values(), key=lambda t: t.name):
        for name in target.pip:
            file = lock.pip[name].file
            path = lock.root / file
            derivation = rq.derived_for(read_utf8(path, LockError)) if path.is_file() else None
            if derivation is None or file in done:
                continue
            arg = rq.version_arg(derivation.package)
            wanted = target.build_args.get(arg)
            if wanted is None:
                raise LockError(f"targets.{target.name}.build_args.{arg} is missing: {file} is "
                                f"derived from {derivation.package}[{derivation.extra}] for the "
                                "version the image builds with")  # fmt: skip
            done.add(file)
            if not force and not _stale(lock, file, wanted):
                continue
            spec = Spec(package=derivation.package, extra=derivation.extra, version=wanted)
            derived = derive(spec)
            write(derived, path)
            pins = {n: p.version for n, p in derived.closure.pinned.items()}
            changes.append(Change(pip=name, file=file, derivation=spec.derivation, pinned=pins))
    return changes


def relock_derived(lock: Lock, *, force: bool = False) -> tuple[dict[str, Any], list[Change]]:
    """Re-derive what is stale (or everything, ``force``), then the relocked document with a
    fresh ``origin`` on each pip entry derived anew."""
    changes = rederive(lock, force=force)
    doc = relock(lock)
    for change in changes:
        spec = Spec(package=change.derivation.package, extra=change.derivation.extra,
                    version=change.derivation.version)  # fmt: skip
        doc["pip"][change.pip]["origin"] = {
            "source": f"PyPI ({spec.index}): pip's resolver, {spec.derivation} minus "
            f"{spec.package}=={spec.version}, wheels for {spec.where()} (nox -s lock)",
            "seen": date.today().isoformat(),
        }
    return doc, changes
