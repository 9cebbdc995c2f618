"""Unit tests are pure: any attempt to open a network connection fails the test, and
preflight never starts vLLM's own parser (seconds of torch imports; the integration tests
run it): its serve commands are read by the extract, as the report then says."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"a unit test tried to connect to {address}; move it to integration")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setenv("LOCKPIPE_VLLM_PARSER", "off")
    yield
