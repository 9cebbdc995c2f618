"""The payload store a smoke result names, and one given with --store: a path no folder
can have, or one that cannot be resolved, is one line naming where it came from, not a
traceback from resolve() or exists()."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.errors import DeployError
from tests.unit.test_deploy_cli import _env, built, deploy, fetched, result, smoke_json  # noqa: F401
from tests.unit.test_deploy_header_input import error_line, no_unit


@pytest.mark.parametrize(
    ("store", "why"),
    [("/tmp/x\x00y", "NUL"), ("/" + "a" * 5000, "longer than 4096"), ("rel/store", "absolute")],
)
def test_a_smoke_results_store_no_path_can_be_is_refused_naming_smoke_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str, why: str
) -> None:
    """A NUL was ValueError's traceback from resolve(), 5000 characters OSError's (File
    name too long), and a relative store was mounted relative to the working folder."""
    built(tmp_path / "state")
    path = smoke_json(tmp_path, {"reports": [result(store=Path(store))]})
    assert deploy(tmp_path) == DeployError.return_code
    line = error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {path}: not a smoke report: reports[0].store "), line
    assert why in line and "run lockpipe smoke again" in line
    assert no_unit(tmp_path)


@pytest.mark.parametrize("where", ["smoke", "--store"])
def test_a_store_that_cannot_be_resolved_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A symlink loop was RuntimeError's traceback from resolve()."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    built(tmp_path / "state")
    smoked = loop / "store" if where == "smoke" else fetched(tmp_path / "store")
    smoke_json(tmp_path, {"reports": [result(store=smoked)]})
    args = ("--store", str(loop / "s")) if where == "--store" else ()
    assert deploy(tmp_path, *args) == DeployError.return_code
    line = error_line(capsys.readouterr().err)
    assert "payload store" in line and "cannot be resolved" in line and "--store" in line, line
    assert no_unit(tmp_path)


def test_a_store_path_too_long_for_the_kernel_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--store of 4000 characters: exists() was OSError's traceback (File name too long)."""
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result()]})
    assert deploy(tmp_path, "--store", "/" + "a" * 4000) == DeployError.return_code
    line = error_line(capsys.readouterr().err)
    assert "payload store" in line and "File name too long" in line, line
    assert no_unit(tmp_path)
