"""rules_for(version): a vLLM version's own rules, never another's (issue 17)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from lockpipe.errors import LockError
from lockpipe.lock.model import load_lock
from lockpipe.preflight import vllm_release

REPO = Path(__file__).resolve().parents[2]


def test_the_locks_version_has_its_own_rules() -> None:
    lock = load_lock(REPO / "locks" / "digests.json")
    assert vllm_release.missing(lock) == []
    for version in vllm_release.pinned(lock):
        facts = vllm_release.rules_for(version)
        assert facts["vllm"] == version and f"vllm-{version}-" in facts["wheel"]["file"]


def test_rules_derived_for_another_version_are_refused_with_the_fix(tmp_path: Path) -> None:
    # a bump that copied the old file under the new name: the facts still say 0.29.0
    shutil.copy(vllm_release.rules_path("0.29.0"), vllm_release.rules_path("0.33.0", tmp_path))
    with pytest.raises(LockError) as err:
        vllm_release.rules_for("0.33.0", tmp_path)
    text = str(err.value)
    assert "derived for vLLM 0.29.0" in text and "not 0.33.0" in text
    assert f"python -m lockpipe.preflight.vllm_release 0.33.0 --data {tmp_path}" in text


def test_a_version_field_that_disagrees_with_its_wheel_is_refused(tmp_path: Path) -> None:
    facts = json.loads(vllm_release.rules_path("0.29.0").read_text())
    facts["vllm"] = "0.33.0"  # hand-edited: the wheel is still 0.29.0's
    vllm_release.rules_path("0.33.0", tmp_path).write_text(json.dumps(facts))
    with pytest.raises(LockError, match=r"from vllm-0\.29\.0-"):
        vllm_release.rules_for("0.33.0", tmp_path)


def test_missing_rules_name_lock_as_the_fix(tmp_path: Path) -> None:
    with pytest.raises(LockError, match=r"no preflight rules for vLLM 9\.9\.9 .*lockpipe lock"):
        vllm_release.rules_for("9.9.9", tmp_path)


def test_lock_check_refuses_a_vllm_version_without_rules_naming_lock(tmp_path: Path) -> None:
    from lockpipe.cli.check import do_lock
    from tests.frank_small import bump

    path = bump(tmp_path, "0.32.0")  # a release lockpipe ships no rules for
    lock = load_lock(path)
    assert vllm_release.missing(lock) == ["0.32.0"]
    assert vllm_release.source_of(lock, "0.32.0") == tmp_path / "locks" / "vllm-rules"
    with pytest.raises(LockError) as err:
        do_lock(argparse.Namespace(lock=path, check=True, force=False))
    text = str(err.value)
    assert "no preflight rules for vLLM 0.32.0 (VLLM_VERSION)" in text
    assert "lockpipe lock" in text and f"--data {tmp_path / 'locks' / 'vllm-rules'}" in text
