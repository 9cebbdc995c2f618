"""lockpipe.http.transport without a network: a session that answers from a table.

The same transport against real loopback servers: tests/integration/test_registry_*.py,
test_refresh_api.py and test_http_follow.py.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
import requests

from lockpipe.errors import FetchError
from lockpipe.http import Retries
from lockpipe.http.transport import Fixes, Header, Policy, Req, Transport, literal

FIXES = Fixes(
    error_class=FetchError,
    name="the {API}",
    statuses={404: "{url} not found", 500: "{host} failing after {tries}", 0: "{status} {there}"},
    waits={0: "{name} asks to wait {wait}"},
    unreachable="{host} unreachable ({cause}) after {tries}",
    loop="more than {redirects} redirects from {url}",
)


class Answers(requests.Session):
    """Answers each request with the next (status, headers) for its URL; records them.
    ``None`` in place of an answer: the connection is refused."""

    def __init__(self, answers: dict[str, list[tuple[int, dict[str, str]] | None]]) -> None:
        super().__init__()
        self.answers = {url: iter(seq) for url, seq in answers.items()}
        self.sent: list[tuple[str, str | None]] = []

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kw: Any) -> Any:
        self.sent.append((str(url), (kw.get("headers") or {}).get("Authorization")))
        answer = next(self.answers[str(url)])
        if answer is None:
            raise requests.exceptions.ConnectionError("[Errno 111] Connection refused")
        resp = requests.Response()
        resp.status_code, resp.url = answer[0], str(url)
        resp.headers.update(answer[1])
        resp.raw, resp._content = io.BytesIO(), b""
        return resp


def _transport(
    answers: dict[str, list[tuple[int, dict[str, str]] | None]], *, host_failures: int = 10
) -> tuple[Transport, Answers, list[float]]:
    policy = Policy(retries=Retries(attempts=2, base=0.5, cap=1.0, longest=30.0), timeout=5.0,
                    host_failures=host_failures)  # fmt: skip
    transport = Transport(policy, FIXES)
    transport.session = session = Answers(answers)
    waits: list[float] = []
    transport.sleep = waits.append
    return transport, session, waits


def test_a_retryable_answer_is_tried_again_after_what_retry_after_asks() -> None:
    url = "https://api.example/x"
    transport, session, waits = _transport({url: [(503, {"Retry-After": "3"}), (200, {})]})
    assert transport.request(Req(method="GET", url=url), what="x").status_code == 200
    assert waits == [3.0] and len(session.sent) == 2


def test_failures_are_worded_from_the_clients_fixes() -> None:
    url = "https://api.example/x"
    transport, _, waits = _transport({url: [(502, {})] * 3})
    with pytest.raises(FetchError, match=r"^x: api.example failing after 3 tries$"):
        transport.request(Req(method="GET", url=url), what="x")
    assert len(waits) == 2 and all(0.25 <= w <= 1.0 for w in waits)
    transport, _, _ = _transport({url: [(404, {})]})
    with pytest.raises(FetchError, match=r"^x: https://api.example/x not found$"):
        transport.request(Req(method="GET", url=url), what="x")
    transport, _, _ = _transport({url: [(418, {})]})
    with pytest.raises(FetchError, match=r"^x: 418 https://api.example$"):
        transport.request(Req(method="GET", url=url), what="x")
    assert literal("the {API}") == "the {{API}}"


def test_a_retry_after_past_the_longest_fails_at_once_naming_when() -> None:
    url = "https://api.example/x"
    transport, session, waits = _transport({url: [(429, {"Retry-After": "3600"})]})
    with pytest.raises(FetchError, match=r"asks to wait 3600 s; try again after 20"):
        transport.request(Req(method="GET", url=url), what="x")
    assert waits == [] and len(session.sent) == 1


def test_no_answer_is_retried_then_named_with_its_host() -> None:
    url = "http://127.0.0.1:9/x"
    transport, session, _ = _transport({url: [None, None, None]})
    with pytest.raises(FetchError, match=r"127.0.0.1:9 unreachable \(ConnectionError\) after 3"):
        transport.request(Req(method="GET", url=url), what="x")
    assert len(session.sent) == 3


def test_a_host_that_keeps_failing_gets_one_try_per_request_until_it_answers() -> None:
    url = "http://dead.example/x"
    transport, session, _ = _transport({url: [None] * 5}, host_failures=4)
    for tries in ("3 tries", "1 try", "1 try"):  # 4 failures in a row spend the host's budget
        with pytest.raises(FetchError, match=f"after {tries}$"):
            transport.request(Req(method="GET", url=url), what="x")
    session.answers[url] = iter([(200, {}), None, None, None])
    answered = transport.request(Req(method="GET", url=url), what="x")
    assert answered.status_code == 200  # its one try answers
    with pytest.raises(FetchError, match=r"after 3 tries$"):  # and the budget is back
        transport.request(Req(method="GET", url=url), what="x")


def test_a_body_that_cannot_be_rewound_is_sent_once() -> None:
    url = "https://api.example/up"

    stream: Any = io.BufferedReader(io.BytesIO(b"x"))
    stream.seekable = lambda: False
    transport, session, waits = _transport({url: [(503, {}), (201, {})]})
    with pytest.raises(FetchError, match="failing after 1 try"):
        transport.request(Req(method="PUT", url=url, data=stream), what="x", ok=(201,))
    assert len(session.sent) == 1 and waits == []


def test_credentials_go_to_their_own_origin_alone() -> None:
    here, there = "https://a.example/x", "https://b.example/x"
    plain = "http://a.example/y"
    transport, session, _ = _transport({
        here: [(302, {"Location": there})], there: [(200, {})], plain: [(200, {})]
    })  # fmt: skip
    transport.login("https://a.example/", Header("Bearer t0k"))
    transport.request(Req(method="GET", url=here), what="x")
    transport.request(Req(method="GET", url=plain), what="x")  # over http: another origin
    assert session.sent == [(here, "Bearer t0k"), (there, None), (plain, None)]
    assert "t0k" not in repr(Header("Bearer t0k"))
