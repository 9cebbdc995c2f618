"""Progress output: a rich display, nothing (quiet), or JSON lines for CI.

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
from lockpipe.log import console


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


MODES = ("rich", "quiet", "jsonl")


def reporter(mode: str, total: int) -> Reporter:
    """The reporter for ``mode``; ``total`` is the bytes this run will account for."""
    if mode == "rich":
        return Rich(total)
    if mode == "quiet":
        return Quiet()
    if mode == "jsonl":
        return Jsonl()
    raise UsageError(f"progress mode {mode!r}: choose one of {', '.join(MODES)}")
