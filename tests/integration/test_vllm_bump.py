"""A VLLM_VERSION bump is judged by the new version's own rules (issue 17).

The second version is a real one: vLLM 0.33.0, the newest on PyPI when this was written.
Its rules are derived here again from its PyPI wheel (336 MB; under CI=true a PyPI that
cannot be reached fails, elsewhere the test skips) and must equal the file lockpipe ships,
and a lock bumped to it is judged with them: the seeds' TurboQuant shape is still refused
for its sliding layers, by 0.33.0's TurboQuantAttentionBackend.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lockpipe.errors import CheckFailed, LockpipeError
from lockpipe.lock.model import load_lock
from lockpipe.preflight import vllm_release
from tests.frank_small import TURBOQUANT_WHAT_IF, bump, run_preflight
from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[2]
NEW = "0.33.0"


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """0.33.0's rules, derived from its PyPI wheel into a fresh folder."""
    where = tmp_path_factory.mktemp("rules")
    try:
        return vllm_release.derive(NEW, where)
    except LockpipeError as exc:
        unavailable(f"vLLM {NEW}'s wheel could not be fetched from PyPI: {exc}")


def test_the_rules_regenerate_from_the_new_wheel_as_shipped(derived: Path) -> None:
    again = json.loads(derived.read_text())
    assert again["vllm"] == NEW and again["wheel"]["file"].startswith(f"vllm-{NEW}-")
    assert again == json.loads(vllm_release.rules_path(NEW).read_text())


def test_a_bumped_lock_is_judged_by_the_new_versions_rules(derived: Path, tmp_path: Path) -> None:
    lock = bump(tmp_path, NEW)
    # what lock writes on a bump: the derived rules beside the lock, read before lockpipe's
    beside = vllm_release.beside(load_lock(lock))
    beside.mkdir()
    shutil.copy(derived, beside / derived.name)
    assert vllm_release.source_of(load_lock(lock), NEW) == beside
    code, by = run_preflight(tmp_path, "--gpu", "rtx3090", "--vllm-parser", "off",
                             *TURBOQUANT_WHAT_IF, "frank-small", lock=lock)  # fmt: skip
    fs = by["frank-small"]
    rules = next(f for f in fs["figures"] if f["name"] == "backend rules")
    assert f"data/vllm-{NEW}.json" in rules["note"]
    backend = next(c for c in fs["checks"] if c["name"] == "backend")
    assert code == CheckFailed.return_code and backend["status"] == "fail"
    assert "sliding window not supported (40 sliding layers)" in backend["detail"]
    # 0.33.0's own default, read from its config/cache.py
    memory = next(f for f in fs["figures"] if f["name"] == "KV memory")
    assert memory["note"].startswith("0.92 x")
