"""Smoke reports: the table, the JSON, and JUnit XML parsed back."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rich.console import Console

from lockpipe.errors import SmokeError
from lockpipe.smoke.report import (
    CheckResult,
    SmokeReport,
    read_records,
    render,
    write_json,
    write_junit,
)

LOG = Path("/tmp/smoke/frank-small.log")
LONG = "x" * 300


def frank() -> SmokeReport:
    return SmokeReport(
        target="frank-small",
        image="localhost/vllm/vllm-openai:frank-small",
        image_id="sha256:" + "ab" * 32,
        engine="podman",
        results=(
            CheckResult(name="ready", ok=True, detail="/health 200 after 41 s", seconds=41.2),
            CheckResult(
                name="throughput",
                ok=False,
                detail="tg@85k: 12.10, below 14.96\nfull table:\n\x1b[31mred\x00",
                seconds=88.0,
                measured={"pp@67k": 1290.4, "tg@85k": 12.1},
            ),
            CheckResult(name="audio", ok=False, detail=LONG, seconds=1.5),
            CheckResult(name="gpu-memory", ok=False, detail="no GPU on this host", skipped=True),
        ),
        log_path=LOG,
    )


def cpu() -> SmokeReport:
    return SmokeReport(
        target="llama-cpu", image="localhost/lockpipe/llama-cpu:b10069",
        image_id="sha256:" + "cd" * 32, engine="docker",
        results=(CheckResult(name="ready", ok=True, seconds=3.0),
                 CheckResult(name="chat", ok=True, seconds=2.0)),
    )  # fmt: skip


def test_counts_and_verdict() -> None:
    r = frank()
    assert [c.name for c in r.failures] == ["throughput", "audio"]
    assert not r.ok and cpu().ok
    assert r.seconds == 41.2 + 88.0 + 1.5
    assert [c.status for c in r.results] == ["PASS", "FAIL", "FAIL", "SKIP"]


def test_render_shows_every_check_and_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")  # a terminal's table; CI's TERM=dumb reads as no terminal
    console = Console(record=True, width=200, color_system=None, force_terminal=True)
    render(frank(), console)
    text = console.export_text()
    assert "smoke: frank-small (localhost/vllm/vllm-openai:frank-small, podman)" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    assert "PASS" in rows["ready"] and "41.2 s" in rows["ready"]
    assert "FAIL" in rows["throughput"] and "pp@67k=1290, tg@85k=12.1" in rows["throughput"]
    assert "full table" not in text  # the table shows only each detail's first line
    assert "SKIP" in rows["gpu-memory"]
    assert f"frank-small: 2 failed in 130.7 s; server log: {LOG}" in text


def test_to_a_file_the_table_is_plain_and_unwrapped() -> None:
    """issue 19: not a terminal (a pipe, a CI log): no box, and no row folded at 80 columns."""
    console = Console(record=True, width=80, color_system=None)
    render(frank(), console)
    text = console.export_text()
    assert not set("│─┃━┏┡└") & set(text)
    (row,) = [line for line in text.splitlines() if line.lstrip().startswith("throughput")]
    assert "FAIL" in row and "pp@67k=1290, tg@85k=12.1" in row and len(row) > 80


def test_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out" / "smoke.json"
    write_json([frank(), cpu()], path)
    doc = json.loads(path.read_text())
    first = doc["reports"][0]
    assert first["target"] == "frank-small" and first["ok"] is False
    assert first["log_path"] == str(LOG) and doc["reports"][1]["log_path"] is None
    assert first["results"][1]["measured"] == {"pp@67k": 1290.4, "tg@85k": 12.1}
    assert [c["status"] for c in first["results"]] == ["PASS", "FAIL", "FAIL", "SKIP"]


def test_json_accumulates_one_result_per_target_and_image(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    write_json([frank(), cpu()], path, now=datetime(2026, 11, 2, 10, tzinfo=timezone.utc))
    rebuilt = replace(cpu(), image_id="sha256:" + "ef" * 32, store=Path("/srv/store"))
    fixed = replace(frank(), results=frank().results[:1])
    write_json([fixed, rebuilt], path, now=datetime(2026, 11, 3, 9, tzinfo=timezone.utc))
    records, _ = read_records(path)
    assert [(r.target, r.image_id[7:9], r.ok, r.at) for r in records] == [
        ("llama-cpu", "cd", True, "2026-11-02T10:00:00Z"),  # the other image's result stays
        ("frank-small", "ab", True, "2026-11-03T09:00:00Z"),  # this image's: replaced
        ("llama-cpu", "ef", True, "2026-11-03T09:00:00Z"),
    ]
    assert records[2].store == "/srv/store" and records[0].store is None


def test_a_failed_result_names_its_checks_and_first_reason(tmp_path: Path) -> None:
    write_json([frank()], tmp_path / "smoke.json")
    (record,) = read_records(tmp_path / "smoke.json")[0]
    assert record.failed == ("throughput", "audio") and record.reason.startswith("tg@85k: 12.10")


def test_writing_into_a_file_of_another_shape_refuses_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    path.write_text('{"reports": {"frank-small": true}}')
    with pytest.raises(SmokeError, match=r"not a smoke report: .* whose reports is an object; "
                       r"move it aside \(or remove it\)"):  # fmt: skip
        write_json([cpu()], path)
    assert path.read_text() == '{"reports": {"frank-small": true}}'
    assert read_records(tmp_path / "absent.json") == ((), [])


def test_junit_structure(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit([frank(), cpu()], path)
    assert path.read_bytes().startswith(b"<?xml version='1.0' encoding='utf-8'?>")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "6", "failures": "2", "errors": "0", "skipped": "1",
    }  # fmt: skip
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["frank-small", "llama-cpu"]
    fs = suites[0]
    assert (fs.get("tests"), fs.get("failures"), fs.get("skipped")) == ("4", "2", "1")
    assert fs.get("time") == "130.700"
    props = {p.get("name"): p.get("value") for p in fs.iter("property")}
    assert props == {
        "image": "localhost/vllm/vllm-openai:frank-small",
        "image_id": "sha256:" + "ab" * 32,
        "engine": "podman",
        "log": str(LOG),
    }
    cases = fs.findall("testcase")
    assert [(c.get("classname"), c.get("name"), c.get("time")) for c in cases] == [
        ("smoke.frank-small", "ready", "41.200"),
        ("smoke.frank-small", "throughput", "88.000"),
        ("smoke.frank-small", "audio", "1.500"),
        ("smoke.frank-small", "gpu-memory", "0.000"),
    ]
    assert list(cases[0]) == []  # a pass has no children
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == "tg@85k: 12.10, below 14.96"
    assert failure.get("type") == "SmokeCheckFailed"
    # the full detail, control characters replaced so the file stays valid XML
    assert failure.text == "tg@85k: 12.10, below 14.96\nfull table:\n\ufffd[31mred\ufffd"
    assert cases[1].findtext("system-out") == "pp@67k = 1290.4\ntg@85k = 12.1"
    long = cases[2].find("failure")
    assert long is not None and long.text == LONG
    assert long.get("message") == "x" * 199 + "…"
    skipped = cases[3].find("skipped")
    assert skipped is not None and skipped.get("message") == "no GPU on this host"
    assert cases[3].find("failure") is None
    cpu_suite = suites[1]
    assert cpu_suite.get("failures") == "0" and cpu_suite.find("testcase/failure") is None


TURBO = "kv=turboquant_k8v4,ctx=262144,par=2"


def unjudged() -> SmokeReport:
    """frank-small in the lock's turboquant shape, for which no baseline was measured yet."""
    return SmokeReport(
        target="frank-small", image="localhost/vllm/vllm-openai:frank-small",
        image_id="sha256:" + "ab" * 32, engine="podman",
        results=(
            CheckResult(name="throughput probes", ok=True,
                        detail=f"no baseline for {TURBO}: figures reported, not judged",
                        seconds=90.0, measured={"pp@67k": 1410.5, "tg@85k": 18.2}, shape=TURBO,
                        unjudged=("pp@67k", "tg@85k")),
            CheckResult(name="spec-decode acceptance", ok=True,
                        detail=f"within tolerance of the {TURBO} baselines", seconds=20.0,
                        measured={"accept": 3.1}, shape=TURBO),
            CheckResult(name="ready", ok=True, detail="/health 200", seconds=41.0),
        ),
    )  # fmt: skip


def test_a_check_without_baseline_is_marked_in_json(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    write_json([unjudged()], path)
    probes, accept, ready = json.loads(path.read_text())["reports"][0]["results"]
    assert probes["status"] == "PASS"
    assert probes["baseline"] == {"shape": TURBO, "no_baseline": ["pp@67k", "tg@85k"]}
    assert accept["baseline"] == {"shape": TURBO, "no_baseline": []}
    assert ready["baseline"] is None


def test_a_check_without_baseline_is_marked_in_junit(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    write_junit([unjudged()], path)
    probes, accept, ready = ET.parse(path).getroot().findall("testsuite/testcase")
    assert probes.find("failure") is None and probes.find("skipped") is None
    props = {p.get("name"): p.get("value") for p in probes.iterfind("properties/property")}
    assert props == {"shape": TURBO, "no_baseline": "pp@67k, tg@85k"}
    assert (
        probes.findtext("system-out")
        == "pp@67k = 1410.5 (no baseline)\ntg@85k = 18.2 (no baseline)"
    )
    assert {p.get("name") for p in accept.iterfind("properties/property")} == {"shape"}
    assert accept.findtext("system-out") == "accept = 3.1"
    assert ready.find("properties") is None


def test_a_junit_write_cut_short_leaves_the_last_file_whole(tmp_path: Path) -> None:
    """The XML was written straight to its path: a full disk (here a file size limit)
    left a truncated smoke.junit.xml where the last good one was."""
    script = f"""
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from lockpipe.smoke.report import CheckResult, SmokeReport, write_junit
path = Path({str(tmp_path / "smoke.junit.xml")!r})
def report(detail):
    check = CheckResult(name="a", ok=not detail, detail=detail)
    return SmokeReport(target="app", image="i", image_id="sha256:x", engine="podman",
                       results=(check,))
write_junit([report("")], path)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
try:
    write_junit([report("x" * 2_000_000)], path)
except OSError as exc:
    print("refused:", exc.strerror)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "refused: File too large" in out.stdout, out.stdout
    root = ET.parse(tmp_path / "smoke.junit.xml").getroot()  # the first file, whole
    assert root.get("failures") == "0", ET.tostring(root)
