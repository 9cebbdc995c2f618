"""What a smoke test asks a running server, over its OpenAI-compatible HTTP API.

Each function returns what it measured or raises CheckFailed with what was
expected and what came back; the runner turns those into report rows. Every
answer is read through :class:`~lockpipe.jsonshape.Reader`: one of another shape
(a list where an object belongs, a missing ``choices[0]``) is a failed check
naming the endpoint and the path, never an exception of its own.

Every answer is also read through :func:`send` and :func:`chunks` (:func:`ask` joins
them), to a deadline for the whole request, headers included, and to
:data:`MAX_ANSWER` bytes: a server that answers a byte at a time, or without end,
fails its check when the time is up instead of holding the run.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
import urllib3.exceptions

from lockpipe.errors import CheckFailed
from lockpipe.http import Late, Session, arriving, no_netrc, within
from lockpipe.jsonshape import Reader
from lockpipe.log import PROGRESS_EVERY, echo
from lockpipe.smoke.metrics import MAX_COUNT
from lockpipe.urls import shown


@dataclass(frozen=True, kw_only=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    timings: Mapping[str, Any] = field(default_factory=dict)  # llama-server's, where given


MAX_ANSWER = 8 << 20  # bytes: the most of one answer read (vLLM's /metrics is ~100 KB)
ANSWER_SECONDS = 10.0  # the whole of a short answer: /v1/models, /metrics
GENERATION_SECONDS = 300.0  # the whole of one completion or chat answer
STREAM_SECONDS = 1800.0  # the whole of a streamed completion, a throughput probe's


@dataclass(frozen=True, kw_only=True)
class Reply:
    status: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode(errors="replace")


def chunks(resp: requests.Response, url: str, end: float) -> Iterator[bytes]:
    """``resp``'s body as it arrives (:func:`lockpipe.http.arriving`: each wait for bytes
    bounded by what is left to ``end``), to :data:`MAX_ANSWER` bytes; CheckFailed past
    either, or when the answer breaks off."""
    got = 0
    try:
        for chunk in arriving(resp, end, per_read=math.inf):
            got += len(chunk)
            if got > MAX_ANSWER:
                raise CheckFailed(f"{url} answered more than {MAX_ANSWER:,} bytes; a server?")
            yield chunk
    except Late:
        raise CheckFailed(f"{url} did not finish its answer in time ({got:,} bytes)") from None
    except (OSError, urllib3.exceptions.HTTPError) as exc:
        raise CheckFailed(f"{url} broke off its answer after {got:,} bytes: {exc}") from exc


def ask(method: str, url: str, seconds: float, body: object = None) -> Reply:
    """One request to ``url`` and its whole answer, within ``seconds`` and
    :data:`MAX_ANSWER` bytes (CheckFailed past either). No answer at all raises
    requests' own error, as a server not listening yet does."""
    end = time.monotonic() + seconds
    with send(method, url, end, body) as resp:
        return Reply(status=resp.status_code, content=b"".join(chunks(resp, url, end)))


def send(method: str, url: str, end: float, body: object = None) -> requests.Response:
    """The status and headers of one request (its body streamed, for :func:`chunks`), by
    ``end`` (a monotonic time); CheckFailed past it (:func:`lockpipe.http.within`).
    A redirect is an answer like any other status, not followed: requests read a
    redirect's whole body itself, unbounded (an endless one grew until memory ran out),
    and a model server's API never redirects."""
    left = max(end - time.monotonic(), 0.01)
    try:
        return within(
            lambda: Session().request(method, url, json=body, stream=True, timeout=left,
                                      allow_redirects=False, auth=no_netrc),
            left, f"smoke {method} {url}",
        )  # fmt: skip
    except Late:
        raise CheckFailed(f"{url} did not send its status and headers in time") from None


def wait_ready(base: str, deadline: float, exited: Callable[[], str | None]) -> float:
    """Poll ``/health`` until 200; fail fast if ``exited()`` reports the container gone.

    Returns the seconds it took. ``exited`` returns None while the container
    runs, else a description (exit code and log tail) for the error.
    """
    start = time.monotonic()
    last = "no answer yet"
    said = start  # a line every PROGRESS_EVERY s, so a CI log shows the wait is alive
    while time.monotonic() < deadline:
        if time.monotonic() - said >= PROGRESS_EVERY:
            said = time.monotonic()
            echo(f"waiting for {base}/health: {said - start:.0f} s so far ({last}), "
                 f"{max(deadline - said, 0):.0f} s left")  # fmt: skip
        gone = exited()
        if gone is not None:
            raise CheckFailed(f"the server exited before it was ready: {gone}")
        try:
            end = time.monotonic() + min(2.0, max(deadline - time.monotonic(), 0.1))
            with send("GET", f"{base}/health", end) as resp:
                body = b"".join(chunks(resp, f"{base}/health", end))
                if resp.status_code == 200:
                    return time.monotonic() - start
                last = f"HTTP {resp.status_code} {shown(body.decode(errors='replace'), 200)}"
        except CheckFailed as exc:
            last = str(exc)
        except requests.RequestException as exc:
            last = type(exc).__name__
        time.sleep(0.5)
    raise CheckFailed(f"{base}/health not ready before the deadline (last: {last})")


def _answer(url: str, root: str = "the answer") -> Reader:
    return Reader(where=url, root=root, error=CheckFailed)


def model_ids(base: str) -> list[str]:
    """The ids ``/v1/models`` lists."""
    url = f"{base}/v1/models"
    resp = ask("GET", url, ANSWER_SECONDS)
    if resp.status != 200:
        raise CheckFailed(f"/v1/models answered {resp.status}: {shown(resp.text, 300)}")
    answer = _answer(url)
    doc = answer.parse(resp.content)
    listed = answer.get(doc, ("data",), list, default=[])
    return [answer.get(doc, ("data", i, "id"), str) for i in range(len(listed))]


def complete(
    base: str, model: str, prompt: str, max_tokens: int = 16, *, ignore_eos: bool = False
) -> Generation:
    """A deterministic completion: temperature 0, fixed seed.

    ``ignore_eos``: generate all ``max_tokens`` (vLLM and llama-server both take it).
    """
    body: dict[str, object] = {"model": model, "prompt": prompt, "max_tokens": max_tokens,
                               "temperature": 0, "seed": 0}  # fmt: skip
    if ignore_eos:
        body["ignore_eos"] = True
    url = f"{base}/v1/completions"
    start = time.monotonic()
    resp = ask("POST", url, GENERATION_SECONDS, body)
    seconds = time.monotonic() - start
    if resp.status != 200:
        raise CheckFailed(f"/v1/completions answered {resp.status}: {shown(resp.text, 300)}")
    answer = _answer(url)
    doc = answer.parse(resp.content)
    return Generation(
        text=answer.get(doc, ("choices", 0, "text"), str),
        prompt_tokens=_count(url, answer.get(doc, ("usage", "prompt_tokens"), int, default=0)),
        completion_tokens=_count(
            url, answer.get(doc, ("usage", "completion_tokens"), int, default=0)
        ),
        seconds=seconds,
        timings=answer.get(doc, ("timings",), dict, default={}),
    )


def expect_words(text: str, words: Iterable[str], what: str) -> None:
    """Every word in ``words`` occurs in ``text`` (case-insensitive), or CheckFailed.
    A blank word (load_smoke refuses one) fails too: any text holds it, it proves nothing."""
    words = tuple(words)
    if blank := [w for w in words if not w.strip()]:
        raise CheckFailed(f"{what}: expected words must not be blank, got {blank}")
    missing = [w for w in words if w.lower() not in text.lower()]
    if missing:
        raise CheckFailed(f"{what}: expected {missing} in the answer, got {shown(text, 300)}")


def image_part(png: bytes) -> dict[str, object]:
    """A chat content part carrying a PNG as a data URL."""
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    return {"type": "image_url", "image_url": {"url": url}}


def audio_part(wav: bytes) -> dict[str, object]:
    """A chat content part carrying a WAV as ``input_audio``."""
    return {"type": "input_audio", "input_audio": {"data": base64.b64encode(wav).decode(),
                                                   "format": "wav"}}  # fmt: skip


def chat(base: str, model: str, parts: list[dict[str, object]], max_tokens: int = 48) -> str:
    """One user turn with ``parts``; the assistant's text."""
    body = {"model": model, "temperature": 0, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": parts}]}  # fmt: skip
    url = f"{base}/v1/chat/completions"
    resp = ask("POST", url, GENERATION_SECONDS, body)
    if resp.status != 200:
        raise CheckFailed(f"/v1/chat/completions answered {resp.status}: {shown(resp.text, 300)}")
    answer = _answer(url)
    return answer.get(answer.parse(resp.content), ("choices", 0, "message", "content"), str)


def metrics_text(base: str) -> str:
    """The Prometheus text of ``/metrics``; CheckFailed if the server does not serve it."""
    resp = ask("GET", f"{base}/metrics", ANSWER_SECONDS)
    if resp.status != 200:
        raise CheckFailed(f"{base}/metrics answered {resp.status}; llama-server needs --metrics")
    return resp.text


def stream_timing(base: str, model: str, prompt: str, max_tokens: int) -> tuple[float, float, int]:
    """(seconds to the first token, seconds for the rest, completion tokens), streamed.

    Prompt-processing and generation rates come from these, whatever the runtime.
    """
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    url = f"{base}/v1/completions"
    events = _answer(f"{url} (streamed)", "an event")
    start = time.monotonic()
    first = None
    tokens = 0
    with send("POST", url, start + STREAM_SECONDS, body) as resp:
        if resp.status_code != 200:
            raise CheckFailed(f"streaming /v1/completions answered {resp.status_code}")
        for raw in _lines(chunks(resp, url, start + STREAM_SECONDS)):
            line = raw.decode(errors="replace")
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = events.parse(line[6:])
            if event.get("choices") and first is None:
                first = time.monotonic()
            if events.get(event, ("usage",), dict, default={}):  # null but in the last event
                tokens = _count(
                    url, events.get(event, ("usage", "completion_tokens"), int, default=tokens)
                )
    end = time.monotonic()
    first = first or end
    return first - start, end - first, tokens


def _count(url: str, tokens: int) -> int:
    """``tokens`` from ``url``'s usage, or CheckFailed when no server counted so many (a
    float cannot hold it, and a rate from it overflows)."""
    if not 0 <= tokens < MAX_COUNT:
        raise CheckFailed(f"{url}: usage counts {'past 2**53' if tokens > 0 else tokens} tokens")
    return tokens


def _lines(parts: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a body arriving in ``parts``, without their line ends."""
    pending = b""
    for part in parts:
        *done, pending = (pending + part).split(b"\n")
        yield from (line.rstrip(b"\r") for line in done)
    if pending:
        yield pending
