"""Test policy: on CI a missing engine or service fails; elsewhere it skips."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn, TypeVar

import pytest

ON_CI = os.environ.get("CI", "").lower() == "true"
T = TypeVar("T")


def unavailable(reason: str) -> NoReturn:
    """Skip locally, fail on CI: CI installed everything, so absence is a bug there."""
    if ON_CI:
        pytest.fail(f"CI=true but {reason}; .ci/run should have provided it")
    pytest.skip(reason)


def within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()``'s result, or a test failure once ``seconds`` pass: a test of a hang that came
    back fails instead of holding the whole run (there is no pytest-timeout). The call runs
    in a daemon thread, left behind if it hangs; its exception is raised here."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            done.append(fn())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds:g} s: it hangs")
    if failed:
        raise failed[0]
    return done[0]


@contextmanager
def scratch(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A module-scoped fixture's folder, removed at the fixture's teardown. pytest keeps every
    ``mktemp`` folder to the session's end, and in a shuffled order a module's fixtures are
    set up again each time its tests come back: under seed 689863 test_oci_payloads' registry
    and published Gemma were set up 17 times, and the disk filled at 80 % of the run."""
    path = factory.mktemp(name)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
