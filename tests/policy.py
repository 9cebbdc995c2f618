"""Test policy: on CI a missing engine or service fails; elsewhere it skips."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
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
