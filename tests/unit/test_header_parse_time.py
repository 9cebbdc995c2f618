"""Headers a server chooses, read in linear time.

Python's HTTP client lets 100 header lines of up to 64 KiB each through, and requests joins
repeated ones with ", ": one answer can hand a parser megabytes. A pattern that scans to the
end of the text from every character is quadratic there: a Link header of 65,000 '<' took
250 s of CPU for one page of tags, a 'Bearer aaaa…' challenge of 65,000 letters 35 s. The
bound below is a guard against such a hang (each takes milliseconds now), not a timing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from lockpipe.errors import FetchError
from lockpipe.registry.headers import parse_challenge
from lockpipe.urls import next_page, redact

N = 100_000  # the old patterns: 35 to 80 s each at this length


def _fail(words: str) -> FetchError:
    return FetchError(words)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("Link of '<'", lambda: next_page("<" * N, "http://h/p", _fail)),
        ("Link of '<a'", lambda: next_page("<a" * (N // 2), "http://h/p", _fail)),
        ("challenge of letters", lambda: parse_challenge("Bearer " + "a" * N)),
        ("challenge of words", lambda: parse_challenge("Bearer " + "ab-c " * (N // 5))),
        ("text of a.a.a", lambda: redact("a." * (N // 2))),
        ("URL of a.a.a", lambda: redact("http://" + "a." * (N // 2))),
    ],
)
def test_a_header_a_server_chooses_is_read_in_linear_time(
    name: str, call: Callable[[], object]
) -> None:
    start = time.monotonic()
    call()
    assert time.monotonic() - start < 5, name


def test_the_linear_patterns_read_what_they_read_before() -> None:
    link = '<http://h/v2/x/tags/list?last=a>; rel="next", <http://h/first>; rel="first"'
    assert next_page(link, "http://h/p", _fail) == "http://h/v2/x/tags/list?last=a"
    assert next_page('<a<http://h/n>; rel="next"', "http://h/p", _fail) == "http://h/n"
    got = parse_challenge('Bearer realm="https://auth/t",service="reg",scope="r:x:pull"')
    assert got is not None and got.params == {
        "realm": "https://auth/t", "service": "reg", "scope": "r:x:pull",
    }  # fmt: skip
    assert redact("see https://u:pw@h/x and git+ssh://u:pw@g/y") == (
        "see https://***@h/x and git+ssh://***@g/y"
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("x -https://user:pw@host/x", "x -https://***@host/x"),
        ("build 12https://user:pw@host/x", "build 12https://***@host/x"),
        ("see:.https://user:pw@host/x", "see:.https://***@host/x"),
        ('{"url":"https://hub.example:443/api/x","author":"me@corp.com"}',
         '{"url":"https://hub.example:443/api/x","author":"me@corp.com"}'),
    ],
)  # fmt: skip
def test_a_url_after_any_character_is_redacted_and_json_around_it_is_kept(
    text: str, shown: str
) -> None:
    """A scheme's start is not asked to be a word's: the linear pattern of 8724180 left
    '-https://user:pw@…' whole; the loose reading stops at a quote or a comma."""
    assert redact(text) == shown


def test_parameters_before_any_scheme_are_read_in_linear_time() -> None:
    """e28637b scanned to the next space at every step of 'a="a="…' (a parameter before any
    scheme): 120 KB took 3.6 s, 100 such headers of a 401 about 100 s (issue 18)."""
    start = time.monotonic()
    assert parse_challenge('a="' * N) is None  # 300 KB
    assert time.monotonic() - start < 5  # the old pattern: minutes at this length
