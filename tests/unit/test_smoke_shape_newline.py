"""A shape key with a trailing newline is no key: no run's shape would ever find it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.errors import MetricsError
from lockpipe.smoke.metrics import load_baselines
from lockpipe.smoke.shape import parse_key


def test_a_key_with_a_trailing_newline_is_not_a_key() -> None:
    assert parse_key("kv=bfloat16,ctx=131072,par=2\n") is None


def test_a_smoke_json_key_with_a_trailing_newline_is_refused_at_load(tmp_path: Path) -> None:
    key = "kv=bfloat16,ctx=131072,par=2\n"
    path = tmp_path / "smoke.json"
    doc = {"version": 1, "targets": {"frank-small": {"probes": {key: {"accept": {"value": 1}}}}}}
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(MetricsError, match="is not a serving shape key") as exc:
        load_baselines(path)
    assert repr(key) in str(exc.value)
