"""Output: one rich console, grouped steps, and CI log groups.

On GitHub Actions (``GITHUB_ACTIONS=true``) each step opens a collapsible
``::group::``; elsewhere it prints a rule. :func:`set_quiet` (the command line's
``LOCKPIPE_QUIET=1``) silences echo.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console

console = Console(stderr=True, highlight=False, soft_wrap=True)
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def echo(text: str, *, style: str | None = None) -> None:
    if not _quiet:
        console.print(text, style=style, markup=False)


@contextmanager
def step(title: str) -> Iterator[None]:
    """A titled, collapsible section of output."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        print(f"::group::{title}", flush=True)
        try:
            yield
        finally:
            print("::endgroup::", flush=True)
    else:
        echo(f"── {title}", style="bold cyan")
        yield
