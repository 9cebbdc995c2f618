"""The HTTP rules every client of lockpipe shares: payload downloads, registries, JSON APIs.

One place decides, for a request to any host:

- **where credentials go.** :func:`follow` follows redirects by hand and puts the
  ``Authorization`` header only on hops to the origin it was given for (scheme, host
  and port, :func:`lockpipe.urls.same_origin`): never to a CDN or storage host a
  redirect names, nor over http after https. A method other than GET and HEAD follows
  only 307 and 308, which keep the method and body (a 302 would turn an upload into a
  GET); a body that is itself a credential (an OAuth2 refresh-token form) follows
  them only to the same origin;
- **what is worth another try**: :func:`retryable` (408, 429, any 5xx);
- **how long to wait**: :func:`retry_after` reads the header (seconds or an HTTP
  date); :class:`Retries` turns it, or an exponential backoff with jitter, into a
  pause, and says when a server asks for longer than a run should sleep.
- **how long an answer may take in all**: :func:`within` bounds the wait for a status
  and headers, :func:`arriving` the body; requests' own timeout bounds one read of the
  socket only, which a server sending a byte at a time never trips.

These are the rules; :mod:`lockpipe.http.transport` is the one client that applies
them, per host (credentials, a retry budget, Retry-After, failures into errors). What
stays with each client of it is what only that client knows: its statuses' fixes and
its error class, handed over as a :class:`~lockpipe.http.transport.Fixes`.
"""

from __future__ import annotations

import datetime
import http.client
import http.cookiejar
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from functools import partial
from typing import IO, Any, TypeVar
from urllib.parse import urljoin

import requests
import urllib3
import urllib3.exceptions

from lockpipe.urls import redact, same_origin, shown

T = TypeVar("T")

MAX_REDIRECTS = 10
# What a request can raise for reasons outside this program: requests' exceptions are
# OSErrors, its URL errors and urllib3's parse errors are ValueErrors, and a few of
# urllib3 and http.client escape requests' wrapping.
NET_ERRORS = (OSError, ValueError, urllib3.exceptions.HTTPError, http.client.HTTPException)
Data = bytes | IO[bytes] | None


def retryable(status: int) -> bool:
    """Whether an answer with ``status`` may succeed if asked again: 408, 429 or a 5xx."""
    return status in (408, 429) or status >= 500


MAX_DIGITS = 20  # past 2**64: no size, count or wait a server means; int() refuses 4300


def whole_number(text: str | None) -> int | None:
    """``text`` (a header's value) as a whole number of at most :data:`MAX_DIGITS` ASCII
    digits; None for anything else. ``str.isdigit`` alone takes Latin-1's ``²`` for a
    digit, which ``int`` then refuses, and ``int`` refuses more than 4300 digits."""
    if not text or len(text) > MAX_DIGITS or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


class Late(Exception):
    """An answer did not arrive by its deadline: its status and headers (:func:`within`)
    or its body (:func:`arriving`)."""


HEAD_READS = 4  # a status line and headers get 4 read timeouts in all, however they trickle
# The slowest a request body may be sent, in bytes/s: a hop with a body gets len(body) /
# SLOWEST_BODY seconds more than HEAD_READS read timeouts for its status and headers, so
# a chunk or a model file sent over a slow uplink is not cut off, while a body that
# stalls (each write just inside the timeout) still ends. The payload downloader's floor
# (lockpipe.payloads.settings.Tuning.slowest, curl's --speed-limit), which this layer
# cannot import.
SLOWEST_BODY = 1024


def _send_buffer_max(path: str = "/proc/sys/net/ipv4/tcp_wmem") -> int:
    """The most a TCP socket's send buffer holds here (tcp_wmem's third field, autotuned up
    to it): what may still be going out when a body's last write returns. Where it cannot
    be read, as much as the body itself."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 1 << 62


# After its last write, a body's answer waits at most for this much of it to leave the
# kernel at SLOWEST_BODY, not for all of it: a registry silent after a 64 MiB chunk held
# the run 18 hours (64 Mi / 1 KiB/s) where it now holds 68 minutes (4 MiB here).
SEND_BUFFER = _send_buffer_max()


def within(call: Callable[[], T], seconds: float, name: str) -> T:
    """``call()``'s result (or its exception) once it returns, or :class:`Late` when it
    has not after ``seconds``. It runs in a daemon thread, left to finish on its own when
    late: requests' timeout is per read of the socket, so an answer's status and headers
    sent a byte at a time hold a request open past any timeout."""
    done: dict[str, Any] = {}
    ready = threading.Event()

    def run() -> None:
        try:
            done["value"] = call()
        except BaseException as exc:  # raised in the caller, as if it were raised there
            done["error"] = exc
        finally:
            ready.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    if not ready.wait(max(seconds, 0.0)):
        raise Late
    if "error" in done:
        raise done["error"]
    value: T = done["value"]
    return value


def arriving(resp: requests.Response, end: float, per_read: float) -> Iterator[bytes]:
    """``resp``'s body (decoded, as requests decodes it) as it arrives, each wait for bytes
    bounded by ``per_read`` seconds and by what is left to ``end`` (a monotonic time);
    :class:`Late` once ``end`` passes. A connection that breaks raises what urllib3 raises.

    ``read1`` returns what one read of the socket gives, so a body trickling in a byte at
    a time cannot hold the answer open past ``end``, as reads of a fixed size, each with
    its own timeout, can (a 4 MiB manifest a byte per 29 s: 4 years).
    """
    raw = resp.raw
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise Late
        sock = getattr(getattr(raw, "connection", None), "sock", None)
        if sock is not None:
            sock.settimeout(min(left, per_read))
        try:
            if isinstance(raw, urllib3.BaseHTTPResponse):
                chunk = raw.read1(1 << 16, decode_content=True)
            else:  # a file-like body (a test's)
                chunk = raw.read(1 << 16)
        except (TimeoutError, urllib3.exceptions.TimeoutError):
            if left <= per_read:  # the wait was the deadline's
                raise Late from None
            raise
        if not chunk:
            return
        yield chunk


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait (delay-seconds or an HTTP date), at
    least 0; None when absent or unreadable (the caller's own backoff applies).

    Not capped here: :meth:`Retries.too_long` decides whether a long wait is worth it.
    """
    value = (value or "").strip()
    if (seconds := whole_number(value)) is not None:
        return float(seconds)
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def backoff(attempt: int, *, base: float, cap: float, jitter: float | None = None) -> float:
    """The pause before retry ``attempt`` (0-based): ``base`` doubled per attempt up to
    ``cap``, scaled by ``jitter`` in [0, 1] to 50-100 % of that (None: at random), so
    connections that failed together do not come back together."""
    share = random.random() if jitter is None else jitter
    return float(min(cap, base * 2.0 ** min(attempt, 30)) * (0.5 + share / 2))


def until(now: float, wait: float) -> str:
    """``3600 s; try again after 2026-12-02 03:00:00 UTC``: a wait too long to sleep; past
    any date this machine can write (a server's Retry-After of 20 digits), the seconds alone."""
    try:
        when = datetime.datetime.fromtimestamp(now + wait, datetime.timezone.utc)
    except (OverflowError, ValueError, OSError):
        return f"{wait:.0f} s"
    return f"{wait:.0f} s; try again after {when:%Y-%m-%d %H:%M:%S} UTC"


@dataclass(frozen=True, kw_only=True)
class Retries:
    """How one client retries one request: how often, how long between tries, and the
    longest ``Retry-After`` worth waiting (a proxy asking for an hour fails the request
    at once, naming when to come back, rather than stalling a build)."""

    attempts: int  # retries after the first try
    base: float = 0.5
    cap: float = 8.0
    longest: float = 60.0

    def too_long(self, asked: float | None) -> bool:
        return asked is not None and asked > self.longest

    def pause(self, attempt: int, asked: float | None = None) -> float:
        """Seconds before retry ``attempt`` (0-based): what the server asked, else backoff."""
        if asked is not None:
            return asked
        return backoff(attempt, base=self.base, cap=self.cap)


class NoAnswer(Exception):
    """A hop of a request got no HTTP answer; ``url`` is that hop (a redirect's target,
    perhaps), ``cause`` what requests, urllib3 or http.client raised, ``detail`` what to
    say of it past its name. ``sending``: the hop was left late with a body that its
    thread may still be sending (or reading from a file): it must not be sent again."""

    def __init__(
        self, url: str, cause: Exception, *, detail: str = "", sending: bool = False
    ) -> None:
        super().__init__(f"{url}: {type(cause).__name__}")
        self.url, self.cause, self.detail, self.sending = url, cause, detail, sending

    @property
    def reason(self) -> str:
        """The cause's name, then the detail: ``InvalidURL: its Location '…' is not a URL``."""
        name = type(self.cause).__name__
        return f"{name}: {self.detail}" if self.detail else name


def body_size(data: Data) -> int:
    """The bytes ``data`` will send (what requests puts in Content-Length); 0 when none or
    unknown (a stream without a length)."""
    if data is None:
        return 0
    if isinstance(data, bytes):
        return len(data)
    try:
        if data.seekable():
            here = data.tell()
            end = data.seek(0, os.SEEK_END)
            data.seek(here)
            return max(0, end - here)
    except (OSError, ValueError):
        pass
    return 0


@dataclass(frozen=True, kw_only=True)
class Answer:
    """The last response of a request and its redirects."""

    response: requests.Response
    url: str  # the URL that gave it
    authorized: bool  # that hop carried the credentials
    looped: bool  # still a redirect after MAX_REDIRECTS hops

    @property
    def status(self) -> int:
        return int(self.response.status_code)

    def asked(self, now: float | None = None) -> float | None:
        """The seconds this answer's ``Retry-After`` asks to wait; None when it names none."""
        return retry_after(self.response.headers.get("Retry-After"), now)


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A cookie jar that keeps nothing: a cookie is a credential, and requests' jar sends
    one to every port of its host, to sibling hosts (Domain=) and over http (no Secure),
    where lockpipe's own credentials go to their origin alone."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


class Session(requests.Session):
    """requests' Session with redirects left to :func:`follow` and no cookies kept
    (:class:`_NoCookies`). requests reads a redirect's whole body to find the next
    request, even with ``allow_redirects=False`` (it builds ``Response.next``), unbounded
    and past any deadline of ours: an endless body grew until memory ran out. Here no
    redirect target is found, so requests reads nothing; :func:`follow` reads the Location
    itself and drains the body within its bounds."""

    def __init__(self) -> None:
        super().__init__()
        self.cookies.set_policy(_NoCookies())

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


def no_netrc(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """requests' ``auth`` that adds nothing: without one, requests takes ``~/.netrc``'s
    entry for the host (by name alone: any scheme, any port) and puts it in place of
    the ``Authorization`` lockpipe chose, on every hop, over http and to another port too.
    lockpipe's own credentials are the only ones sent."""
    return request


def follow(
    session: requests.Session,
    method: str,
    url: str,
    *,
    origin: str,
    auth: str | None,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    data: Data = None,
    timeout: float | tuple[float, float],
    stream: bool = False,
    secret_body: bool = False,
) -> Answer:
    """Send one request, following redirects; ``auth`` goes only on hops to ``origin``.

    ``params`` are sent on the first hop only (a ``Location`` is a whole URL). A
    stream body that cannot be rewound is never sent twice, nor a ``secret_body`` (a
    credential) to another origin than ``origin``: that redirect is returned.
    A hop without an answer raises :class:`NoAnswer`, for the caller to name.
    """
    rewindable = data is None or isinstance(data, bytes) or data.seekable()
    connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
    resp: requests.Response | None = None
    for _ in range(MAX_REDIRECTS + 1):
        if data is not None and not isinstance(data, bytes) and rewindable:
            data.seek(0)
        # A body goes out with the connect timeout on each write (urllib3), and the first
        # read of the answer waits for the server to read what the kernel's send buffer
        # still holds of it (megabytes, over a slow uplink): that read gets the buffer's
        # time at the slowest rate on top of its own, and the deadline, which covers
        # sending the body too (within() cannot tell when it is sent), the body's.
        size = body_size(data)
        head_time = HEAD_READS * read_timeout + size / SLOWEST_BODY
        buffered = min(size, SEND_BUFFER) / SLOWEST_BODY
        hop_timeout = (connect_timeout, read_timeout + buffered) if size else timeout
        mine = bool(auth) and same_origin(url, origin)
        hop = {**(headers or {}), **({"Authorization": auth} if mine and auth else {})}
        try:
            hop_request = partial(session.request, method, url, headers=hop, params=params,
                                  data=data, timeout=hop_timeout, stream=stream,
                                  allow_redirects=False, auth=no_netrc)  # fmt: skip
            resp = within(hop_request, head_time, f"{method} {url}")
        except Late:
            late = requests.exceptions.ReadTimeout(
                f"its status and headers did not arrive in {head_time:.0f} s"
            )
            if data is None:
                raise NoAnswer(url, late) from None
            # Its thread may still send the body: sent again, two uploads would overlap.
            detail = (f"its body ({size:,} bytes) was not sent and answered in "
                      f"{head_time:.0f} s, {HEAD_READS} read timeouts and the body at "
                      f"{SLOWEST_BODY:,} bytes/s; not sent again while it may still be "
                      "going out")  # fmt: skip
            raise NoAnswer(url, late, detail=detail, sending=True) from None
        except NET_ERRORS as exc:
            raise NoAnswer(url, exc) from exc
        follows = method in ("GET", "HEAD") or resp.status_code in (307, 308)
        if not (resp.is_redirect and follows and rewindable and "location" in resp.headers):
            return Answer(response=resp, url=url, authorized=mine, looped=False)
        try:
            there = as_sent(urljoin(url, resp.headers["location"]))
        except ValueError as exc:  # an IPv6 host without its "]": requests' InvalidURL
            drain(resp, read_timeout)
            bad = requests.exceptions.InvalidURL(str(exc))
            detail = f"its Location {shown(resp.headers['location'], 200)} is not a URL ({exc})"
            raise NoAnswer(url, bad, detail=detail) from None
        if secret_body and data is not None and not same_origin(there, origin):
            return Answer(response=resp, url=url, authorized=mine, looped=False)
        url, params = there, None
        drain(resp, read_timeout)
    assert resp is not None
    return Answer(response=resp, url=url, authorized=False, looped=True)


def as_sent(url: str) -> str:
    """``url`` as requests sends it (urllib3 parses it, requests quotes it again): a
    redirect's target is followed, compared with its origin and shown in this form.
    ValueError (requests' InvalidURL, MissingSchema) if it cannot be sent.

    A URL that names two hosts (``http://a:1\\@b:2/x``: urllib.parse reads b:2, urllib3
    and requests connect to a:1) goes to a:1 as ``http://a:1/%5C%40b:2/x``: its ``@``
    quoted, it reads as the host it goes to, to a person and to :func:`redact` alike."""
    prepared = requests.PreparedRequest()
    try:
        prepared.prepare_url(url, None)
    except requests.RequestException as exc:  # its words quote the URL, a password too
        raise ValueError(redact(str(exc))) from None
    sent = prepared.url or url
    if same_origin(sent, url):
        return sent
    head, _, path = sent.partition("://")[2].partition("/")
    return f"{sent.partition('://')[0]}://{head}/{path.replace('@', '%40')}"


DRAIN = 1 << 20  # the most bytes of an answer not wanted (a redirect's, an error's) read


def drain(resp: requests.Response, read_timeout: float) -> None:
    """Close an answer whose body is not wanted. A body up to :data:`DRAIN` that arrives
    within :data:`HEAD_READS` read timeouts in all is read first, so its connection goes
    back to the pool for the next request; a longer or slower one (an error's body sent
    a byte at a time), or one that breaks off, closes the connection instead. A
    redirect's body too: :class:`Session` keeps requests from reading it first."""
    try:
        got = 0
        end = time.monotonic() + HEAD_READS * read_timeout
        for chunk in arriving(resp, end, read_timeout):
            got += len(chunk)
            if got > DRAIN:
                break
    except (Late, *NET_ERRORS, requests.RequestException):
        pass
    finally:
        resp.close()
