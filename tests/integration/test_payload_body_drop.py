"""What a connection brought before it broke is handed on, not thrown away with it.

body() gathers reads into chunks, handed on once full or GATHER seconds old; a connection
that broke inside that window lost the bytes gathered so far (issue 18): a retry fetched
them again, and a server that drops fast counted as one that brought nothing, spending the
file's retry budget though it moved."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lockpipe.http import Retries
from lockpipe.http.transport import Policy, Transport
from lockpipe.payloads.errors import RetryableHTTP
from lockpipe.payloads.http import body, open_range
from lockpipe.payloads.settings import MiB, Tuning
from lockpipe.payloads.sources import candidate
from tests.integration.payload_servers import FaultServer

pytestmark = pytest.mark.integration
DATA = bytes(range(256)) * (12 * 1024 + 17)  # 3 MiB and a bit


@pytest.fixture
def server() -> Iterator[FaultServer]:
    srv = FaultServer("127.0.0.1")
    srv.files["model.bin"] = DATA
    srv.drops = 1
    yield srv
    srv.shutdown()


def test_the_bytes_before_a_drop_are_handed_on(server: FaultServer) -> None:
    transport = Transport(Policy(retries=Retries(attempts=0), timeout=5.0))
    opened = open_range(transport, candidate(f"{server.url}/drop/model.bin", "upstream"), 0, None)
    got = bytearray()
    with pytest.raises(RetryableHTTP):
        for chunk in body(opened, Tuning(chunk=1 * MiB)):
            got += chunk
    assert bytes(got) == DATA[: len(DATA) // 2]  # all the server sent before it dropped
