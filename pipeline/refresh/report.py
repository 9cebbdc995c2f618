"""The refresh report: Markdown for the pull request's body, JSON for machines.

Pure rendering of an :class:`Outcome`. Warnings come first, because a reviewer
must read them before merging; then one section per change (old → new for
each pinned value, the tag, dates and links), then the newer pip releases
that were reported and not moved.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from pipeline.refresh.model import Change, Outcome

TITLE = "lockpipe: refresh pins"


def _value(v: str | None) -> str:
    return f"`{v}`" if v is not None else "*(unpinned)*"


def _change_md(c: Change) -> list[str]:
    lines = [f"### `{c.key}` — {c.what}" + (f" ({c.tag})" if c.tag else ""), ""]
    lines += ["| value | old | new |", "|---|---|---|"]
    lines += [f"| {m.key} | {_value(m.old)} | {_value(m.new)} |" for m in c.moved]
    lines.append("")
    lines += [f"- {what}: {when}" for what, when in c.dates]
    lines += [f"- [{link.label}]({link.url})" for link in c.links]
    lines += [f"- note: {note}" for note in c.notes]
    return [*lines, ""]


def markdown(outcome: Outcome, lock: str) -> str:
    """The pull request body."""
    n = len(outcome.changes)
    checked = sum(len(v) for v in outcome.checked.values())
    out = [f"## {TITLE}", "",
           f"`{lock}`: {n} entr{'y' if n == 1 else 'ies'} changed of {checked} checked "
           f"({', '.join(f'{k} {len(v)}' for k, v in outcome.checked.items()) or 'none'}).",
           ""]  # fmt: skip
    if outcome.warnings:
        out += ["### Warnings", ""]
        out += [f"- ⚠️ `{w.kind}.{w.name}` ({w.rule}): {w.message}" for w in outcome.warnings]
        out.append("")
    for change in outcome.changes:
        out += _change_md(change)
    if outcome.newer:
        out += ["### Newer pip releases (reported, not moved)", "",
                "| entry | package | pinned | latest |", "|---|---|---|---|"]  # fmt: skip
        out += [f"| `pip.{x.pip}` ({x.file}) | {x.package} | {x.pinned} | [{x.latest}]({x.url}) |"
                for x in outcome.newer]  # fmt: skip
        out += ["", "Moving one is a reviewed change: edit the version, then `nox -s lock`.", ""]
    if not outcome.changes and not outcome.warnings and not outcome.newer:
        out += ["Every pin is current.", ""]
    return "\n".join(out)


def as_json(outcome: Outcome, lock: str) -> str:
    """The same facts as JSON (sorted keys, one trailing newline)."""
    doc: dict[str, Any] = {
        "lock": lock,
        "checked": {k: list(v) for k, v in outcome.checked.items()},
        "changes": [{**asdict(c), "key": c.key, "updates": dict(c.updates)}
                    for c in outcome.changes],
        "warnings": [asdict(w) for w in outcome.warnings],
        "newer": [asdict(x) for x in outcome.newer],
    }  # fmt: skip
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def lines(outcome: Outcome) -> list[str]:
    """One line per change and warning, for the terminal."""
    out = []
    for c in outcome.changes:
        moved = "; ".join(f"{m.key} {m.old or '(unpinned)'} -> {m.new}" for m in c.moved)
        out.append(f"{c.key}: {c.what}: {moved}")
        out += [f"  {note}" for note in c.notes]
    out += [str(w) for w in outcome.warnings]
    out += [f"pip.{x.pip}: {x.package} {x.pinned} pinned, {x.latest} released (not moved)"
            for x in outcome.newer]  # fmt: skip
    return out
