"""pip: report a newer release of each top-level pin; never move one.

A derived requirements file (``# derived-for: vllm[audio]==0.29.0``) has one
top-level pin, the package it is derived for: the rest is its closure, which
``nox -s lock`` re-derives when the version changes. A hand-written file's
every ``name==version`` line is top-level. The latest release comes from the
index's JSON API (``{index}/pypi/{name}/json``: ``info.version``, the newest
release that is not a pre-release).
"""

from __future__ import annotations

import re

from packaging.version import Version

from lockpipe.errors import FetchError, LockError
from lockpipe.fs import read_utf8
from lockpipe.jsonshape import Reader
from lockpipe.lock import requirements as rq
from lockpipe.lock.model import Lock
from lockpipe.refresh.api import Api
from lockpipe.refresh.model import Newer

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;\\]+)")


def top_level(text: str) -> dict[str, str]:
    """The top-level ``name -> version`` pins of a requirements file's text."""
    derived = rq.derived_for(text)
    if derived is not None:
        return {rq.canonical(derived.package): derived.version}
    pins = {}
    for line in text.splitlines():
        m = _PIN.match(line.split("#", 1)[0].strip())
        if m:
            pins[rq.canonical(m[1])] = m[2]
    return pins


def latest(index: Api, package: str, what: str) -> str:
    """``info.version`` of ``package`` on the index; a FetchError naming ``what`` and the URL
    where there is none, or where it is not text (a lone surrogate, JSON's ``"\\ud800"``,
    which no report, log or terminal takes)."""
    url = index.url(f"pypi/{package}/json")
    doc = index.get(f"pypi/{package}/json", what)
    info = doc.get("info") if isinstance(doc, dict) else None
    version = info.get("version") if isinstance(info, dict) else None
    if not isinstance(version, str) or not version:
        raise FetchError(f"{what}: {url} has no info.version")
    read = Reader(where=f"{what}: {url}", root="the answer", error=FetchError,
                  fix=f"is {index.shown} {index.name}?")  # fmt: skip
    return read.get(doc, ("info", "version"), str)


def newer_releases(lock: Lock, names: list[str], index: Api) -> tuple[Newer, ...]:
    """Each top-level pin of the named pip entries with a newer release on the index."""
    out = []
    for name in names:
        file = lock.pip[name].file
        try:
            text = read_utf8(lock.root / file, LockError)
        except OSError as exc:
            raise FetchError(f"pip.{name}: cannot read {file} ({exc.strerror})") from None
        for package, pinned in sorted(top_level(text).items()):
            newest = latest(index, package, f"pip.{name}: {package}")
            try:
                moved_on = Version(newest) > Version(pinned)
            except ValueError:  # InvalidVersion, or a release number past int()'s 4300 digits
                moved_on = newest != pinned
            if moved_on:
                page = index.url(f"project/{package}/{newest}/")
                out.append(Newer(pip=name, file=file, package=package, pinned=pinned,
                                 latest=newest, url=page))  # fmt: skip
    return tuple(out)
