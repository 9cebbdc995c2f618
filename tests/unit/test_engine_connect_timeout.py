"""A daemon that cannot be connected to in time is a missing engine, not a stuck one.

requests' ConnectTimeout is both a ConnectionError and a Timeout: read as a timeout first,
a TCP DOCKER_HOST that nothing answers at was 'its socket is there, but nothing answers
on it' (EngineError), and doctor and --engine auto did not move on to the next engine."""

from __future__ import annotations

import requests

from lockpipe.engines.docker import DockerEngine
from lockpipe.errors import EngineError, EngineMissing


def _engine() -> DockerEngine:
    engine = object.__new__(DockerEngine)  # not connected: translate only words errors
    engine.url, engine.timeout = "tcp://10.9.9.9:2376", 60.0
    return engine


def test_a_connect_timeout_is_an_engine_that_does_not_answer() -> None:
    got = _engine().translate(requests.ConnectTimeout("x"), "inspect", "img:1", EngineError, "")
    assert isinstance(got, EngineMissing), got
    assert "docker does not answer at tcp://10.9.9.9:2376 (ConnectTimeout)" in str(got)


def test_a_read_timeout_is_still_a_daemon_that_stopped_answering() -> None:
    got = _engine().translate(requests.ReadTimeout("x"), "inspect", "img:1", EngineError, "")
    assert type(got) is EngineError and "within 60 s (its socket is there" in str(got)
