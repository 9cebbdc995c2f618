"""Preflight's output: one table per target on the console, and a JSON file for CI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table
from rich.text import Text

from pipeline.fs import write_atomic
from pipeline.log import console
from pipeline.preflight.verdict import TargetReport

STYLE = {"pass": "green", "warn": "yellow", "unknown": "bold magenta", "fail": "bold red"}


def table(report: TargetReport) -> Table:
    t = Table(
        title=f"{report.target} · {report.runtime} · {report.card}",
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
    for r in reports:
        console.print(table(r))


def write_json(path: Path, reports: Sequence[TargetReport]) -> None:
    doc = {
        "verdict": next(
            (v for v in ("fail", "unknown") if any(r.verdict == v for r in reports)), "pass"
        ),
        "targets": [r.as_json() for r in reports],
    }
    write_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")
