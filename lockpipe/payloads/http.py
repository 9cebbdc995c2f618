"""One ranged GET, sent by the run's transport, and its answer sorted into errors.

:class:`lockpipe.http.transport.Transport` sends it: the candidate's token (or the
mirror's user and password) goes to the candidate's origin and never to the CDN a
redirect points at, nor over http after https, and the answer says whether it is
worth another try and what its ``Retry-After`` asks. The try is single: retries are
budgeted per file (:mod:`lockpipe.payloads.retry`). Every
failure becomes :class:`RetryableHTTP` (5xx, 408, 429, timeouts, dropped
connections) or :class:`HTTPFatal` (everything retrying cannot fix), with the
exceptions of requests and urllib3 sorted in :mod:`lockpipe.payloads.neterrors`:
nothing else leaves this module, so no traceback reaches a user.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from lockpipe.http import MAX_REDIRECTS, Answer, NoAnswer, retryable, whole_number
from lockpipe.http.transport import Req, Transport
from lockpipe.payloads.errors import HTTPFatal, RangeRefused, RetryableHTTP, TooSlow
from lockpipe.payloads.neterrors import bad_url, classify
from lockpipe.payloads.settings import Tuning
from lockpipe.payloads.sources import Candidate, repo_page
from lockpipe.urls import redact, same_origin, shown

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED = re.compile(r"bytes \*/(\d{1,18})")  # a 416's Content-Range


@dataclass(kw_only=True)
class Opened:
    """A response whose body starts at byte ``start`` of the file."""

    response: requests.Response
    start: int
    total: int | None  # the whole file's size, if the server said
    ranged: bool  # False: the server ignored Range and sends the whole file
    url: str  # after redirects, as messages show it (no user and password)


def _fix(status: int, cand: Candidate, url: str, sent_token: bool) -> str:
    if status == 401 and cand.kind == "mirror":  # an http:// mirror's, or a registry's
        return cand.refused_fix(sent_token)
    if status == 403 and cand.kind == "mirror":  # no Hub token goes to a mirror
        return (
            "the mirror forbids this file: check that --mirror's user may read it, or "
            "that the mirror serves this repository"
        )
    if status == 401:
        if sent_token:
            return "the Hub refused the token (HF_TOKEN or the token file); check that it is valid"
        return (
            "no token was sent: set HF_TOKEN or log in with `hf auth login`; "
            "the Hub also answers 401 for a misspelled repository"
        )
    if status == 403:
        return (
            f"the repository is gated or private: accept its conditions at {repo_page(url)} "
            "with the account that owns the token, and give the token read access"
        )
    if status in (404, 410):
        return (
            "no such file at this revision: check the repository, revision and filename "
            "in the lock against the repository's file page"
        )
    return "the server refused the request; check the URL"


def _status_error(answer: Answer, cand: Candidate, start: int) -> Exception:
    status = answer.status
    shown = redact(answer.url)  # a redirect may name a user and password of its own
    where = shown if answer.url == cand.url else f"{cand.url} (redirected to {shown})"
    if retryable(status):
        return RetryableHTTP(f"{where}: HTTP {status}", answer.asked(), status)
    if status == 416:  # a resumed piece past the end of what the server holds
        size = _UNSATISFIED.fullmatch(answer.response.headers.get("Content-Range", "").strip())
        return RangeRefused(where, start, int(size[1]) if size else None)
    if status in (401, 403) and not same_origin(answer.url, cand.url):
        fix = _elsewhere(cand, answer.url)
    else:  # the candidate's own origin answered: answer.authorized is what it got
        fix = _fix(status, cand, cand.url, answer.authorized)
    return HTTPFatal(f"{where}: HTTP {status}; {fix}", status)


def _elsewhere(cand: Candidate, url: str) -> str:
    """A 401 or 403 from where ``cand``'s origin redirected (the Hub's storage or CDN, a
    mirror's): it gets no credentials by design, so the token is not to blame."""
    whose = "the mirror" if cand.kind == "mirror" else "the Hub"
    try:
        there = urlsplit(url).netloc.rpartition("@")[2] or redact(url)
    except ValueError:
        there = redact(url)
    if cand.authorization is None:  # nothing went to the candidate's own origin either
        went = f"no credentials were sent, and none are sent to {there}"
    else:
        what = "the token" if cand.token else "the user and password"
        went = f"{what} went to {cand.host} alone, and is never sent on to {there}"
    return (
        f"the storage or CDN {whose} redirected to ({there}) refused the signed URL it "
        f"was given ({went}): the URL may have expired, or this machine's clock may be "
        f"off; try again, and if it persists, {whose}'s storage is refusing the download"
    )


def open_range(transport: Transport, cand: Candidate, start: int, end: int | None) -> Opened:
    """GET ``[start, end)`` of ``cand`` (``end`` None: to the end of the file) in one try,
    with ``cand``'s credentials on its origin."""
    headers = {"Accept-Encoding": "identity"}
    if start or end is not None:
        headers["Range"] = f"bytes={start}-{'' if end is None else end - 1}"
    url = cand.url
    try:
        urlsplit(url)
    except ValueError as exc:
        raise bad_url(url, exc) from None
    transport.login(url, cand)  # this try's: a mirror's and the Hub's are on other origins
    try:
        answer = transport.send(Req(method="GET", url=url, headers=headers, stream=True))
    except NoAnswer as no:
        raise classify(redact(no.url), no.cause, transport.policy.timeouts) from None
    resp = answer.response
    if answer.looped:
        resp.close()
        raise HTTPFatal(f"{cand.url}: more than {MAX_REDIRECTS} redirects; check the URL", 310)
    if resp.status_code not in (200, 206):
        resp.close()
        raise _status_error(answer, cand, start)
    return _opened(resp, cand, start, redact(answer.url))


def _opened(resp: requests.Response, cand: Candidate, start: int, url: str) -> Opened:
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):  # asked for identity: these bytes are not the file's
        resp.close()
        raise HTTPFatal(
            f"{url}: answered with Content-Encoding {shown(encoding, 40)}, though asked for "
            "the file's own bytes (Accept-Encoding: identity); it or a proxy before it "
            "compresses what it should not: use another --mirror, or fetch around the proxy",
            resp.status_code,
        )
    if resp.status_code == 200:
        total = whole_number(resp.headers.get("Content-Length"))
        return Opened(response=resp, start=0, total=total, ranged=False, url=url)
    match = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range", "").strip())
    total = None if not match or match[3] == "*" else whole_number(match[3])
    if not match or whole_number(match[1]) != start or (match[3] != "*" and total is None):
        resp.close()
        raise HTTPFatal(
            f"{url}: asked for bytes from {start}, got Content-Range "
            f"{shown(resp.headers.get('Content-Range') or '', 100)}; "
            "the server's Range support is broken",
            206,
        )
    return Opened(response=resp, start=start, total=total, ranged=True, url=url)


GATHER = 0.25  # seconds a chunk gathers bytes before it is handed on, full or not


def body(opened: Opened, tuning: Tuning) -> Iterator[bytes]:
    """The response body as it arrives, in chunks of up to ``tuning.chunk`` bytes; a
    broken connection, or one under ``tuning.slowest`` bytes/s over ``tuning.slow_for``
    seconds, becomes RetryableHTTP.

    ``read1`` returns what one read of the socket gives: a read of a whole chunk would
    wait for all of it, each wait of the socket under the read timeout, so a body sent a
    byte at a time showed no progress and never failed. What the reads give is gathered
    into a chunk, handed on once full or :data:`GATHER` seconds old: over TLS one read is
    one 16 KiB record, and handing each on alone cost twice the CPU per byte.
    """
    raw = opened.response.raw
    finished = False
    since, came = time.monotonic(), 0
    gathered, started = bytearray(), 0.0
    try:
        while True:
            try:
                data = raw.read1(tuning.chunk - len(gathered))
            except Exception as exc:  # urllib3 and http.client raise several kinds for one cause
                broken = RetryableHTTP(f"{opened.url}: connection broken ({type(exc).__name__})")
                if gathered:  # what came is kept: the retry resumes after it
                    yield bytes(gathered)
                raise broken from None
            now = time.monotonic()
            if not data:
                if gathered:
                    yield bytes(gathered)
                finished = True
                return
            came += len(data)
            if (took := now - since) >= tuning.slow_for:
                if came < tuning.slowest * took:
                    if gathered or data:  # what came is kept, as for a broken connection
                        yield bytes(gathered) + data
                    raise TooSlow(
                        f"{opened.url}: too slow ({came:,} bytes in {took:.0f} s, under "
                        f"{tuning.slowest:,} bytes/s); the connection is dropped and retried"
                    )
                since, came = now, 0
            if not gathered:
                started = now
            gathered += data
            if len(gathered) >= tuning.chunk or now - started >= GATHER:
                yield bytes(gathered)
                gathered.clear()
    finally:
        if finished:
            raw.release_conn()  # fully read: the keep-alive connection serves the next piece
        else:
            opened.response.close()
