"""Preflight's output: one table per target on stdout, and a JSON file (or stdout) for CI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table
from rich.text import Text

from lockpipe.errors import UsageError
from lockpipe.fs import STDOUT, write_report
from lockpipe.log import set_results_to_stderr
from lockpipe.log import show as show_table
from lockpipe.preflight.verdict import Status, TargetReport

STYLE = {"pass": "green", "warn": "yellow", "unknown": "bold magenta", "fail": "bold red"}


def table(report: TargetReport) -> Table:
    t = Table(
        title=Text(f"{report.target} · {report.runtime} · {report.card}"),
        title_justify="left",
        show_header=True,
        header_style="bold",
    )
    t.add_column("")
    t.add_column("value", overflow="fold")
    t.add_column("how", style="dim", overflow="fold")
    for f in report.figures:
        t.add_row(Text(f.name), Text(f.value), Text(f.note))
    for c in report.checks:
        how = f"fix: {c.fix}" if c.fix and c.status != "pass" else ""
        value = Text.assemble((c.status, STYLE[c.status]), " ", c.detail)
        t.add_row(Text(c.name), value, Text(how))
    verdict = report.verdict
    reason = "; ".join(report.reasons) or "every check passes"
    t.add_row("verdict", Text(verdict.upper(), style=STYLE[verdict]), Text(reason))
    return t


def show(reports: Sequence[TargetReport]) -> None:
    """One table per target, on stdout (plain to a file or pipe; stderr under --json -)."""
    for r in reports:
        show_table(table(r))


def overall(reports: Sequence[TargetReport], *, strict: bool) -> Status:
    """The run's verdict: ``fail`` exactly when preflight exits 16 (a target fails, or with
    ``strict`` one warns or is unknown), else the worst target's (unknown, warn, pass)."""
    states = {r.verdict for r in reports}
    if "fail" in states or (strict and states & {"warn", "unknown"}):
        return "fail"
    return next((s for s in ("unknown", "warn") if s in states), "pass")


def check_json_path(path: Path) -> None:
    """UsageError unless ``path`` can be a file (checked before anything is evaluated);
    ``-`` is stdout, which the tables then leave to the JSON."""
    if path == STDOUT:
        set_results_to_stderr(True)
        return
    try:
        folder = path.is_dir()
        parent = next((p for p in path.parents if p.exists()), None)
    except OSError as exc:  # a name past 255 bytes: Errno 36 from stat, on Python 3.11
        raise UsageError(f"--json {path}: not a usable path ({exc.strerror or exc}); give a "
                         "file whose every name is at most 255 bytes") from None  # fmt: skip
    if folder:
        raise UsageError(f"--json {path}: a directory; give a file, e.g. {path}/preflight.json")
    if parent is not None and not parent.is_dir():
        raise UsageError(f"--json {path}: {parent} is a file, not a directory; give another path")


def write_json(path: Path, reports: Sequence[TargetReport], *, strict: bool) -> None:
    """The report as JSON: ``verdict`` is :func:`overall`'s, ``strict`` whether it applied."""
    doc = {
        "verdict": overall(reports, strict=strict),
        "strict": strict,
        "targets": [r.as_json() for r in reports],
    }
    try:
        write_report(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    except OSError as exc:  # /proc/self/x.json, a read-only folder, a name past 255 bytes
        raise UsageError(f"--json {path}: cannot write it ({exc.strerror or exc}); give a "
                         "path in a folder that exists and is writable") from None  # fmt: skip
