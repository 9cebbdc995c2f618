"""What a smoke run found: check results, shown as a table, kept as JSON and JUnit XML.

JUnit is the shape CI reads (GitHub Actions reporters, Jenkins' junit step): one
<testsuite> per target, one <testcase> per check, a <failure> with a one-line message and
the whole detail as its text, <skipped> for a check that could not run here.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

from lockpipe.fs import write_atomic

# XML 1.0 forbids most control characters, and server logs do contain them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
MESSAGE_CHARS = 200

CheckStatus = Literal["PASS", "FAIL", "SKIP"]


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""
    seconds: float = 0.0
    measured: Mapping[str, float] = field(default_factory=dict)
    skipped: bool = False  # could not run here (e.g. no GPU); neither passes nor fails
    # Checks against baselines: the serving shape whose baselines apply, and the measured
    # figures that shape has no baseline for (reported, not judged).
    shape: str = ""
    unjudged: tuple[str, ...] = ()

    def baseline(self) -> dict[str, Any] | None:
        """The JSON of what judged this check: None for a check without baselines."""
        return {"shape": self.shape, "no_baseline": list(self.unjudged)} if self.shape else None

    @property
    def status(self) -> CheckStatus:
        return "SKIP" if self.skipped else "PASS" if self.ok else "FAIL"


@dataclass(frozen=True, kw_only=True)
class SmokeReport:
    target: str
    image: str
    image_id: str
    engine: str
    results: tuple[CheckResult, ...]
    log_path: Path | None = None

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok and not r.skipped]

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped ones do not count against it)."""
        return not self.failures

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)


def _measured(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in values.items())


def render(report: SmokeReport, console: Console) -> None:
    """Print the report as one table and a verdict line to ``console``."""
    table = Table(
        title=f"smoke: {report.target} ({report.image}, {report.engine})", title_justify="left"
    )
    table.add_column("check")
    table.add_column("result")
    table.add_column("time", justify="right")
    table.add_column("measured")
    table.add_column("detail", overflow="fold")
    style = {"PASS": "green", "FAIL": "bold red", "SKIP": "yellow"}
    for r in report.results:
        first = r.detail.splitlines()[0] if r.detail else ""
        table.add_row(
            r.name, f"[{style[r.status]}]{r.status}[/]", f"{r.seconds:.1f} s",
            _measured(r.measured), first, end_section=False,
        )  # fmt: skip
    console.print(table)
    failed = report.failures
    verdict = "[green]passed[/]" if not failed else f"[bold red]{len(failed)} failed[/]"
    log = f"; server log: {report.log_path}" if report.log_path else ""
    console.print(f"{report.target}: {verdict} in {report.seconds:.1f} s{log}")


def to_json(report: SmokeReport) -> dict[str, Any]:
    """The report as plain JSON data (paths as strings, results in order)."""
    return {
        "target": report.target,
        "image": report.image,
        "image_id": report.image_id,
        "engine": report.engine,
        "ok": report.ok,
        "seconds": round(report.seconds, 3),
        "log_path": str(report.log_path) if report.log_path else None,
        "results": [
            {
                "name": r.name,
                "status": r.status,
                "ok": r.ok,
                "skipped": r.skipped,
                "seconds": round(r.seconds, 3),
                "detail": r.detail,
                "measured": dict(r.measured),
                "baseline": r.baseline(),
            }
            for r in report.results
        ],
    }


def write_json(reports: Sequence[SmokeReport], path: Path) -> None:
    """Write ``{"reports": [...]}`` atomically, so a reader never sees half a file."""
    doc = {"reports": [to_json(r) for r in reports]}
    write_atomic(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def _clean(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _message(detail: str, fallback: str) -> str:
    first = detail.strip().splitlines()[0] if detail.strip() else fallback
    return _clean(first if len(first) <= MESSAGE_CHARS else first[: MESSAGE_CHARS - 1] + "…")


def junit_tree(reports: Sequence[SmokeReport]) -> ET.ElementTree[ET.Element]:
    """The JUnit XML document for ``reports``: <testsuites> of one <testsuite> per target."""
    suites = ET.Element("testsuites", name="lockpipe smoke")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for rep in reports:
        counts = {
            "tests": len(rep.results),
            "failures": len(rep.failures),
            "errors": 0,  # a check that cannot complete is a failure, with the reason
            "skipped": sum(r.skipped for r in rep.results),
        }
        attrs = {"name": rep.target, **{k: str(v) for k, v in counts.items()}}
        suite = ET.SubElement(suites, "testsuite", attrs, time=f"{rep.seconds:.3f}")
        props = ET.SubElement(suite, "properties")
        for k, v in (("image", rep.image), ("image_id", rep.image_id), ("engine", rep.engine),
                     ("log", str(rep.log_path or ""))):  # fmt: skip
            ET.SubElement(props, "property", name=k, value=_clean(v))
        for r in rep.results:
            case = ET.SubElement(
                suite, "testcase", classname=f"smoke.{rep.target}", name=r.name,
                time=f"{r.seconds:.3f}",
            )  # fmt: skip
            if r.shape:  # first, as pytest's record_property writes them
                _case_properties(case, r)
            if r.skipped:
                ET.SubElement(case, "skipped", message=_message(r.detail, "skipped"))
            elif not r.ok:
                failure = ET.SubElement(
                    case, "failure", message=_message(r.detail, f"{r.name} failed"),
                    type="SmokeCheckFailed",
                )  # fmt: skip
                failure.text = _clean(r.detail)
            if r.measured:
                ET.SubElement(case, "system-out").text = "\n".join(
                    f"{k} = {v:g}" + (" (no baseline)" if k in r.unjudged else "")
                    for k, v in r.measured.items()
                )
        for k in totals:
            totals[k] += counts[k]
    suites.attrib.update({k: str(v) for k, v in totals.items()})
    suites.set("time", f"{sum(r.seconds for r in reports):.3f}")
    ET.indent(suites)
    return ET.ElementTree(suites)


def _case_properties(case: ET.Element, r: CheckResult) -> None:
    """The serving shape a check was judged in, and what it had no baseline for."""
    props = ET.SubElement(case, "properties")
    ET.SubElement(props, "property", name="shape", value=_clean(r.shape))
    if r.unjudged:
        ET.SubElement(props, "property", name="no_baseline", value=", ".join(r.unjudged))


def write_junit(reports: Sequence[SmokeReport], path: Path) -> None:
    """Write the JUnit XML for ``reports`` to ``path`` (UTF-8, with an XML declaration)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    junit_tree(reports).write(path, encoding="utf-8", xml_declaration=True)
