"""One pull request per proposed upgrade: what the scheduled workflow opens, from the report.

``python -m lockpipe.refresh.prs REPORT.json OUT`` writes, for each proposal of the JSON
report that is not held, a folder ``OUT/N/`` with ``name`` and ``version`` (what to pass
to ``lockpipe upgrade``), ``branch`` (``lockpipe/upgrade/NAME-VERSION``), ``title`` and
``body.md`` (the proposal with its verdicts, as the report renders it). The workflow's
read-only job runs the upgrade beside each and adds ``change.patch``; the job that can
write only commits those patches and opens the pull requests (``.github/workflows/
refresh.yml``). :func:`pull_requests` is pure.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import LockpipeError, UsageError
from lockpipe.fs import read_utf8, write_atomic
from lockpipe.jsonshape import Reader, loads
from lockpipe.refresh.proposal import Proposal, Verdict
from lockpipe.refresh.report import md, proposal_md
from lockpipe.urls import clipped

PREFIX = "lockpipe/upgrade/"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, kw_only=True)
class PullRequest:
    name: str
    version: str
    branch: str
    title: str
    body: str


def from_json(doc: Mapping[str, Any]) -> Proposal:
    """A proposal as the JSON report holds it."""
    keep = {k: v for k, v in doc.items() if k not in ("key", "command", "summary")}
    keep["verdicts"] = tuple(Verdict(**v) for v in doc.get("verdicts", ()))
    for key in ("targets", "also"):
        keep[key] = tuple(doc.get(key, ()))
    return Proposal(**keep)


def pull_requests(report: Mapping[str, Any]) -> list[PullRequest]:
    """The pull requests for the report's proposals that are not held."""
    out = []
    for p in (from_json(d) for d in report.get("proposals", ())):
        if p.held:
            continue
        slug = _SAFE.sub("-", f"{p.name}-{p.version}")
        lock = md(str(report.get("lock")))
        body = [f"## lockpipe: upgrade {md(p.name)} {md(p.pinned)} → {md(p.version)}", "",
                f"Made by `{p.command}` from the scheduled refresh of {lock}; the digest "
                "refresh is a pull request of its own.", "", *proposal_md(p, "###")]  # fmt: skip
        out.append(PullRequest(name=p.name, version=p.version, branch=PREFIX + slug,
                               title=f"lockpipe: upgrade {p.name} to {p.version} ({p.summary})",
                               body="\n".join(body)))  # fmt: skip
    return out


def write(prs: list[PullRequest], out: Path) -> None:
    for n, pr in enumerate(prs, 1):
        folder = out / f"{n:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for key in ("name", "version", "branch", "title"):
            write_atomic(folder / key, getattr(pr, key) + "\n")
        write_atomic(folder / "body.md", pr.body)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - the workflow's step
    """The workflow's step: a LockpipeError is one ``error:`` line and its code, as
    ``lockpipe``'s own verbs end (not a traceback in the workflow's log)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: python -m lockpipe.refresh.prs REPORT.json OUT")
    try:
        return _plan(Path(args[0]), Path(args[1]))
    except LockpipeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.return_code


def _plan(path: Path, out: Path) -> int:  # pragma: no cover - the workflow's step
    try:
        report = loads(read_utf8(path, UsageError))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a refresh report ({exc})") from None
    prs = pull_requests(_checked(path, report))
    write(prs, out)
    print(f"{len(prs)} pull request(s) planned in {out}")
    return 0


def _checked(path: Path, report: Any) -> dict[str, Any]:
    """``report`` if it has the JSON report's shape: an object whose ``proposals`` are
    proposals; else a UsageError naming ``path`` and what is wrong (before, a traceback)."""
    read = Reader(where=f"{path}: not a refresh report", root="the report", error=UsageError,
                  fix="pass the JSON report refresh-digests wrote")  # fmt: skip
    doc = read.get(report, (), dict)
    for i in range(len(read.get(doc, ("proposals",), list, []))):
        at = ("proposals", i)
        for key in ("kind", "name", "pinned", "version", "new"):  # into branch names and text
            read.get(doc, (*at, key), str)
        for key in ("first_seen", "held"):
            read.get(doc, (*at, key), str, "")
        for key in ("targets", "also", "verdicts"):
            for j in range(len(read.get(doc, (*at, key), list, []))):
                read.get(doc, (*at, key, j), dict if key == "verdicts" else str)
        try:
            from_json(read.get(doc, ("proposals", i), dict))
        except (TypeError, ValueError) as exc:
            raise read.fail(
                f"proposals[{i}] is not a proposal ({clipped(str(exc), 200)})"
            ) from None
    return doc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
