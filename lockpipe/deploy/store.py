"""The payload store a unit mounts at /store, and whether its payloads are there.

The store is the one named (``--store``, ``LOCKPIPE_STORE``), else the one the passing
smoke run mounted (``smoke.json`` records it), else the payloads verb's default with a
warning. A unit whose payloads are missing crash-loops every ``RestartSec``: installing
one is refused, naming the missing payloads and the fetch; rendering one (for another
host) only warns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from lockpipe.errors import DeployError
from lockpipe.lock.model import Lock
from lockpipe.log import echo
from lockpipe.payloads.store import default_store, file_path


def resolved(store: Path, named: str) -> Path:
    """``store`` made absolute, its links followed; DeployError naming it (``named``: where
    it came from) when that fails: a symlink loop was RuntimeError's traceback (Python
    3.11), and a unit mounting the loop (3.13, whose resolve() keeps it)."""
    try:
        path = store.expanduser().resolve()
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # not made yet
            path.stat()  # Python 3.13's resolve() leaves a loop in place; stat says ELOOP
        return path
    except (OSError, RuntimeError, ValueError) as exc:
        shown = str(store) if len(str(store)) <= 80 else str(store)[:79] + "…"
        raise DeployError(
            f"the payload store {shown} ({named}) cannot be resolved ({exc}); pass --store "
            "with the folder that holds the payloads"
        ) from None


def unit_store(given: Path | None, smoked: Path | None, env: Mapping[str, str]) -> Path:
    """``given``, else the smoke run's ``smoked`` store, else the default (with a warning)."""
    if given is not None:
        store = resolved(given, "--store")
        if smoked is not None and smoked != store:
            echo(f"warning: the smoke run mounted the store {smoked}; the unit mounts {store} "
                 "(--store)", style="yellow")  # fmt: skip
        return store
    if smoked is not None:
        store = resolved(smoked, "the one the smoke run mounted")
        echo(f"store: {store}, the one the smoke run mounted")
        return store
    store = resolved(default_store(env), "the default")
    echo(f"warning: no smoke result records a payload store; the unit mounts the default "
         f"{store}: pass --store to name another", style="yellow")  # fmt: skip
    return store


def missing_payloads(lock: Lock, name: str, store: Path) -> tuple[str, ...]:
    """The payloads of ``name`` of which ``store`` lacks any file the serve command reads
    (a dangling link counts: a snapshot folder with one file missing is not there)."""
    payloads = [lock.payloads[p] for p in lock.target(name).payloads]
    return tuple(p.name for p in payloads
                 if any(not file_path(store, p, f).exists() for f in p.files))  # fmt: skip


def check_payloads(lock: Lock, name: str, store: Path, *, install: bool) -> None:
    """Refuse to install (warn when only rendering) a unit whose payloads are not in ``store``."""
    try:
        missing = missing_payloads(lock, name, store)
        where = f"{store} does not exist" if not store.is_dir() else f"{store} lacks them"
    except OSError as exc:  # File name too long: exists() raises it
        shown = str(store) if len(str(store)) <= 80 else str(store)[:79] + "…"
        raise DeployError(f"the payload store {shown} cannot be read ({exc.strerror}); pass "
                          "--store with the folder that holds the payloads") from None  # fmt: skip
    if not missing:
        return
    fetch = f"lockpipe payloads --store {store} {name}"
    if install:
        raise DeployError(
            f"{name}: the unit mounts the payload store {store}, but its payloads "
            f"{', '.join(missing)} are not there ({where}), so it would crash-loop at start; "
            f"fetch them (`{fetch}`) or pass --store with the store the smoke run used"
        )
    echo(f"warning: {name}'s payloads {', '.join(missing)} are not in {store} here: the "
         f"unit starts only on a host whose store holds them (`{fetch}` there)",
         style="yellow")  # fmt: skip
