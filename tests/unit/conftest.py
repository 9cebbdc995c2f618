"""Unit tests are pure: any attempt to open a network connection fails the test."""

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
    yield
