"""What ``lockpipe deploy`` reads from files and writes into the unit's header: text with a
line end systemd honours (NUL, CR) never adds a unit line, and a smoke result's time or a
build record's field holding one is refused in one line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.deploy.unit import Section, Unit, unit_lines
from lockpipe.errors import DeployError
from lockpipe.imagebuild.records import record_path
from tests.unit.test_deploy_cli import (  # noqa: F401  (_env: the fixture)
    TARGET,
    _env,
    built,
    deploy,
    fetched,
    result,
    smoke_json,
)

SPILL = "x\x00[Service]\x00ExecStartPost=/bin/touch /tmp/pwned"


def error_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    return line


def no_unit(tmp_path: Path) -> bool:
    return not (tmp_path / "out" / f"{TARGET}.container").exists()


def test_a_nul_in_the_smoke_results_time_is_refused_naming_smoke_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """'at' reaches the header ('Smoke: passed on … at AT'): a NUL there was a unit line
    of its own to systemd ([Service] ExecStartPost=…), and deploy exited 0."""
    built(tmp_path / "state")
    store = fetched(tmp_path / "home" / ".cache" / "lockpipe" / "store")
    path = smoke_json(tmp_path, {"reports": [result(store=store, at=f"2026-01-01{SPILL}")]})
    assert deploy(tmp_path) == DeployError.return_code
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {path}: not a smoke report: reports[0].at is "), line
    assert "run lockpipe smoke again" in line
    assert no_unit(tmp_path)


@pytest.mark.parametrize("field", ["tag", "built_at", "engine", "engine_version", "key"])
def test_a_control_character_in_a_build_record_field_is_refused_naming_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    """Each of these fields is written into the header's 'Image: …' line."""
    built(tmp_path / "state")
    store = fetched(tmp_path / "home" / ".cache" / "lockpipe" / "store")
    smoke_json(tmp_path, {"reports": [result(store=store)]})
    path = record_path(tmp_path / "state", "podman", TARGET)
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, field: doc[field] + SPILL}))
    assert deploy(tmp_path) == DeployError.return_code
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {path}: {field} "), line
    assert "control character" in line and f"lockpipe build --engine podman {TARGET}" in line
    assert no_unit(tmp_path)


@pytest.mark.parametrize("text", [SPILL, "a\rExecStartPost=/bin/true", "a\x0bb\x1cc\x85d", "a\\"])
def test_no_header_text_adds_a_line_systemd_reads(text: str) -> None:
    """Whatever reaches the header, every line systemd sees before the first section is a
    comment, and the unit keeps only the sections it was given."""
    section = Section(name="Unit", entries=(("Description", "d"),))
    rendered = Unit(header=("first", text, "multi\nline"), sections=(section,)).render()
    lines = unit_lines(rendered)
    head = lines[: lines.index("[Unit]")]
    assert all(x.startswith("#") or x == "" for x in head), head
    assert not any(x.endswith("\\") for x in head), head
    assert [x for x in lines if x.startswith("[")] == ["[Unit]"]
    assert "# multi" in lines and "# line" in lines
