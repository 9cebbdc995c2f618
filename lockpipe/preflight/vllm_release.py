"""The preflight rules of one vLLM version, and deriving them from that version's wheel.

``rules_for(VERSION)`` is the one way in: the facts :mod:`.vllm_source` extracted from
``vllm-VERSION``'s wheel (``data/vllm-VERSION.json``). Rules derived for another version
are refused, with the command that derives the right ones, so preflight never judges a
lock's ``VLLM_VERSION`` by another release's code.

Rules are found beside the lock first (``vllm-rules/`` in the lock's folder: what
``lockpipe lock`` derived for a version this lockpipe does not ship), then in lockpipe's
own ``data/`` (:func:`rules_of`).

``derive(VERSION)`` fetches the wheel from PyPI with pip (``--no-deps``, wheels only) and
writes its facts; ``lockpipe lock`` calls it, into the lock's ``vllm-rules/``, for every
``VLLM_VERSION`` of the lock whose rules are missing, and ``lock --check`` fails while one
is missing (see :func:`missing`). ``python -m lockpipe.preflight.vllm_release VERSION
[--data DIR]`` does the same by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from lockpipe import cmd
from lockpipe.errors import FetchError, LockError, LockpipeError
from lockpipe.fs import write_atomic
from lockpipe.jsonshape import Reader, loads
from lockpipe.lock.model import Lock

DATA = Path(__file__).with_name("data")


def rules_path(version: str, data: Path = DATA) -> Path:
    return data / f"vllm-{version}.json"


def fix_for(version: str, data: Path = DATA) -> str:
    """The command that derives ``version``'s rules where preflight reads them."""
    where = "" if data == DATA else f" --data {data}"
    return (
        f"lockpipe lock (derives the rules of every VLLM_VERSION it pins), or "
        f"python -m lockpipe.preflight.vllm_release {version}{where}"
    )


def rules_for(version: str, data: Path = DATA) -> Mapping[str, Any]:
    """The facts of vLLM ``version``'s wheel; LockError when they are missing, unreadable
    or were derived from another version's wheel (the message names the fix)."""
    path = rules_path(version, data)
    try:
        doc: Any = loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LockError(
            f"no preflight rules for vLLM {version} ({path}): derive them with "
            f"{fix_for(version, data)}"
        ) from None
    except (OSError, ValueError) as exc:
        raise LockError(f"{path} is unreadable ({exc}): {fix_for(version, data)}") from None
    # JSON of another shape ([]) was an AttributeError's traceback
    read = Reader(where=str(path), root="the rules file", error=LockError,
                  fix=f"derive them again: {fix_for(version, data)}")  # fmt: skip
    facts: dict[str, Any] = read.get(doc, (), dict)
    found = facts.get("wheel")
    wheel: dict[str, Any] = found if isinstance(found, dict) else {}
    derived = facts.get("vllm")
    from_file = str(wheel.get("file", "")).split("-")[1:2]
    if derived != version or from_file != [version]:
        raise LockError(
            f"{path} holds rules derived for vLLM {derived} (from {wheel.get('file')}), "
            f"not {version}: preflight will not judge {version} by them; "
            f"{fix_for(version, data)}"
        )
    return facts


def beside(lock: Lock) -> Path:
    """Where ``lockpipe lock`` writes the rules it derives: ``vllm-rules/`` by the lock."""
    return lock.path.parent / "vllm-rules"


def source_of(lock: Lock, version: str) -> Path:
    """The folder ``version``'s rules are read from: the lock's own ``vllm-rules/`` when it
    holds them, else lockpipe's ``data/`` when that does, else the lock's (to derive into)."""
    here = beside(lock)
    if rules_path(version, here).is_file() or not rules_path(version).is_file():
        return here
    return DATA


def rules_of(lock: Lock, version: str) -> Mapping[str, Any]:
    """:func:`rules_for` from :func:`source_of`; the error names the fix for that folder."""
    return rules_for(version, source_of(lock, version))


def missing(lock: Lock) -> list[str]:
    """The lock's ``VLLM_VERSION``s whose rules :func:`rules_of` refuses."""
    out = []
    for version in pinned(lock):
        try:
            rules_of(lock, version)
        except LockError:
            out.append(version)
    return out


def pinned(lock: Lock) -> list[str]:
    """The vLLM versions the lock's vLLM targets build with (``VLLM_VERSION``)."""
    found = {
        t.build_args["VLLM_VERSION"]
        for t in lock.targets.values()
        if t.serve.runtime == "vllm" and "VLLM_VERSION" in t.build_args
    }
    return sorted(found)


def fetch_wheel(version: str, dest: Path, python: str = sys.executable) -> Path:
    """PyPI's default wheel of vLLM ``version`` (not the cu129 build inside the image)."""
    cmd.call([python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
              f"vllm=={version}", "-d", str(dest)])  # fmt: skip
    found = sorted(dest.glob(f"vllm-{version}-*.whl"))
    if not found:
        raise FetchError(f"pip fetched no vllm-{version}-*.whl into {dest}: is {version} "
                         "on PyPI? (pip index versions vllm)")  # fmt: skip
    return found[0]


def derive(version: str, data: Path = DATA, wheel: Path | None = None) -> Path:
    """Write ``data/vllm-VERSION.json`` from that version's wheel (fetched when not given);
    the file it wrote."""
    from lockpipe.preflight import vllm_source  # the AST reader: only deriving needs it

    with tempfile.TemporaryDirectory(prefix="lockpipe-vllm-rules-") as tmp:
        path = wheel or fetch_wheel(version, Path(tmp))
        try:
            facts = vllm_source.extract(path)
        except OSError as exc:  # no such wheel, a folder, unreadable
            raise LockError(f"{path}: cannot read it ({exc.strerror}); pass a vLLM wheel "
                            "(vllm-VERSION-*.whl), or no --wheel") from None  # fmt: skip
        except (zipfile.BadZipFile, KeyError, IndexError, SyntaxError, ValueError) as exc:
            what = f"{type(exc).__name__}: {exc}"
            raise LockError(f"{path}: not a vLLM wheel preflight can read ({what}); pass "
                            f"vllm-{version}-*.whl from PyPI, or no --wheel") from None  # fmt: skip
    if facts["vllm"] != version:
        raise LockError(f"{path.name} is vLLM {facts['vllm']}, not {version}")
    out = rules_path(version, data)
    # whole or not at all: preflight and lock --check read it, maybe while it is written
    write_atomic(out, json.dumps(facts, indent=1, sort_keys=True) + "\n")
    return out


class OneLineParser(argparse.ArgumentParser):
    """argparse, whose usage error is one line (``PROG: error: …; see --help``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}; see --help\n")


def main(argv: list[str] | None = None) -> int:
    """A maintainer's tool: one line on stderr and the error's exit code when it fails (a
    missing wheel, one that is no zip, a --data that is a file were tracebacks)."""
    p = OneLineParser(prog="python -m lockpipe.preflight.vllm_release")
    p.add_argument("version")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--wheel", type=Path, help="a wheel already on disk (default: from PyPI)")
    args = p.parse_args(argv)
    try:
        print(derive(args.version, args.data, args.wheel))
    except LockpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.return_code
    except OSError as exc:  # --data a file, or not writable
        print(f"error: {exc.filename}: cannot write the rules there ({exc.strerror}); "
              "pass --data a writable folder", file=sys.stderr)  # fmt: skip
        return LockError.return_code
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
