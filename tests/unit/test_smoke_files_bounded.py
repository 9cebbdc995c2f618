"""The smoke report deploy gates on, and the smoke expectations file, are read as any file
lockpipe takes from the user: a device (/dev/zero) or a file past fs.READ_LIMIT is one line
naming it. Before, both were read whole: /dev/zero grew until a MemoryError traceback, and
a 300 MB report took 624 MB (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.errors import DeployError, SmokeConfigError
from lockpipe.fs import READ_LIMIT
from lockpipe.smoke.config import load_smoke
from tests.unit.test_deploy_cli import _env, built, deploy  # noqa: F401  (_env: the fixture)


def test_a_smoke_report_that_is_a_device_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    assert deploy(tmp_path, "--smoke-report", "/dev/zero") == DeployError.return_code
    err = capsys.readouterr().err
    assert "error: /dev/zero: a character device, not a file" in err, err
    assert "Traceback" not in err


def test_smoke_expectations_that_are_a_device_are_refused_naming_them() -> None:
    with pytest.raises(SmokeConfigError) as caught:
        load_smoke(Path("/dev/zero"))
    assert str(caught.value).startswith("/dev/zero: a character device, not a file")


def test_a_smoke_report_past_the_read_limit_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "smoke.json"
    with report.open("wb") as fh:  # sparse: no disk spent
        fh.truncate(READ_LIMIT + 1)
    built(tmp_path / "state")
    assert deploy(tmp_path, "--smoke-report", str(report)) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"error: {report}: 64.0 MiB, over the 64 MiB lockpipe reads" in err, err
