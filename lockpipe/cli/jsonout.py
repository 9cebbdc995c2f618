"""``--json FILE`` on the verbs that report: one document per run, ``-`` meaning stdout.

Pure apart from :func:`emit`. Each verb builds its document from the frozen values it
already printed (a plan, a comparison, a payload result), so the JSON and the table say
the same thing; ``version`` lets a consumer refuse a shape it does not know.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from lockpipe.errors import UsageError
from lockpipe.fs import STDOUT, write_report
from lockpipe.imagebuild.plan import BuildPlan
from lockpipe.log import set_results_to_stderr

VERSION = 1
PAIRS = ("build_args", "bases", "labels", "files")  # BuildPlan's (name, value) tuples


def begin(path: Path | None) -> None:
    """Before a verb prints anything: with ``--json -`` its tables go to stderr, so stdout
    holds exactly one JSON document; a folder given as FILE is refused before any work."""
    if path is None:
        return
    if path == STDOUT:
        set_results_to_stderr(True)
        return
    try:
        folder = path.is_dir()
    except OSError as exc:  # a name past 255 bytes: Errno 36 from stat, on Python 3.11
        raise UsageError(f"--json {path}: not a usable path ({exc.strerror or exc}); give a "
                         "file whose every name is at most 255 bytes") from None  # fmt: skip
    if folder:
        raise UsageError(f"--json {path}: a directory; give a file, e.g. {path}/report.json")


def emit(path: Path | None, verb: str, body: dict[str, Any]) -> None:
    """``body`` under ``{"version": 1, "verb": verb}``, to ``path`` (``-``: stdout)."""
    if path is None:
        return
    doc = {"version": VERSION, "verb": verb, **body}
    try:
        write_report(path, json.dumps(doc, indent=2, sort_keys=True, default=_plain) + "\n")
    except OSError as exc:
        raise UsageError(f"--json {path}: cannot write it ({exc.strerror or exc}); give a "
                         "path in a folder that exists and is writable") from None  # fmt: skip


def _plain(value: Any) -> Any:
    """What json cannot write itself: paths, mappings and sets from frozen values."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "items"):
        return dict(value.items())
    return str(value)


def plan_json(plan: BuildPlan) -> dict[str, Any]:
    """A build plan as JSON: its (name, value) tuples as objects."""
    doc = dataclasses.asdict(plan)
    doc.update({k: dict(getattr(plan, k)) for k in PAIRS})
    return doc


def as_json(value: Any) -> Any:
    """A frozen dataclass (or a list of them) as plain data."""
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value
