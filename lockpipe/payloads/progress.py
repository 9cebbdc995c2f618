"""Progress output: a rich display on a terminal, timed lines in a log (stderr not a
terminal: a line at least every 10 s), nothing (quiet), or JSON lines for CI.

Every method may be called from any download thread. JSON lines go to stdout,
one object per line: ``start``, ``progress`` (at most one a second per file),
``done``, ``error`` and ``summary``; everything else goes to stderr.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import IO, Any, Protocol

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from lockpipe.errors import UsageError
from lockpipe.log import PROGRESS_EVERY, console


class Reporter(Protocol):
    def start(self, label: str, size: int, already: int) -> None: ...
    def advance(self, label: str, n: int) -> None: ...
    def done(self, label: str, status: str, fetched: int) -> None: ...
    def error(self, label: str, message: str) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self, summary: dict[str, Any]) -> None: ...


class Quiet:
    """Errors still surface as exceptions; nothing else is printed."""

    def start(self, label: str, size: int, already: int) -> None: ...
    def advance(self, label: str, n: int) -> None: ...
    def done(self, label: str, status: str, fetched: int) -> None: ...
    def error(self, label: str, message: str) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self, summary: dict[str, Any]) -> None: ...


class Jsonl:
    def __init__(self, out: IO[str] | None = None, every: float = 1.0) -> None:
        self.out = out or sys.stdout
        self.every = every
        self.lock = threading.Lock()
        self.files: dict[str, list[float]] = {}  # label -> [size, bytes, started, last emitted]

    def emit(self, **event: Any) -> None:
        with self.lock:
            self.out.write(json.dumps(event, sort_keys=True) + "\n")
            self.out.flush()

    def start(self, label: str, size: int, already: int) -> None:
        now = time.monotonic()
        self.files[label] = [size, already, now, now]
        self.emit(event="start", file=label, size=size, resumed=already)

    def advance(self, label: str, n: int) -> None:
        with self.lock:
            state = self.files[label]
            state[1] += n
            now = time.monotonic()
            if now - state[3] < self.every:
                return
            state[3] = now
        rate = state[1] / max(now - state[2], 1e-9)
        self.emit(event="progress", file=label, bytes=int(state[1]), size=int(state[0]), rate=rate)

    def done(self, label: str, status: str, fetched: int) -> None:
        self.emit(event="done", file=label, status=status, fetched=fetched)

    def error(self, label: str, message: str) -> None:
        self.emit(event="error", file=label, message=message)

    def note(self, text: str) -> None:
        self.emit(event="note", message=text)

    def close(self, summary: dict[str, Any]) -> None:
        self.emit(event="summary", **summary)


class Rich:
    """One live display: a line per active file and a total line with rate and ETA."""

    def __init__(self, total: int) -> None:
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.total = self.bar.add_task("total", total=total)
        self.tasks: dict[str, TaskID] = {}
        self.bar.start()

    def start(self, label: str, size: int, already: int) -> None:
        self.tasks[label] = self.bar.add_task(label, total=size, completed=already)
        self.bar.advance(self.total, already)

    def advance(self, label: str, n: int) -> None:
        self.bar.advance(self.tasks[label], n)
        self.bar.advance(self.total, n)

    def done(self, label: str, status: str, fetched: int) -> None:
        task = self.tasks.pop(label, None)
        if task is not None:
            self.bar.remove_task(task)
        self.bar.console.print(f"{label}: {status}", markup=False, highlight=False)

    def error(self, label: str, message: str) -> None:
        self.bar.console.print(f"{label}: failed", style="red", markup=False, highlight=False)

    def note(self, text: str) -> None:
        self.bar.console.print(text, markup=False, highlight=False)

    def close(self, summary: dict[str, Any]) -> None:
        self.bar.stop()


class Lines:
    """Progress for a log, not a terminal (stderr is a file or a pipe, as in CI): a line per
    file that starts or ends, and a total line at least every ``every`` seconds while
    bytes are still to come, so a long download is never silent in the log."""

    def __init__(self, total: int, every: float = PROGRESS_EVERY) -> None:
        self.total, self.every = total, every
        self.lock = threading.Lock()
        self.got = 0
        self.started = self.said = time.monotonic()

    def _line(self, text: str) -> None:
        console.print(text, markup=False, highlight=False)

    def start(self, label: str, size: int, already: int) -> None:
        with self.lock:
            self.got += already
        resumed = f", resuming at {already:,}" if already else ""
        self._line(f"{label}: fetching {size:,} bytes{resumed}")

    def advance(self, label: str, n: int) -> None:
        with self.lock:
            self.got += n
            now = time.monotonic()
            if now - self.said < self.every:
                return
            self.said = now
            got = self.got
        rate = got / max(now - self.started, 1e-9)
        share = f" ({got / self.total:.0%})" if self.total else ""
        self._line(f"payloads: {got:,} of {self.total:,} bytes{share}, "
                   f"{rate / 2**20:.1f} MiB/s")  # fmt: skip

    def done(self, label: str, status: str, fetched: int) -> None:
        self._line(f"{label}: {status}")

    def error(self, label: str, message: str) -> None:
        self._line(f"{label}: failed")

    def note(self, text: str) -> None:
        self._line(text)

    def close(self, summary: dict[str, Any]) -> None: ...


MODES = ("rich", "quiet", "jsonl")


def reporter(mode: str, total: int) -> Reporter:
    """The reporter for ``mode``; ``total`` is the bytes this run will account for."""
    if mode == "rich":  # a live display on a terminal; timed lines in a log
        return Rich(total) if console.is_terminal else Lines(total)
    if mode == "quiet":
        return Quiet()
    if mode == "jsonl":
        return Jsonl()
    raise UsageError(f"progress mode {mode!r}: choose one of {', '.join(MODES)}")
