"""GET a JSON document from an HTTP API (GitHub's, the Hub's, PyPI's), errors in one line.

Every failure is a :class:`FetchError` that names the URL and the fix; a token
goes into the Authorization header of requests to the API's own host and
nowhere else (never into a message, never to the host a ``Link: rel="next"``
points at when that is another one). A 5xx, a 429 or a dropped connection is
retried a few times with a bounded backoff (``Retry-After`` honoured up to
``RETRIES.longest``, a longer one fails at once naming when to run again), so one
502 does not fail a scheduled run. Redirects, retries and the token's origin
follow :mod:`lockpipe.http`, as every client of lockpipe does. A refused request
(401/403) reads as refused, with ``refused`` saying what to do; a spent rate
limit (``X-RateLimit-Remaining: 0``) reads as "rate limited until" its reset.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import requests

from lockpipe.errors import FetchError
from lockpipe.http import MAX_REDIRECTS, NoAnswer, Retries, follow, retry_after, retryable, until

TIMEOUT = (10.0, 60.0)
MAX_PAGES = 50  # a tree listing of 50 pages is not a model repository
# one try and three retries of a 5xx, a 429 or a dropped connection, 1 s doubling; a
# Retry-After past 30 s fails the request at once, naming when to run again
RETRIES = Retries(attempts=3, base=1.0, cap=8.0, longest=30.0)
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


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
    offline: str | None = None  # the variable that forbids any request (HF_HUB_OFFLINE)
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

    def _get(self, url: str, what: str, params: dict[str, str] | None) -> tuple[Any, str]:
        if self.offline:
            raise FetchError(f"{what}: {self.offline} is set, so {self.name} at {self.base} "
                             f"is not asked (no network at all); unset {self.offline} to "
                             "refresh these pins")  # fmt: skip
        # The token goes only to the API's own origin, on the first hop and on redirects.
        auth = f"Bearer {self.token}" if self.token else None
        headers = {"Accept": "application/json"}
        with requests.Session() as session:
            for attempt in range(RETRIES.attempts + 1):
                try:
                    answer = follow(
                        session, "GET", url, origin=self.base, auth=auth, headers=headers,
                        params=params, timeout=TIMEOUT,
                    )  # fmt: skip
                except NoAnswer as no:
                    if attempt < RETRIES.attempts:
                        self.sleep(RETRIES.pause(attempt))
                        continue
                    raise FetchError(
                        f"{what}: {self.name} at {self.base} unreachable "
                        f"({type(no.cause).__name__}, {attempt + 1} tries); check the "
                        "network or proxy (HTTPS_PROXY) from this host"
                    ) from None
                resp = answer.response
                if answer.looped:
                    raise FetchError(f"{what}: more than {MAX_REDIRECTS} redirects from {url}; "
                                     f"is {self.base} {self.name}?")  # fmt: skip
                self._limited(resp, url, what)
                if retryable(resp.status_code) and attempt < RETRIES.attempts:
                    now = time.time()
                    asked = retry_after(resp.headers.get("Retry-After"), now)
                    if RETRIES.too_long(asked):
                        raise FetchError(
                            f"{what}: {self.name} answered {resp.status_code} for {url} "
                            f"and asks to wait {until(now, asked or 0.0)}"
                        )
                    self.sleep(RETRIES.pause(attempt, asked))
                    continue
                return self._decode(resp, url, what, attempt + 1)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _limited(self, resp: requests.Response, url: str, what: str) -> None:
        """A spent rate limit (GitHub's ``X-RateLimit-Remaining: 0``): until when, not retried."""
        if resp.status_code in (403, 429) and resp.headers.get("X-RateLimit-Remaining") == "0":
            fix = f"; {self.no_token}" if self.no_token and not self.token else ""
            raise FetchError(f"{what}: {self.name} rate limited until "
                             f"{_reset(resp.headers.get('X-RateLimit-Reset'))} ({url}, "
                             f"{resp.status_code}); run again after it{fix}")  # fmt: skip

    def _decode(self, resp: requests.Response, url: str, what: str, tries: int) -> tuple[Any, str]:
        if resp.status_code in (401, 403):
            raise FetchError(f"{what}: {self.name} refused {url} ({resp.status_code}); "
                             f"{self.refused}")  # fmt: skip
        if resp.status_code == 404:
            raise FetchError(f"{what}: {url} not found (404); check the name in the lock")
        if resp.status_code != 200:
            raise FetchError(f"{what}: {self.name} answered {resp.status_code} for {url} "
                             f"({tries} tries); retry later")  # fmt: skip
        try:
            return resp.json(), resp.headers.get("Link", "")
        except ValueError:
            raise FetchError(f"{what}: {url} answered 200 without JSON; is {self.base} "
                             f"{self.name}?") from None  # fmt: skip
