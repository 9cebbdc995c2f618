"""Strict by default: a typo in smoke.json or preflight.json is an error with a hint (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import LockError, SmokeConfigError
from lockpipe.preflight import config
from lockpipe.smoke.config import load_smoke
from lockpipe.spelling import hint, nearest

REPO = Path(__file__).resolve().parents[2]


def _smoke(tmp_path: Path, target: dict[str, Any]) -> Path:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"t": target}}))
    return path


GEN = [{"prompt": "The Eiffel Tower is in", "expect": ["Paris"]}]


def test_the_repository_files_pass() -> None:
    assert load_smoke(REPO / "locks/smoke.json")
    assert config.load(REPO / "locks/preflight.json").targets


def test_a_misspelt_smoke_key_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = _smoke(tmp_path, {"ready_secs": 5, "generation": GEN, "probes": {}})
    with pytest.raises(SmokeConfigError) as err:
        load_smoke(path)
    assert err.value.return_code == 15
    assert "targets.t.ready_secs: unknown key (did you mean ready_seconds?)" in str(err.value)


def test_a_misspelt_generation_key_is_refused(tmp_path: Path) -> None:
    path = _smoke(tmp_path, {"generation": [{**GEN[0], "max_token": 3}], "probes": {}})
    with pytest.raises(SmokeConfigError, match=r"generation\[0\]\.max_token: .*max_tokens"):
        load_smoke(path)


def test_smoke_json_missing_or_without_probes_is_a_smoke_config_error(tmp_path: Path) -> None:
    with pytest.raises(SmokeConfigError) as err:
        load_smoke(tmp_path / "absent.json")
    assert err.value.return_code == 15
    with pytest.raises(SmokeConfigError, match='needs a "probes" object'):
        load_smoke(_smoke(tmp_path, {"generation": GEN}))


def test_a_misspelt_preflight_key_is_refused_with_a_hint() -> None:
    doc = {"version": 1, "targets": {"t": {"crad": "rtx3090"}}}
    with pytest.raises(LockError, match=r"targets\.t\.crad: unknown key \(did you mean card\?\)"):
        config.parse(doc, Path("preflight.json"))
    with pytest.raises(LockError, match=r"modles: unknown key \(did you mean models\?\)"):
        config.parse({"version": 1, "modles": {}}, Path("preflight.json"))


def test_nearest_name() -> None:
    assert nearest("frank-smal", ["frank-small", "llama-cpu"]) == "frank-small"
    assert nearest("zzz", ["frank-small", "llama-cpu"]) is None
    assert hint("LLAMA-CPU", ["llama-cpu"]) == " (did you mean llama-cpu?)"
