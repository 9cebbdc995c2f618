"""Smoke runs that finish together keep every result (issue 18): smoke.json is read, merged
and replaced under a lock by each, in real processes writing at once."""

from __future__ import annotations

import multiprocessing
from dataclasses import replace
from pathlib import Path

import pytest

from lockpipe.smoke.report import read_records, write_json
from tests.unit.test_smoke_report import cpu

pytestmark = pytest.mark.integration
RUNS, EACH = 6, 15


def _run(path: Path, n: int, start: multiprocessing.synchronize.Barrier) -> None:
    start.wait()
    for i in range(EACH):
        write_json([replace(cpu(), target=f"t{n}-{i}")], path)


def test_concurrent_runs_lose_no_entry(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    fork = multiprocessing.get_context("fork")
    start = fork.Barrier(RUNS)
    runs = [fork.Process(target=_run, args=(path, n, start)) for n in range(RUNS)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=120)
    assert [run.exitcode for run in runs] == [0] * RUNS
    records, _ = read_records(path)
    assert sorted(r.target for r in records) == sorted(
        f"t{n}-{i}" for n in range(RUNS) for i in range(EACH)
    )  # without the lock, a run that read before another wrote drops that one's entry
    assert not list(tmp_path.glob(".smoke.json.*[!k]"))  # no temporary file left behind
