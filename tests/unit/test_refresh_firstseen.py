"""--min-age from lockpipe's own first-seen record, with an injected clock."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lockpipe.errors import UsageError
from lockpipe.refresh import firstseen
from lockpipe.refresh.proposal import Proposal
from lockpipe.refresh.propose import hold

T0 = datetime(2026, 12, 2, 1, 50, tzinfo=timezone.utc)
P = Proposal(kind="bases", name="vllm-openai", pinned="v0.29.0-cu129", version="0.33.0",
             new="vllm/vllm-openai:v0.33.0-cu129", targets=("frank-small",))  # fmt: skip


def test_a_version_first_seen_today_is_held_and_released_three_days_later(tmp_path: Path) -> None:
    path = tmp_path / "first-seen.json"
    three = firstseen.parse_age("3d")
    (today,), record = hold([P], firstseen.load(path), T0, three)
    assert today.held and "--min-age 3.0 days" in today.held
    assert today.first_seen == "2026-12-02T01:50:00Z"
    firstseen.save(path, record)
    assert json.loads(path.read_text())["first_seen"] == {
        "bases.vllm-openai": {"0.33.0": "2026-12-02T01:50:00Z"}
    }
    (almost,), _ = hold([P], firstseen.load(path), T0 + three - timedelta(seconds=1), three)
    assert almost.held
    (later,), again = hold([P], firstseen.load(path), T0 + three, three)
    assert later.held is None and later.first_seen == "2026-12-02T01:50:00Z"  # not re-stamped
    assert again == record
    (now,), _ = hold([P], {}, T0, firstseen.parse_age("0s"))
    assert now.held is None


def test_ages_and_bad_records_are_usage_errors(tmp_path: Path) -> None:
    assert firstseen.parse_age("12h") == timedelta(hours=12)
    assert firstseen.parse_age("2w") == timedelta(weeks=2)
    for bad in ("3", "3 days", "-1d", "d"):
        with pytest.raises(UsageError, match="--min-age"):
            firstseen.parse_age(bad)
    broken = tmp_path / "broken.json"
    broken.write_text('{"version": 1, "first_seen": {"bases.x": {"1.0": "yesterday"}}}')
    with pytest.raises(UsageError, match="is not YYYY-MM-DDTHH:MM:SSZ"):
        firstseen.load(broken)
    broken.write_text("[]")
    with pytest.raises(UsageError, match="not a version 1 first-seen record"):
        firstseen.load(broken)
