"""One table of exit codes: defined in lockpipe/errors.py only, and the README's matches it."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import lockpipe
from lockpipe import errors
from lockpipe.errors import INTERRUPTED, LockpipeError

REPO = Path(__file__).resolve().parents[2]


def _all_subclasses(cls: type[Exception]) -> set[type[Exception]]:
    out: set[type[Exception]] = set()
    sub: type[Exception]
    for sub in cls.__subclasses__():
        out |= {sub, *_all_subclasses(sub)}
    return out


def test_only_errors_py_sets_an_exit_code() -> None:
    for info in pkgutil.walk_packages(lockpipe.__path__, "lockpipe."):
        if info.name != "lockpipe.__main__":
            importlib.import_module(info.name)
    elsewhere = [
        f"{cls.__module__}.{cls.__name__}"
        for cls in _all_subclasses(LockpipeError)
        if cls.__module__ != errors.__name__ and "return_code" in vars(cls)
    ]
    assert not elsewhere, f"exit codes set outside lockpipe/errors.py: {elsewhere}"


def test_codes_are_distinct() -> None:
    codes = [code for code, _, _ in errors.table()]
    assert len(codes) == len(set(codes))
    assert INTERRUPTED not in codes


def test_the_readme_table_is_the_code_table() -> None:
    text = (REPO / "README.md").read_text()
    readme = {(int(c), n) for c, n in re.findall(r"^\| (\d+) \| `(\w+)` \|", text, re.M)}
    assert readme == {(code, name) for code, name, _ in errors.table()}
    assert f"| {INTERRUPTED} | (interrupted) |" in text
