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


REPO = Path(__file__).resolve().parents[2]


def _repo_locks(tmp_path: Path) -> Path:
    """The committed lock, preflight.json and smoke.json, copied beside each other."""
    (tmp_path / "images").symlink_to(REPO / "images")
    (tmp_path / "locks").mkdir()
    for name in ("digests.json", "preflight.json", "smoke.json"):
        (tmp_path / "locks" / name).write_bytes((REPO / "locks" / name).read_bytes())
    return tmp_path / "locks" / "digests.json"


@pytest.mark.parametrize(
    ("argv", "read", "named"),
    [
        (["preflight", "--gpu", "rtx3090", "--json", "{locks}/preflight.json"],
         "preflight.json", "the preflight.json beside --lock"),
        (["preflight", "--gpu", "rtx3090", "--preflight", "{tmp}/p.json", "--json",
          "{tmp}/p.json"], "../p.json", "--preflight"),
        (["smoke", "llama-cpu", "--json", "{locks}/smoke.json"], "smoke.json",
         "the smoke.json beside --lock (smoke's expectations)"),
        (["smoke", "llama-cpu", "--expect", "{tmp}/e.json", "--json", "{tmp}/e.json"],
         "../e.json", "--expect"),
        (["smoke", "llama-cpu", "--out", "{tmp}/o", "--json", "{tmp}/o/smoke.json"],
         None, "the smoke.json of --out"),
    ],
    ids=["preflight-beside", "preflight-given", "smoke-beside", "smoke-expect", "smoke-out"],
)  # fmt: skip
def test_a_json_over_a_file_preflight_or_smoke_reads_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], read: str | None,
    named: str,
) -> None:  # fmt: skip
    """`preflight --json locks/preflight.json` exited 0 and replaced the calibrations, so
    the next preflight failed on them; `smoke --json locks/smoke.json` its expectations."""
    lock = _repo_locks(tmp_path)
    for name in ("p.json", "e.json"):
        (tmp_path / name).write_bytes((REPO / "locks" / "smoke.json").read_bytes())
    before = (lock.parent / read).read_bytes() if read else None
    given = [a.format(locks=lock.parent, tmp=tmp_path) for a in argv]
    assert main([*given, "--lock", str(lock)]) == UsageError.return_code
    err = " ".join(capsys.readouterr().err.split())
    assert f"--json {given[-1]} is {named}" in err, err
    assert "which the report would replace; give the report a path of its own" in err, err
    assert "Traceback" not in err
    if read:
        assert (lock.parent / read).read_bytes() == before


@pytest.mark.parametrize("how", ["out", "expect"])
def test_a_smoke_out_that_would_put_smoke_json_over_the_expectations_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """`smoke TARGET --out locks` failed late with 'not a smoke report … move it aside (or
    remove it)' about the expectations file; now refused up front, naming --out."""
    lock = _repo_locks(tmp_path)
    expect = lock.parent / "smoke.json"
    before = expect.read_bytes()
    extra = ["--out", str(lock.parent)]
    if how == "expect":  # the expectations given by --expect, in the default STATE/smoke
        (tmp_path / ".lockpipe" / "smoke").mkdir(parents=True)
        expect = tmp_path / ".lockpipe" / "smoke" / "smoke.json"
        expect.write_bytes(before)
        extra = ["--expect", str(expect)]
    assert main(["smoke", "llama-cpu", "--lock", str(lock), *extra]) == UsageError.return_code
    err = " ".join(capsys.readouterr().err.split())
    assert "would put smoke.json over" in err and "give --out a folder of its own" in err, err
    assert ("--out " if how == "out" else "the default --out") in err, err
    assert "move it aside" not in err and "Traceback" not in err
    assert expect.read_bytes() == before


def test_a_preflight_json_beside_the_lock_under_its_own_name_is_written(tmp_path: Path) -> None:
    lock = _repo_locks(tmp_path)
    (tmp_path / "no-store").mkdir()
    out = lock.parent / "preflight-report.json"
    argv = ["preflight", "--lock", str(lock), "--gpu", "rtx3090", "--driver", "610.57.04",
            "--store", str(tmp_path / "no-store"), "--json", str(out), "llama-cpu"]  # fmt: skip
    assert main(argv) == 0
    assert out.is_file()
    assert main(argv) == 0  # and preflight.json beside the lock still reads
