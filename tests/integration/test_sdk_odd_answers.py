"""A podman service that answers a call with JSON of a shape the SDK does not read (nested
past Python's recursion limit, a list for an object, a number for a string) is one
EngineError naming the service and the fix; before, the SDK's RecursionError, its bare
``Exception("Can't create Image from []")`` or a TypeError left lockpipe as a traceback
(issue 18).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lockpipe.engines.podman import PodmanEngine
from lockpipe.errors import EngineError

VERSION = b'{"Version": "5.0.0", "ApiVersion": "1.41"}'
DEEP = b"[" * 100000 + b"]" * 100000


def _service(body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            out = VERSION if self.path.split("?")[0].endswith("/version") else body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


CALLS: dict[str, Callable[[PodmanEngine], object]] = {
    "inspect image": lambda e: e.image_id("localhost/app:1"),
    "inspect container": lambda e: e.state("abc123"),
}


@pytest.mark.parametrize("body", [DEEP, b"[]", b'{"Id": 5}'], ids=["deep", "list", "id-5"])
@pytest.mark.parametrize("call", sorted(CALLS))
def test_an_answer_of_another_shape_is_one_engine_error(body: bytes, call: str) -> None:
    url = next(gen := _service(body))
    try:
        engine = PodmanEngine(url, timeout=5)
        with pytest.raises(EngineError) as caught:
            CALLS[call](engine)
    finally:
        next(gen, None)
    said = str(caught.value)
    if said.startswith("podman at"):  # the SDK could not read it
        assert said.startswith(f"podman at {url} answered {call} ")
        assert " with a shape lockpipe does not read (" in said
    else:  # lockpipe's own reading of the answer (an image ID of 5)
        assert said.startswith(f"podman {call} ")
    assert "lockpipe doctor" in said
    assert "\n" not in said
