"""What a smoke run found: check results, shown as a table, kept as JSON and JUnit XML.

``smoke.json`` accumulates: it keeps one result per target and image, and a run replaces
only the entries of the targets and images it ran (so a later run of another target
never erases a failure; deploy's gate reads it back with :func:`read_records`, which
checks its shape). Each entry records the payload store the run mounted, and ``served``:
digests of the serve section and payload pins it ran with (fingerprint.served), which
the gate compares with the lock's now.

JUnit is the shape CI reads (GitHub Actions reporters, Jenkins' junit step): one
<testsuite> per target of this run, one <testcase> per check, a <failure> with a one-line
message and the whole detail as its text, <skipped> for a check that could not run here.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.table import Table
from rich.text import Text

from lockpipe.errors import LockpipeError, SmokeError
from lockpipe.fs import file_lock, read_utf8, write_atomic
from lockpipe.jsonshape import loads
from lockpipe.log import print_to
from lockpipe.urls import shown

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
    store: Path | None = None  # the payload store mounted at /store (None: no payloads)
    # fingerprint.served: {"serve": sha256, "payloads": sha256} (None: it never started one)
    served: Mapping[str, str] | None = None

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
    # every text from outside (a model's answer, a server's error, an image name) as Text:
    # as a str rich reads it as markup, and "[/x]" in an answer raised MarkupError
    table = Table(
        title=Text(f"smoke: {report.target} ({report.image}, {report.engine})"),
        title_justify="left",
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
            Text(r.name), Text(r.status, style=style[r.status]), f"{r.seconds:.1f} s",
            Text(_measured(r.measured)), Text(first), end_section=False,
        )  # fmt: skip
    print_to(console, table)
    failed = report.failures
    verdict = "[green]passed[/]" if not failed else f"[bold red]{len(failed)} failed[/]"
    log = f"; server log: {report.log_path}" if report.log_path else ""
    console.print(Text.assemble(f"{report.target}: ", Text.from_markup(verdict),
                                f" in {report.seconds:.1f} s{log}"))  # fmt: skip


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
        "store": str(report.store) if report.store else None,
        "served": dict(report.served) if report.served is not None else None,
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


@dataclass(frozen=True, kw_only=True)
class SmokeRecord:
    """One entry of ``smoke.json`` as read back: what deploy's gate judges."""

    target: str
    image: str  # the reference that ran (a tag, or REF@sha256:…); "" if none started
    image_id: str  # "sha256:…"; "" when the run never got that far
    ok: bool
    failed: tuple[str, ...]  # the checks that failed
    reason: str  # the first failure's first line ("" when none failed)
    store: str | None  # the payload store the run mounted
    at: str | None  # when it was written (UTC, ISO 8601); None in files before it was kept
    # digests of the serve section and payload pins it ran with; None: not recorded (a
    # file written before they were kept, or a run that started nothing)
    served: Mapping[str, str] | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """What a later run replaces: the same target run on the same image."""
        return self.target, self.image_id, self.image


FIX = "move it aside (or remove it) and run lockpipe smoke again to write a new one"
_FIELDS: dict[str, tuple[type, ...]] = {
    "target": (str,), "image": (str,), "image_id": (str,), "ok": (bool,), "results": (list,),
    "store": (str, type(None)), "at": (str, type(None)), "served": (dict, type(None)),
}  # fmt: skip
_OPTIONAL = ("store", "at", "served")  # absent in files written before they were kept
SERVED = ("serve", "payloads")  # the digests of ``served``


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}
    return "null" if value is None else names.get(type(value), f"a {type(value).__name__}")


_AT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)  # as write_json writes it
STORE_CHARS = 4096  # PATH_MAX: no longer path names a folder


def _check_at(at: str | None, where: str) -> None:
    """``at`` reaches deploy's unit header: a NUL in it was a unit line of its own."""
    if at is not None and not _AT.fullmatch(at):
        raise ValueError(f"{where}.at is {shown(at, 60)}, not a UTC time as lockpipe smoke "
                         "writes it (YYYY-MM-DDTHH:MM:SSZ)")  # fmt: skip


def _check_store(store: str | None, where: str) -> None:
    """``store`` is the folder deploy's unit mounts: an absolute path the kernel can take
    (a NUL was ValueError's traceback from resolve(), 5000 characters OSError's)."""
    why = (
        "" if store is None
        else "holds a NUL" if "\0" in store
        else f"is longer than {STORE_CHARS} characters" if len(store) > STORE_CHARS
        else "is not an absolute path" if not store.startswith("/")
        else ""
    )  # fmt: skip
    if why and store is not None:
        raise ValueError(f"{where}.store {shown(store, 60)} {why}, so it names no payload "
                         "store a unit can mount")  # fmt: skip


def _record(entry: object, where: str) -> SmokeRecord:
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is {_kind(entry)}, not an object")
    for name, types in _FIELDS.items():
        if name not in entry and name in _OPTIONAL:
            continue
        if name not in entry or not isinstance(entry[name], types):
            found = _kind(entry[name]) if name in entry else "missing"
            raise ValueError(f"{where}.{name} is {found}")
    _check_at(entry.get("at"), where)
    _check_store(entry.get("store"), where)
    served = entry.get("served")
    if served is not None and not all(isinstance(served.get(k), str) for k in SERVED):
        raise ValueError(f"{where}.served is not an object of two strings, serve and payloads")
    failed: list[str] = []
    reason = ""
    for i, r in enumerate(entry["results"]):
        if not (isinstance(r, dict) and isinstance(r.get("name"), str)
                and isinstance(r.get("status"), str)):  # fmt: skip
            raise ValueError(f"{where}.results[{i}] is not a check with a name and a status")
        if r["status"] == "FAIL":
            failed.append(r["name"])
            detail = r.get("detail")
            if not reason and isinstance(detail, str) and detail.strip():
                reason = detail.strip().splitlines()[0]
    if entry["ok"] and failed:
        raise ValueError(f"{where}.ok is true, but its check {failed[0]} failed")
    return SmokeRecord(target=entry["target"], image=entry["image"], image_id=entry["image_id"],
                       ok=entry["ok"], failed=tuple(failed), reason=reason,
                       store=entry.get("store"), at=entry.get("at"),
                       served=served)  # fmt: skip


def read_records(
    path: Path, error: type[LockpipeError] = SmokeError
) -> tuple[tuple[SmokeRecord, ...], list[dict[str, Any]]]:
    """The entries of a ``smoke.json`` (none when it does not exist), checked, with their JSON.

    ``error`` (SmokeError by default) names the file, what is wrong and the fix when it
    cannot be read or is not the shape :func:`write_json` writes."""
    try:
        doc = loads(read_utf8(path, error))  # /dev/zero, 300 MB: named, never read whole
    except FileNotFoundError:
        return (), []
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise error(f"{path}: unreadable smoke report ({exc}); {FIX}") from None
    try:
        if not isinstance(doc, dict) or not isinstance(doc.get("reports"), list):
            what = _kind(doc)
            if isinstance(doc, dict):
                has = f"whose reports is {_kind(doc['reports'])}" if "reports" in doc else ""
                what = f"an object {has or 'without reports'}"
            raise ValueError(f'expected an object {{"reports": [...]}}, found {what}')
        entries: list[dict[str, Any]] = doc["reports"]
        records = tuple(_record(e, f"reports[{i}]") for i, e in enumerate(entries))
    except ValueError as exc:
        raise error(f"{path}: not a smoke report: {exc}; {FIX}") from None
    return records, entries


def write_json(reports: Sequence[SmokeReport], path: Path, *, now: datetime | None = None) -> None:
    """Merge this run's ``reports`` into ``path`` and write it atomically.

    Each report replaces the entry of the same target and image (if any); every other
    entry stays, so a run of one target never drops another's result. SmokeError (before
    anything is written) when the file there is not a smoke report."""
    at = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    new = [{**to_json(r), "at": at} for r in reports]
    replaced = {(e["target"], e["image_id"], e["image"]) for e in new}
    # Runs that finish together each read, merge and replace under the lock: none of
    # them writes over an entry another wrote after it read the file.
    with file_lock(path.with_name(f".{path.name}.lock")):
        records, entries = read_records(path)
        kept = [e for r, e in zip(records, entries, strict=True) if r.key not in replaced]
        doc = {"reports": [*kept, *new]}
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
    text = ET.tostring(junit_tree(reports).getroot(), encoding="unicode", xml_declaration=True)
    write_atomic(path, text + "\n")  # never a truncated file in place of the last good one
