"""docker's rewrite-timestamp branch, chosen by the dockerd version alone (no daemon)."""

from __future__ import annotations

import json

import pytest

from lockpipe.engines.docker import REWRITE_TIMESTAMP_SINCE, dockerd_major, rewrite_params


@pytest.mark.parametrize(
    ("version", "major"), [("20.10.24+dfsg1", 20), ("26.1.5+dfsg1", 26), ("dev", 0)]
)
def test_dockerd_major(version: str, major: int) -> None:
    assert dockerd_major(version) == major


def test_rewrite_timestamp_is_asked_from_dockerd_26_only() -> None:
    assert REWRITE_TIMESTAMP_SINCE == 26  # BuildKit v0.13 (moby/buildkit#4057) came with 26.0
    assert rewrite_params("20.10.24+dfsg1") == {}
    assert rewrite_params("25.0.3") == {}
    outputs = json.loads(rewrite_params("26.1.5+dfsg1")["outputs"])
    assert outputs == [{"Type": "moby", "Attrs": {"rewrite-timestamp": "true"}}]
