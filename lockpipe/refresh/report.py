"""The refresh report: Markdown for the pull request's body, JSON for machines.

Pure rendering of an :class:`Outcome`. Warnings come first, because a reviewer
must read them before merging; then one section per change (old → new for
each pinned value, the tag, dates and links), then the newer pip releases
that were reported and not moved, then the proposed upgrades (``--propose``) with each
target's verdicts.

Much of it is text from upstream that nobody here wrote: an image's version
label, a GitHub release's ``tag_name``, a Hub date, a package's version. In the
Markdown it is escaped (:func:`md`), so a hostile label cannot break the
tables, open a link or an HTML tag, or add lines to the pull request's body.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import Any

from lockpipe.refresh.model import Change, Outcome
from lockpipe.refresh.proposal import Proposal

TITLE = "lockpipe: refresh pins"
_SPECIAL = re.compile(r"([\\`|\[\]<>])")  # what can end a cell, a code span, a link, a tag
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_PLAIN = re.compile(r"[A-Za-z0-9:._/@+=-]*")


def md(text: str) -> str:
    """``text`` as one line of inert Markdown: control characters and line breaks become
    one space; ``\\ ` | [ ] < >`` are backslash-escaped."""
    return _SPECIAL.sub(r"\\\1", _CONTROL.sub(" ", text))


def _url(url: str) -> str:
    """A link target that cannot close the link or start another: ``( ) < >``, spaces and
    control characters percent-encoded."""
    table = {c: f"%{ord(c):02X}" for c in "()<> \"'`"}
    return "".join(table.get(c, c) for c in _CONTROL.sub("", url))


def _code(v: str) -> str:
    """``v`` as inline code when it is a plain token (digests, shas, sizes), else escaped."""
    return f"`{v}`" if _PLAIN.fullmatch(v) else md(v)


def _value(v: str | None, missing: str = "*(unpinned)*") -> str:
    return _code(v) if v is not None else missing


def _change_md(c: Change) -> list[str]:
    lines = [f"### {_code(c.key)} — {md(c.what)}" + (f" ({md(c.tag)})" if c.tag else ""), ""]
    lines += ["| value | old | new |", "|---|---|---|"]
    lines += [f"| {md(m.key)} | {_value(m.old)} | {_value(m.new, '*(removed)*')} |"
              for m in c.moved]  # fmt: skip
    lines.append("")
    lines += [f"- {md(what)}: {md(when)}" for what, when in c.dates]
    lines += [f"- [{md(link.label)}]({_url(link.url)})" for link in c.links]
    lines += [f"- note: {md(note)}" for note in c.notes]
    return [*lines, ""]


def markdown(outcome: Outcome, lock: str) -> str:
    """The pull request body."""
    n = len(outcome.changes)
    checked = sum(len(v) for v in outcome.checked.values())
    out = [f"## {TITLE}", "",
           f"{_code(lock)}: {n} entr{'y' if n == 1 else 'ies'} changed of {checked} checked "
           f"({', '.join(f'{k} {len(v)}' for k, v in outcome.checked.items()) or 'none'}).",
           ""]  # fmt: skip
    if outcome.warnings:
        out += ["### Warnings", ""]
        out += [f"- ⚠️ {_code(f'{w.kind}.{w.name}')} ({w.rule}): {md(w.message)}"
                for w in outcome.warnings]  # fmt: skip
        out.append("")
    for change in outcome.changes:
        out += _change_md(change)
    if outcome.newer:
        out += ["### Newer pip releases (reported, not moved)", "",
                "| entry | package | pinned | latest |", "|---|---|---|---|"]  # fmt: skip
        out += [f"| {_code(f'pip.{x.pip}')} ({md(x.file)}) | {md(x.package)} | {md(x.pinned)} "
                f"| [{md(x.latest)}]({_url(x.url)}) |" for x in outcome.newer]  # fmt: skip
        out += ["", "Moving one is a reviewed change: edit the version, then `nox -s lock`.", ""]
    if outcome.proposals:
        out += proposals_md(outcome.proposals)
    if not outcome.changes and not outcome.warnings and not outcome.newer:
        out += ["Every pin is current.", ""]
    return "\n".join(out)


_MARK = {"pass": "✅", "fail": "❌", "warn": "⚠️", "unknown": "❔", "gain": "🆕", "note": "📝"}


def proposal_md(p: Proposal, level: str = "####") -> list[str]:
    """One proposal: what moves, whether each target would start, and why."""
    lines = [f"{level} {_code(p.key)}: {md(p.pinned)} → {md(p.version)} ({md(p.summary)})", ""]
    lines += [f"- new: {md(p.new)}", f"- targets: {md(', '.join(p.targets) or 'none')}",
              f"- first seen: {md(p.first_seen or 'now')}"]  # fmt: skip
    lines += [f"- moves with it: {md(a)}" for a in p.also]
    if not p.held:
        lines += [f"- apply (a reviewed change): `{p.command}`"]
    if p.verdicts:
        lines += ["", "| target | check | verdict | why | fix |", "|---|---|---|---|---|"]
        lines += [f"| {md(v.target)} | {md(v.check)} | {_MARK[v.status]} {v.status} | "
                  f"{md(v.detail)} | {md(v.fix)} |" for v in p.verdicts]  # fmt: skip
    return [*lines, ""]


def proposals_md(proposals: tuple[Proposal, ...]) -> list[str]:
    held = sum(1 for p in proposals if p.held)
    out = [
        "### Proposed upgrades",
        "",
        f"{len(proposals) - held} proposed, {held} held by --min-age. None is applied by "
        "this refresh: each is `lockpipe upgrade NAME VERSION`, reviewed on its own.",
        "",
    ]
    for p in proposals:
        out += proposal_md(p)
    return out


def as_json(outcome: Outcome, lock: str) -> str:
    """The same facts as JSON (sorted keys, one trailing newline)."""
    doc: dict[str, Any] = {
        "lock": lock,
        "checked": {k: list(v) for k, v in outcome.checked.items()},
        "changes": [{**asdict(c), "key": c.key, "updates": dict(c.updates)}
                    for c in outcome.changes],
        "warnings": [asdict(w) for w in outcome.warnings],
        "newer": [asdict(x) for x in outcome.newer],
        "proposals": [{**asdict(p), "key": p.key, "command": p.command, "summary": p.summary}
                      for p in outcome.proposals],
    }  # fmt: skip
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def lines(outcome: Outcome) -> list[str]:
    """One line per change and warning, for the terminal."""
    out = []
    for c in outcome.changes:
        moved = "; ".join(f"{m.key} {m.old or '(unpinned)'} -> {m.new or '(removed)'}"
                          for m in c.moved)  # fmt: skip
        out.append(f"{c.key}: {c.what}: {moved}")
        out += [f"  {note}" for note in c.notes]
    out += [str(w) for w in outcome.warnings]
    out += [f"pip.{x.pip}: {x.package} {x.pinned} pinned, {x.latest} released (not moved)"
            for x in outcome.newer]  # fmt: skip
    out += [f"proposed: {p.key} {p.pinned} -> {p.version}: {p.summary}" for p in outcome.proposals]
    return out
