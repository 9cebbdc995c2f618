"""GET a JSON document from an HTTP API (GitHub's, the Hub's, PyPI's), errors in one line.

Every failure is a :class:`FetchError` that names the URL and the fix. Requests go
through :class:`lockpipe.http.transport.Transport`, as every client of lockpipe's do:
the token goes into the Authorization header of requests to the API's own origin and
nowhere else (never into a message, never to the host a ``Link: rel="next"`` or a
redirect points at when that is another one); a 5xx, a 429 or a dropped connection is
retried a few times with a bounded backoff (``Retry-After`` honoured up to
``RETRIES.longest``, a longer one fails at once naming when to run again), so one 502
does not fail a scheduled run. What is this module's: the API's words for each failure
(:meth:`Api.fixes`), a refused request (401/403) read as refused with ``refused``
saying what to do, and a spent rate limit (``X-RateLimit-Remaining: 0``) read as
"rate limited until" its reset.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from lockpipe.errors import FetchError
from lockpipe.http import MAX_REDIRECTS, Answer, Retries
from lockpipe.http.transport import Fixes, Header, Policy, Req, Transport, literal
from lockpipe.jsonshape import TooDeep, kind_of, loads
from lockpipe.urls import basic_auth, next_page, redact, same_origin, split_userinfo

TIMEOUT = (10.0, 60.0)
MAX_PAGES = 50  # a tree listing of 50 pages is not a model repository
# the bytes of all pages of one listing together: its parsed JSON is held whole, at ~20
# times its size, so 50 pages of up to 64 MiB each would be tens of GiB of memory
MAX_LISTING = 64 * 1024 * 1024
# one try and three retries of a 5xx, a 429 or a dropped connection, 1 s doubling; a
# Retry-After past 30 s fails the request at once, naming when to run again
RETRIES = Retries(attempts=3, base=1.0, cap=8.0, longest=30.0)


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

    @cached_property
    def _endpoint(self) -> tuple[str, tuple[str, str] | None]:
        """``base`` without the login it may carry (``http://USER:TOKEN@index/``, a private
        index), and that login: sent as Basic auth to the base's origin alone, never shown."""
        try:
            bare, login = split_userinfo(self.base.rstrip("/"))
        except ValueError:  # not a URL: its request says so
            return self.base.rstrip("/"), None
        return bare, login

    @property
    def shown(self) -> str:
        """``base`` as messages, reports and the lock may name it: without its login."""
        return self._endpoint[0]

    def url(self, path: str) -> str:
        return f"{self.shown}/{path.lstrip('/')}"

    def get(self, path: str, what: str, params: dict[str, str] | None = None) -> Any:
        """The decoded JSON at ``path``; FetchError naming ``what`` and the fix otherwise."""
        return self._get(self.url(path), what, params)[0]

    def get_all(self, path: str, what: str, params: dict[str, str] | None = None) -> list[Any]:
        """Every page of a JSON list, following ``Link: <…>; rel="next"`` as GitHub and the
        Hub paginate."""
        out: list[Any] = []
        url: str | None = self.url(path)
        read = 0
        for _ in range(MAX_PAGES):
            if url is None:
                return out
            doc, link, size = self._get(url, what, params)
            read += size
            if read > MAX_LISTING:
                raise FetchError(f"{what}: the pages at {redact(self.url(path))} hold more than "
                                 f"{MAX_LISTING >> 20} MiB of JSON in all (past {redact(url)}); "
                                 f"is {self.shown} {self.name}?")  # fmt: skip
            if not isinstance(doc, list):
                raise FetchError(f"{what}: {redact(url)} answered {kind_of(doc)}, not a list")
            out += doc
            url, params = next_page(link, url, self._broken(what)), None
        raise FetchError(f"{what}: more than {MAX_PAGES} pages at {self.url(path)}")

    def _broken(self, what: str) -> Callable[[str], FetchError]:
        """The error for an answer of ``what`` that is broken as its words say."""
        return lambda why: FetchError(f"{what}: {why}; is {self.shown} {self.name}?")

    @cached_property
    def transport(self) -> Transport:
        """The API's transport, made at its first request; its token for ``base`` alone."""
        transport = Transport(Policy(retries=RETRIES, timeout=TIMEOUT), self.fixes(),
                              watch=self._limited)  # fmt: skip
        transport.sleep = self.sleep
        login = self._endpoint[1]
        auth = f"Bearer {self.token}" if self.token else basic_auth(*login) if login else None
        transport.login(self.shown, Header(auth) if auth else None)
        return transport

    def fixes(self) -> Fixes:
        """What this API's failures say, for its transport."""
        refused = "{name} refused {url} ({status}); " + literal(self.refused)
        base = literal(self.shown)
        return Fixes(
            error_class=FetchError,
            name=self.name,
            statuses={401: refused, 403: refused,
                      404: "{url} not found (404); check the name in the lock",
                      0: "{name} answered {status} for {url} after {tries}; retry later"},
            waits={0: "{name} answered {status} for {url} and asks to wait {wait}"},
            unreachable=f"{{name}} at {base} unreachable ({{cause}}) after {{tries}}; check "
            "the network or proxy (HTTPS_PROXY) from this host",
            loop=f"more than {MAX_REDIRECTS} redirects from {{url}}; is {base} {{name}}?",
        )  # fmt: skip

    def _get(self, url: str, what: str, params: dict[str, str] | None) -> tuple[Any, str, int]:
        """The decoded JSON at ``url``, its ``Link`` header and its size in bytes."""
        if self.offline:
            raise FetchError(f"{what}: {self.offline} is set, so {self.name} at {self.shown} "
                             f"is not asked (no network at all); unset {self.offline} to "
                             "refresh these pins")  # fmt: skip
        req = Req(method="GET", url=url, params=params, headers={"Accept": "application/json"})
        resp = self.transport.request(req, what=what)
        try:
            return loads(resp.content), resp.headers.get("Link", ""), len(resp.content)
        except TooDeep:
            raise FetchError(f"{what}: {redact(url)} answered JSON nested too deeply to read; "
                             f"is {self.shown} {self.name}?") from None  # fmt: skip
        except ValueError:
            raise FetchError(f"{what}: {redact(url)} answered 200 without JSON; is {self.shown} "
                             f"{self.name}?") from None  # fmt: skip

    def _limited(self, answer: Answer, what: str) -> None:
        """A spent rate limit (GitHub's ``X-RateLimit-Remaining: 0``): until when, not retried."""
        status, headers = answer.status, answer.response.headers
        if status in (403, 429) and headers.get("X-RateLimit-Remaining") == "0":
            answer.response.close()
            fix = f"; {self.no_token}" if self.no_token and not self.token else ""
            until = _reset(headers.get("X-RateLimit-Reset"))
            raise FetchError(f"{what}: {self.name} rate limited until {until} ({redact(answer.url)}"
                             f", {status}); run again after it{fix}")  # fmt: skip
        if status in (401, 403) and not same_origin(answer.url, self.shown):
            answer.response.close()
            raise FetchError(self._refused_elsewhere(answer, what))

    def _refused_elsewhere(self, answer: Answer, what: str) -> str:
        """A 401/403 from another origin than ``base`` (a ``Link: rel="next"`` page or a
        redirect there): its token goes to ``base`` alone, so ``refused`` is not the fix."""
        there = _host(redact(answer.url))
        sent = self.token is not None or self._endpoint[1] is not None
        given = (f"the token set for {self.shown} was not sent to {there} (it goes to "
                 f"{self.shown} alone)" if sent else f"no token is sent to {there}")  # fmt: skip
        return (f"{what}: {redact(answer.url)} refused the request ({answer.status}); {there} "
                f"is another host than {self.name} at {self.shown}, which pointed there (a "
                f"next page or a redirect), and {given}: check that {self.shown} is "
                f"{self.name} and why it points at {there}")  # fmt: skip


def _host(url: str) -> str:
    """``url``'s host and port; a URL that cannot be parsed, whole."""
    try:
        return urlsplit(url).netloc or url
    except ValueError:
        return url
