"""The one HTTP client of lockpipe: a session, and per host its credentials, its retry
budget, and how its failures read.

Modelled on regclient's ``internal/reghttp``, whose client keeps a state per host and
sends every request through one loop:

- **credentials** are a host's own (:meth:`Transport.login`), asked for at each
  request (a token may be renewed), and go on hops to that origin alone
  (:func:`lockpipe.http.follow`): never to a host a redirect or an upload ``Location``
  names, never over http after https;
- **retries**: a 408, 429, 5xx or a hop without an answer is tried again as the
  client's :class:`~lockpipe.http.Retries` says, after what ``Retry-After`` asks (a wait
  past ``Retries.longest`` fails at once, naming when to come back) or a backoff; a
  body that cannot be rewound is sent once, as is one whose try was left late (its
  thread may still be sending it), and a hop requests will not send (a URL it
  cannot parse, a redirect's included; a header it will not write) fails at once. A
  host that failed ``Policy.host_failures`` tries in a row gets one try per request
  until it answers again (regclient's backoff limit), so forty references on a dead
  registry cost forty tries, not two hundred;
- **failures** become the client's error, worded from its :class:`Fixes`: the templates
  of what only it knows ("check the repository and tag", "set GITHUB_TOKEN"), filled
  with the host, the URL without credentials, the status and the tries. No exception
  of ``requests`` leaves :meth:`Transport.request`.

The payload downloader retries per file and byte range rather than per request
(:mod:`lockpipe.payloads.retry`): it sends single tries (:meth:`Transport.send`) and
reads each answer's verdict (:func:`lockpipe.http.retryable`, :meth:`Answer.asked`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol
from urllib.parse import urlsplit

import requests
import urllib3.exceptions

from lockpipe.errors import LockpipeError
from lockpipe.http import (
    MAX_REDIRECTS,
    NET_ERRORS,
    Answer,
    Data,
    Late,
    NoAnswer,
    Retries,
    Session,
    arriving,
    drain,
    follow,
    retryable,
    until,
)
from lockpipe.urls import origin, redact, shown

# What requests raises for a hop it will not send: a URL it cannot parse (the one asked, or
# a redirect's Location), a header it will not write (a token with a newline): InvalidURL,
# InvalidHeader, LocationParseError, UnicodeEncodeError. The same at every try: no retry.
UNSENDABLE = (ValueError, requests.exceptions.URLRequired)
CANNOT_SEND = (
    "{url}: the request cannot be sent ({cause}) after {tries}: a URL, a redirect's Location "
    "or a header that is not valid, the same at every try; check the address of {host} and "
    "the credentials given for it"
)


class Credentials(Protocol):
    """What requests to one host authenticate with."""

    def header(self, scope: str) -> str | None:
        """The ``Authorization`` value for a request in ``scope`` now (a registry's
        ``repository:NAME:pull``, else ""); None: send none."""


class Challenge(Protocol):
    """A host's answer to its own 401: renew its credentials and return True to send the
    request again, return False to report the 401 as any status, or raise the client's
    error (credentials refused). ``again``: this request was already renewed once."""

    def __call__(self, answer: Answer, *, scope: str, what: str, again: bool) -> bool: ...


@dataclass(frozen=True)
class Header:
    """Credentials that do not change: one ``Authorization`` value (an API's token)."""

    value: str = field(repr=False)

    def header(self, scope: str) -> str | None:
        return self.value


@dataclass(frozen=True, kw_only=True)
class Policy:
    """How a client's transport retries, and how long it waits for an answer."""

    retries: Retries
    timeout: float | tuple[float, float]  # seconds, or (to connect, to read)
    host_failures: int = 10  # failed tries in a row after which a host's requests get one try
    # The most bytes read of an answer that is not streamed (JSON, a manifest, a config):
    # a server that answers without end must not take the machine's memory. No API,
    # manifest or config lockpipe reads comes near it; a Req's ``limit`` may be lower.
    max_body: int = 64 << 20
    # Seconds the whole of such an answer may take (None: 4 read timeouts): the read
    # timeout bounds each wait for bytes, and a body trickling in a byte at a time
    # never trips it.
    answer_time: float | None = None

    @property
    def timeouts(self) -> tuple[float, float]:
        """(to connect, to read)."""
        t = self.timeout
        return t if isinstance(t, tuple) else (t, t)

    @property
    def answer_seconds(self) -> float:
        """How long reading an unstreamed answer's body may take in all."""
        return self.answer_time if self.answer_time is not None else 4 * self.timeouts[1]


@dataclass(frozen=True, kw_only=True)
class Fixes:
    """What one client knows about its failures: its error class, its name, and a message
    template for each outcome. The transport fills in ``{name}``, ``{host}`` (the host
    asked), ``{url}`` (the URL asked, without credentials), ``{there}`` (the origin that
    answered: a redirect's or an upload Location's), ``{status}``, ``{tries}`` ("3
    tries"), ``{cause}`` (what a hop without an answer raised) and ``{wait}`` (a
    Retry-After too long to sleep, with when to come back), and puts the request's
    ``what`` first. Text of the client's own goes in through :func:`literal`."""

    error_class: type[LockpipeError]
    name: str
    statuses: Mapping[int, str]  # by status; 500 stands for any 5xx, 0 for any other
    waits: Mapping[int, str]  # a Retry-After past Retries.longest, keyed as statuses
    unreachable: str
    loop: str

    def pick(self, table: Mapping[int, str], status: int) -> str:
        """The template for ``status`` in ``table``."""
        return table.get(status) or (table.get(500) if status >= 500 else None) or table[0]

    def error(self, what: str, template: str, fields: Mapping[str, object]) -> LockpipeError:
        """The client's error: ``what``, then ``template`` filled in."""
        return self.error_class(f"{what}: {template.format(name=self.name, **fields)}")


def literal(text: str) -> str:
    """``text`` as part of a :class:`Fixes` template: its braces are not fields."""
    return text.replace("{", "{{").replace("}", "}}")


def _origin(url: str) -> tuple[str, str, int | None]:
    """Whose ``url`` is (:func:`lockpipe.urls.origin`); a URL that cannot be parsed is an
    origin of its own, which :func:`lockpipe.urls.same_origin` matches to none."""
    try:
        return origin(url)
    except ValueError:
        return ("", url, None)


@dataclass(frozen=True, kw_only=True)
class Req:
    """One request to send (as regclient's ``reghttp.Req``); ``scope`` picks the host's
    credentials (a registry's ``repository:NAME:pull``)."""

    method: str
    url: str
    scope: str = ""
    headers: Mapping[str, str] | None = None
    params: Mapping[str, str] | None = None  # on the first hop only
    data: Data = None
    stream: bool = False
    secret_body: bool = False  # the body is a credential: it goes to req.url's origin alone
    limit: int | None = None  # the most bytes read of the answer (not streamed); None: Policy's

    @property
    def rewindable(self) -> bool:
        """Whether the body can be sent again (a spent stream cannot)."""
        data = self.data
        return data is None or isinstance(data, bytes) or data.seekable()


@dataclass(frozen=True)
class _Again:
    """A try worth another after ``asked`` seconds (None: the backoff's); ``error`` once
    the retries are spent."""

    asked: float | None
    error: LockpipeError
    again: bool = True  # False: no retry, whatever the budget (a body perhaps still sent)


@dataclass(kw_only=True)
class Host:
    """What a transport keeps for one origin."""

    origin: str  # the first URL asked there: what follow() compares each hop with
    credentials: Credentials | None = None
    challenge: Challenge | None = None
    failures: int = 0  # failed tries in a row (no answer, or a retryable status)


class Transport:
    """Requests of one client, thread-safe; one :class:`Host` per origin it has asked.

    ``fixes`` None: this transport only sends single tries (:meth:`send`), and its client
    words their outcomes itself (the payload downloader)."""

    def __init__(
        self,
        policy: Policy,
        fixes: Fixes | None = None,
        *,
        watch: Callable[[Answer, str], None] | None = None,
    ) -> None:
        self.policy, self.fixes = policy, fixes
        self.watch = watch  # sees every answer (rate-limit headers); may raise the client's error
        self.session: requests.Session = Session()  # redirects: follow() reads them, not requests
        # tests may replace it to record the waits asked for; production waits for real
        self.sleep: Callable[[float], None] = time.sleep
        self._hosts: dict[tuple[str, str, int | None], Host] = {}
        self._lock = threading.Lock()

    def host(self, url: str) -> Host:
        """The state of ``url``'s origin (created on first use)."""
        with self._lock:
            return self._hosts.setdefault(_origin(url), Host(origin=url))

    def login(
        self, url: str, credentials: Credentials | None, challenge: Challenge | None = None
    ) -> None:
        """From now on, requests to ``url``'s origin carry ``credentials`` (to it alone), and
        its 401s go to ``challenge``."""
        host = self.host(url)
        with self._lock:
            host.credentials, host.challenge = credentials, challenge

    def send(self, req: Req) -> Answer:
        """One try: redirects followed, the credentials of ``req.url``'s origin on hops to
        it alone; :class:`~lockpipe.http.NoAnswer` when a hop got no answer."""
        host = self.host(req.url)
        auth = host.credentials.header(req.scope) if host.credentials else None
        return follow(self.session, req.method, req.url, origin=host.origin, auth=auth,
                      headers=req.headers, params=req.params, data=req.data,
                      timeout=self.policy.timeout, stream=req.stream,
                      secret_body=req.secret_body)  # fmt: skip

    def request(self, req: Req, *, what: str, ok: Collection[int] = (200,)) -> requests.Response:
        """The response to ``req`` once its status is in ``ok``, retried, renewed and
        redirected as above; otherwise the client's error, beginning with ``what``."""
        host, attempt, renewed = self.host(req.url), 0, False
        while True:
            step = self._step(req, host, what, ok, attempt, renewed)
            if isinstance(step, requests.Response):
                return step
            if step is None:  # credentials renewed: send again at once
                renewed = True
            elif self._retry(host, attempt, req.rewindable and step.again, step.asked):
                attempt += 1
            else:
                raise step.error

    def _step(
        self, req: Req, host: Host, what: str, ok: Collection[int], attempt: int, renewed: bool
    ) -> requests.Response | _Again | None:
        """One try of :meth:`request`: its response, worth another try (:class:`_Again`),
        or None when the host's credentials were renewed; an error no retry mends is raised."""
        fixes = self.fixes
        if fixes is None:
            raise TypeError("Transport.request needs the client's Fixes; this one only sends")
        try:  # streamed either way: an answer that is not is read below, to its limit
            answer = self.send(req if req.stream else replace(req, stream=True))
        except NoAnswer as no:
            fields = _fields(no.url, None, attempt, cause=no.reason)
            if isinstance(no.cause, UNSENDABLE):
                raise fixes.error(what, CANNOT_SEND, fields) from None
            # A try left late while its body may still be sent is not sent again.
            again = not no.sending
            return _Again(None, fixes.error(what, fixes.unreachable, fields), again=again)
        if answer.looped:
            drain(answer.response, self.policy.timeouts[1])
            raise fixes.error(what, fixes.loop, _fields(req.url, answer, attempt))
        if self.watch:
            self.watch(answer, what)
        status = answer.status
        if status in ok:
            if not req.stream:
                try:
                    self._read(answer.response, req, what, fixes)
                except requests.RequestException as exc:  # the body broke off: no answer
                    cause = type(exc.__cause__ or exc).__name__
                    fields = _fields(req.url, None, attempt, cause=cause)
                    return _Again(None, fixes.error(what, fixes.unreachable, fields))
            self._answered(host)
            return answer.response
        drain(answer.response, self.policy.timeouts[1])
        challenge = host.challenge if status == 401 else None
        if challenge and challenge(answer, scope=req.scope, what=what, again=renewed):
            return None
        error = fixes.error(what, fixes.pick(fixes.statuses, status),
                            _fields(req.url, answer, attempt))  # fmt: skip
        if not retryable(status):
            self._answered(host)
            raise error
        now = time.time()
        asked = answer.asked(now)
        if self.policy.retries.too_long(asked):
            fields = _fields(req.url, answer, attempt, wait=until(now, asked or 0.0))
            raise fixes.error(what, fixes.pick(fixes.waits, status), fields)
        return _Again(asked, error)

    def _read(self, resp: requests.Response, req: Req, what: str, fixes: Fixes) -> None:
        """Read ``resp``'s body into it (``resp.content`` then works as unstreamed), or
        raise the client's error once it passes the request's limit."""
        cap, body = req.limit or self.policy.max_body, bytearray()
        seconds = self.policy.answer_seconds
        with resp:
            try:
                for chunk in arriving(resp, time.monotonic() + seconds, self.policy.timeouts[1]):
                    body += chunk
                    if len(body) > cap:
                        raise fixes.error_class(
                            f"{what}: {redact(req.url)} answered more than {cap:,} bytes, the "
                            f"most lockpipe reads of such an answer; is "
                            f"{_netloc(redact(req.url))} {fixes.name}?"
                        )
            except Late:
                raise fixes.error_class(
                    f"{what}: {redact(req.url)} did not finish its answer in {seconds:g} s "
                    f"({len(body):,} bytes came, too slowly); try again later, or check the "
                    f"network and any proxy between this host and {_netloc(redact(req.url))}"
                ) from None
            except urllib3.exceptions.DecodeError as exc:  # the same at every try
                coding = shown(resp.headers.get("Content-Encoding"), 40)
                raise fixes.error_class(
                    f"{what}: {redact(req.url)} answered with Content-Encoding {coding} a body "
                    f"that does not decode as that ({type(exc).__name__}); the server, or a "
                    f"proxy between this host and {_netloc(redact(req.url))}, compresses "
                    "wrongly: check the proxy, or tell the server's operator"
                ) from None
            except NET_ERRORS as exc:  # the body broke off: no answer
                raise requests.exceptions.ChunkedEncodingError(type(exc).__name__) from exc
        # what requests itself keeps after reading an unstreamed body (models.Response)
        resp._content, resp._content_consumed = bytes(body), True  # type: ignore[attr-defined]

    def _retry(self, host: Host, attempt: int, rewindable: bool, asked: float | None) -> bool:
        """Count a failed try at ``host``; after the pause, True when another is allowed."""
        with self._lock:
            host.failures += 1
            spent = host.failures >= self.policy.host_failures
        if not rewindable or spent or attempt >= self.policy.retries.attempts:
            return False
        self.sleep(self.policy.retries.pause(attempt, asked))
        return True

    def _answered(self, host: Host) -> None:
        with self._lock:
            host.failures = 0


def _fields(url: str, answer: Answer | None, attempt: int, **more: str) -> dict[str, object]:
    """What a :class:`Fixes` template may name, for a request to ``url``."""
    shown = redact(url)
    tries = attempt + 1
    return {
        "host": _netloc(shown),
        "url": shown,
        "there": _origin_shown(redact(answer.url if answer else url)),
        "status": answer.status if answer else 0,
        "tries": f"{tries} {'try' if tries == 1 else 'tries'}",
        "redirects": MAX_REDIRECTS,
        "cause": "",
        "wait": "",
        **more,
    }


def _netloc(url: str) -> str:
    """``url``'s host and port as shown; a URL that cannot be parsed, whole."""
    try:
        return urlsplit(url).netloc
    except ValueError:
        return url


def _origin_shown(url: str) -> str:
    """``scheme://host:port`` of ``url``; a URL that cannot be parsed, whole."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    return f"{parts.scheme}://{parts.netloc}"
