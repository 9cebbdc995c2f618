"""sdk_call reads a TypeError, KeyError or RecursionError as the daemon's odd answer only
where the SDK, requests or json raised it while reading that answer. Raised in lockpipe's
own code it is a bug, and its traceback is what to report: before, every such error in a
decorated method became 'answered ... with a shape lockpipe does not read', blaming the
daemon for lockpipe's bug (issue 18)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lockpipe.engines.docker import DockerEngine
from lockpipe.engines.sdk import sdk_call
from lockpipe.errors import EngineError


class _Engine(DockerEngine):
    def __init__(self) -> None:  # not connected: only sdk_call's translation is tested
        self.url, self.timeout = "unix:///run/docker.sock", 60.0

    @sdk_call("inspect image")
    def lockpipe_bug(self, ref: str) -> Any:
        return len(None)  # type: ignore[arg-type]  # a bug in lockpipe's own code

    @sdk_call("inspect image")
    def odd_json(self, ref: str) -> Any:
        return json.loads("[" * 100000 + "]" * 100000)  # json raises reading the answer


def test_a_type_error_in_lockpipes_own_code_is_not_blamed_on_the_daemon() -> None:
    with pytest.raises(TypeError):
        _Engine().lockpipe_bug("img:1")


def test_an_answer_json_cannot_read_is_the_daemons_odd_answer() -> None:
    with pytest.raises(EngineError) as caught:
        _Engine().odd_json("img:1")
    assert "answered inspect image img:1 with a shape lockpipe does not read" in str(caught.value)
    assert "(RecursionError)" in str(caught.value)
