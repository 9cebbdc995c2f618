"""Output: results on stdout, everything else on stderr; grouped steps, and CI log groups.

Two rich consoles. :data:`out` (stdout) carries a verb's result: the plan, preflight's and
smoke's tables, a refresh report, verify's verdict, a payload summary. :data:`console`
(stderr) carries progress, logs, warnings and errors, so ``lockpipe preflight > report.txt``
keeps the report and the terminal keeps the rest. When stdout is not a terminal, tables are
printed plain (no box) and never wrapped (:func:`show`). ``NO_COLOR`` and ``--color``
(:func:`set_color`) decide colour on both.

On GitHub Actions (``GITHUB_ACTIONS=true``) each step opens a collapsible
``::group::``; elsewhere it prints a rule. :func:`set_quiet` (the command line's
``LOCKPIPE_QUIET=1``) silences echo. :func:`set_results_to_stderr` moves the results to
stderr, for ``--json -``, whose JSON then has stdout to itself.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from rich.color import ColorSystem
from rich.console import Console, RenderableType
from rich.table import Table


class _Console(Console):
    """rich's Console, but a reader that went away is BrokenPipeError (rich exits 1): the
    command line turns it into 141, as a shell does (``lockpipe plan | head``)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


# emoji=False: rich would print 'sha256:abc: not found' as 'sha256🔤 not found'
console = _Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
out = _Console(highlight=False, soft_wrap=True, emoji=False)
COLORS = ("auto", "always", "never")
Color = Literal["auto", "always", "never"]
PROGRESS_EVERY = 10.0  # seconds: the longest a long wait or download stays silent in a CI log
PLAIN_WIDTH = 100_000  # a table printed to a file or pipe: as wide as its widest row
_quiet = False
_results_to_stderr = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def set_results_to_stderr(on: bool) -> None:
    """Results go to stderr while ``on``: stdout carries a JSON report (``--json -``)."""
    global _results_to_stderr
    _results_to_stderr = on


def set_color(mode: Color, env: dict[str, str] | None = None) -> None:
    """``--color``: ``always`` colours even a pipe, ``never`` never does, ``auto`` colours a
    terminal unless ``NO_COLOR`` is set (https://no-color.org: any non-empty value)."""
    no_color = bool((os.environ if env is None else env).get("NO_COLOR"))
    for c in (console, out):
        c._force_terminal = True if mode == "always" else None  # rich reads it per print
        c.no_color = mode == "never" or (mode == "auto" and no_color)
        c._color_system = c._detect_color_system()
        if mode == "always" and c._color_system is None:  # TERM=dumb or unset, as in CI
            c._color_system = ColorSystem.STANDARD


def echo(text: str, *, style: str | None = None) -> None:
    """A progress or log line, on stderr (silenced by :func:`set_quiet`)."""
    if not _quiet:
        console.print(text, style=style, markup=False)


def result(text: str, *, style: str | None = None) -> None:
    """A line of a verb's result, on stdout (never silenced: it is what the verb is for)."""
    results().print(text, style=style, markup=False)


def results() -> Console:
    """The console results go to: stdout, or stderr under ``--json -``."""
    return console if _results_to_stderr else out


def show(renderable: RenderableType) -> None:
    """A result table (or any renderable) on :func:`results`, as :func:`print_to` prints it."""
    print_to(results(), renderable)


def print_to(where: Console, renderable: RenderableType) -> None:
    """``renderable`` on ``where``; to a file or pipe a table loses its box and its width
    limit, so each row is one line that ``grep`` can read."""
    if where.is_terminal or not isinstance(renderable, Table):
        where.print(renderable)
        return
    renderable.box = None
    renderable.show_edge = False
    width = where._width  # print(width=) is capped at the console's: lift the cap itself
    where.width = PLAIN_WIDTH
    try:
        where.print(renderable, crop=False)
    finally:
        where._width = width


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


class Heartbeat:
    """Long work's own progress line in a log: when stderr is not a terminal, a line
    (``build llama-cpu (buildah): 3m20s, running; last output 40 s ago: [ 61%] Building…``)
    each time ``every`` seconds pass with no line, so a CI log shows the work is alive
    through a quiet link or install. Lines the work prints go through :meth:`line`.

    A context manager; its thread ends with the block. On a terminal it only echoes.
    """

    def __init__(self, label: str, *, every: float = PROGRESS_EVERY,
                 clock: Callable[[], float] = time.monotonic,
                 beat: bool | None = None) -> None:  # fmt: skip
        self.label, self.every, self.clock = label, every, clock
        self.beat = (not console.is_terminal) if beat is None else beat
        self.started = self.said = self.heard = clock()  # began; any line; the work's own line
        self.last = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"heartbeat {label}")

    def line(self, text: str, *, style: str | None = "dim") -> None:
        """One line of the work's own output, echoed; it counts as a sign of life."""
        self.said = self.heard = self.clock()
        self.last = text
        echo(text, style=style)

    def _run(self) -> None:
        while not self._stop.wait(max(0.1, self.said + self.every - self.clock())):
            now = self.clock()
            if now - self.said >= self.every:
                echo(self.status(now))
                self.said = now

    def status(self, now: float) -> str:
        """The heartbeat's line at ``now``."""
        ran = int(now - self.started)
        text = f"{self.label}: {ran // 60}m{ran % 60:02d}s, running"
        if self.last:
            quiet = now - self.heard
            text += f"; last output {quiet:.0f} s ago: {self.last.strip()[:100]}"
        return text

    def __enter__(self) -> Heartbeat:
        if self.beat:
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
