"""A FAKE OpenAI-compatible llama-server, and a FAKE engine whose container it is.

:class:`OpenAIFake` is a real HTTP server on 127.0.0.1 answering /health,
/v1/models, /v1/completions (also streamed, as server-sent events),
/v1/chat/completions and /metrics (llama-server's counters, growing with each
completion), each JSON answer taken from ``answers`` by path (:data:`GOOD` holds
right ones). :class:`ServingEngine` is the shared fake engine whose ``run`` starts
one on the host port the smoke runner chose and whose ``stop`` stops it, so
``lockpipe smoke`` runs end to end with no container.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from lockpipe.engines.base import RunSpec
from tests import fake_engine
from tests.httpfake import FakeHandler, FakeServer

IMAGE = "sha256:" + "5" * 64
STREAM = "/v1/completions (stream)"  # the key of one streamed event's answer
GOOD: dict[str, Any] = {
    "/v1/models": {"object": "list", "data": [{"id": "app", "object": "model"}]},
    "/v1/completions": {"choices": [{"text": " 6, 7, 8", "index": 0}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 4}},
    "/v1/chat/completions": {"choices": [{"message": {"role": "assistant",
                                                      "content": "It is red."}}]},
    STREAM: {"choices": [{"text": " the", "index": 0}]},
}  # fmt: skip


@dataclass(frozen=True)
class Trickle:
    """An answer that is never whole: ``status``, a ``Content-Length`` of ``length``,
    then one byte every ``every`` seconds (a server stuck mid-answer). With ``every``
    0 it sends ``length`` bytes as fast as it can: an answer without end."""

    status: int = 200
    length: int = 100_000
    every: float = 0.5
    in_headers: bool = False  # the trickle is one header's value: no header ever ends


# llama-server's counters, growing with the tokens served; answers["/metrics"] replaces it
METRICS = (
    "llamacpp:prompt_tokens_total {tokens}\n"
    "llamacpp:prompt_seconds_total {prompt_seconds}\n"
    "llamacpp:tokens_predicted_total {tokens}\n"
    "llamacpp:tokens_predicted_seconds_total {gen_seconds}\n"
)


class OpenAIFake(FakeServer):
    """FAKE llama-server: /health, /v1/models, /v1/completions (also streamed),
    /v1/chat/completions and /metrics, each answer from ``answers``."""

    def __init__(self, port: int, answers: dict[str, Any]) -> None:
        self.answers, self.tokens = answers, 0  # set first: it serves from super().__init__
        super().__init__(_Handler, port)


class _Handler(FakeHandler):
    server: OpenAIFake

    def do_GET(self) -> None:
        if self.path == "/health":
            self.answer(self.server.answers.get("/health", {"status": "ok"}))
        elif self.path == "/metrics":
            with self.server.lock:
                tokens = self.server.tokens
            metrics = self.server.answers.get("/metrics", METRICS)
            if isinstance(metrics, Trickle):
                self.trickle(metrics)
                return
            text = metrics.format(tokens=tokens, prompt_seconds=tokens / 100,
                                  gen_seconds=tokens / 50)  # fmt: skip
            self.send_bytes(200, text.encode(), {"Content-Type": "text/plain; version=0.0.4"})
        else:
            self.answer(self.server.answers[self.path])

    def answer(self, answer: Any) -> None:
        """``answer`` as JSON, or as it is when it is bytes (what no JSON encoder writes)."""
        if isinstance(answer, Trickle):
            self.trickle(answer)
        elif isinstance(answer, bytes):
            self.send_bytes(200, answer, {"Content-Type": "application/json"})
        else:
            self.send_json(200, answer)

    def trickle(self, answer: Trickle) -> None:
        if answer.in_headers:
            self.wfile.write(f"HTTP/1.1 {answer.status} OK\r\nX-Slow: ".encode())
        else:
            self.send_response(answer.status)
            self.send_header("Content-Length", str(answer.length))
            self.end_headers()
        block = b"x" if answer.every else b"x" * (1 << 16)
        try:
            for _ in range(0, answer.length, len(block)):
                self.wfile.write(block)
                self.wfile.flush()
                time.sleep(answer.every)
        except OSError:  # the client gave up, as it should
            pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.tokens += 4
        if not body.get("stream"):
            self.answer(self.server.answers[self.path])
            return
        if isinstance(self.server.answers[STREAM], Trickle):
            self.trickle(self.server.answers[STREAM])
            return
        events = [self.server.answers[STREAM], {"choices": [], "usage": {"completion_tokens": 4}}]
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self.send_bytes(200, sse.encode(), {"Content-Type": "text/event-stream"})


class ServingEngine(fake_engine.FakeEngine):
    """The shared FAKE engine, whose container is an :class:`OpenAIFake` on the host port."""

    def __init__(self, answers: dict[str, Any], image: str = IMAGE) -> None:
        super().__init__(image)
        self.answers = answers
        self.server: OpenAIFake | None = None

    def run(self, spec: RunSpec) -> str:
        (port,) = spec.ports.values()
        self.server = OpenAIFake(port, self.answers)
        return super().run(spec)

    def stop(self, container: str) -> None:
        super().stop(container)
        if self.server is not None:
            self.server.stop()
