"""GET a JSON document from an HTTP API (GitHub's, the Hub's, PyPI's), errors in one line.

Every failure is a :class:`FetchError` that names the URL and the fix; a token
goes into the Authorization header of requests to the API's own host and
nowhere else (never into a message, never to the host a ``Link: rel="next"``
points at when that is another one). A 5xx, a 429 or a dropped connection is
retried a few times with a bounded backoff (``Retry-After`` honoured up to
:data:`RETRY_CAP`), so one 502 does not fail a scheduled run. A refused request
(401/403) reads as refused, with ``refused`` saying what to do; a spent rate
limit (``X-RateLimit-Remaining: 0``) reads as "rate limited until" its reset.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import requests

from lockpipe.errors import FetchError

TIMEOUT = (10.0, 60.0)
MAX_PAGES = 50  # a tree listing of 50 pages is not a model repository
ATTEMPTS = 4  # one try and three retries of a 5xx, a 429 or a dropped connection
BACKOFF = 1.0  # seconds before the first retry, doubled for each next one
RETRY_CAP = 30.0  # the longest wait, whatever Retry-After asks
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


def retry_wait(header: str | None, attempt: int, now: float) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): ``Retry-After`` (seconds or an
    HTTP date) when given, else exponential backoff; never more than :data:`RETRY_CAP`."""
    wait = BACKOFF * 2 ** (attempt - 1)
    if header:
        try:
            wait = float(header)
        except ValueError:
            with contextlib.suppress(TypeError, ValueError):
                wait = parsedate_to_datetime(header).timestamp() - now
    return float(min(max(wait, 0.0), RETRY_CAP))


def _reset(value: str | None) -> str:
    """``X-RateLimit-Reset`` (epoch seconds) as an ISO UTC time, or "its reset" if absent."""
    try:
        when = datetime.fromtimestamp(int(value or ""), tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        return "its reset (no X-RateLimit-Reset header)"
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, kw_only=True)
class Api:
    """One API: its base URL, the token it takes, and what to say when it refuses."""

    base: str
    name: str  # "GitHub's API", "the Hub"
    refused: str  # the fix for 401/403: "set GITHUB_TOKEN"
    token: str | None = field(default=None, repr=False)
    no_token: str | None = None  # the fix for a spent rate limit when no token is set
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)

    def url(self, path: str) -> str:
        return f"{self.base.rstrip('/')}/{path.lstrip('/')}"

    def get(self, path: str, what: str, params: dict[str, str] | None = None) -> Any:
        """The decoded JSON at ``path``; FetchError naming ``what`` and the fix otherwise."""
        return self._get(self.url(path), what, params)[0]

    def get_all(self, path: str, what: str, params: dict[str, str] | None = None) -> list[Any]:
        """Every page of a JSON list, following ``Link: <…>; rel="next"`` as GitHub and the
        Hub paginate."""
        out: list[Any] = []
        url: str | None = self.url(path)
        for _ in range(MAX_PAGES):
            if url is None:
                return out
            doc, link = self._get(url, what, params)
            if not isinstance(doc, list):
                raise FetchError(f"{what}: {url} answered {type(doc).__name__}, not a list")
            out += doc
            nxt = _NEXT.search(link)
            url, params = (nxt[1] if nxt else None), None
        raise FetchError(f"{what}: more than {MAX_PAGES} pages at {self.url(path)}")

    def _own(self, url: str) -> bool:
        """Whether ``url`` is on the API's own scheme and host: the only place a token goes."""
        mine, theirs = urlsplit(self.base), urlsplit(url)
        return (mine.scheme, mine.netloc) == (theirs.scheme, theirs.netloc)

    def _get(self, url: str, what: str, params: dict[str, str] | None) -> tuple[Any, str]:
        headers = {"Accept": "application/json"}
        if self.token and self._own(url):
            headers["Authorization"] = f"Bearer {self.token}"
        for attempt in range(1, ATTEMPTS + 1):
            try:
                resp = requests.get(url, params=params, headers=headers, timeout=TIMEOUT)
            except requests.RequestException as exc:
                if attempt < ATTEMPTS:
                    self.sleep(retry_wait(None, attempt, time.time()))
                    continue
                raise FetchError(f"{what}: {self.name} at {self.base} unreachable "
                                 f"({type(exc).__name__}, {ATTEMPTS} tries); check the network "
                                 "or proxy (HTTPS_PROXY) from this host") from None  # fmt: skip
            limited = resp.headers.get("X-RateLimit-Remaining") == "0"
            if resp.status_code in (403, 429) and limited:
                fix = f"; {self.no_token}" if self.no_token and not self.token else ""
                raise FetchError(f"{what}: {self.name} rate limited until "
                                 f"{_reset(resp.headers.get('X-RateLimit-Reset'))} ({url}, "
                                 f"{resp.status_code}); run again after it{fix}")  # fmt: skip
            if (resp.status_code == 429 or resp.status_code >= 500) and attempt < ATTEMPTS:
                self.sleep(retry_wait(resp.headers.get("Retry-After"), attempt, time.time()))
                continue
            return self._decode(resp, url, what)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _decode(self, resp: requests.Response, url: str, what: str) -> tuple[Any, str]:
        if resp.status_code in (401, 403):
            raise FetchError(f"{what}: {self.name} refused {url} ({resp.status_code}); "
                             f"{self.refused}")  # fmt: skip
        if resp.status_code == 404:
            raise FetchError(f"{what}: {url} not found (404); check the name in the lock")
        if resp.status_code != 200:
            raise FetchError(f"{what}: {self.name} answered {resp.status_code} for {url} "
                             f"({ATTEMPTS} tries); retry later")  # fmt: skip
        try:
            return resp.json(), resp.headers.get("Link", "")
        except ValueError:
            raise FetchError(f"{what}: {url} answered 200 without JSON; is {self.base} "
                             f"{self.name}?") from None  # fmt: skip
