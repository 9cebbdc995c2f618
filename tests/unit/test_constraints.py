"""lockpipe's own inputs are pinned: every dependency in pyproject.toml, by version and hash."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest and mypy bring tomli on 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

REPO = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _pinned(path: Path) -> dict[str, list[str]]:
    """name -> the hashes of each pinned version line in a --generate-hashes file."""
    pins: dict[str, list[str]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9._-]+)==\S+", line):
            current = _name(m.group(1))
            pins.setdefault(current, [])
        elif m := re.search(r"--hash=sha256:([0-9a-f]{64})", line):
            pins[current].append(m.group(1))
    return pins


@pytest.mark.parametrize(("file", "extra"), [("runtime.txt", None), ("dev.txt", "dev")])
def test_every_dependency_is_pinned_with_hashes(file: str, extra: str | None) -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    if extra:
        wanted |= {_name(r) for r in project["optional-dependencies"][extra]}
    pins = _pinned(REPO / "constraints" / file)
    missing = wanted - set(pins)
    assert not missing, f"constraints/{file} lacks {missing}; run nox -s constraints"
    unhashed = [n for n, hashes in pins.items() if not hashes]
    assert not unhashed, f"constraints/{file}: no hashes for {unhashed}"
