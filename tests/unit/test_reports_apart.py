"""A report file may not be the lock the run reads (nor images.json beside it, nor another
report of the run): `plan --json LOCK` replaced the lock with the plan, and
`refresh-digests --dry-run --report-json LOCK` with the report, though --dry-run promises
never to write the lock (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import UsageError
from tests.lockfactory import doc, make_repo


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--json", "{lock}"],
        ["refresh-digests", "--dry-run", "--kind", "pip", "--pypi", "http://127.0.0.1:1/",
         "--report-json", "{lock}"],
        ["refresh-digests", "--dry-run", "--kind", "pip", "--pypi", "http://127.0.0.1:1/",
         "--report-md", "{dir}/r", "--report-json", "{dir}/r"],
    ],
    ids=["plan-json", "refresh-report-json", "two-reports"],
)  # fmt: skip
def test_a_report_over_a_file_the_run_reads_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    lock = make_repo(tmp_path, doc())
    before = lock.read_bytes()
    given = [a.format(lock=lock, dir=tmp_path) for a in argv]
    assert main([*given, "--lock", str(lock)]) == UsageError.return_code
    err = capsys.readouterr().err
    assert "which the report would replace; give the report a path of its own" in err, err
    assert lock.read_bytes() == before
    assert not (tmp_path / "r").exists()


def test_a_report_beside_the_lock_under_its_own_name_is_written(tmp_path: Path) -> None:
    lock = make_repo(tmp_path, doc())
    assert main(["plan", "--lock", str(lock), "--json", str(lock.parent / "plan.json")]) == 0
    assert (lock.parent / "plan.json").is_file()
