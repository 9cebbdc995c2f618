"""Exceptions of requests, urllib3 and urllib.parse, sorted into "retry" and "give up".

A refused connection, a timeout or a broken body may heal: :class:`RetryableHTTP`.
A URL that cannot be parsed, a scheme requests has no adapter for, or a
certificate that is not trusted will fail the same way every time:
:class:`HTTPFatal` at once, naming what to change. Either way the message is
one line with the URL and the cause in words, never a traceback.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import requests
import urllib3.exceptions

from lockpipe.payloads.errors import NO_ANSWER, HTTPFatal, RetryableHTTP, Unreachable
from lockpipe.urls import clipped, redact, redact_url

URL_FIX = "check HF_ENDPOINT, --mirror, and the repository and filename in the lock"
_QUOTED = re.compile(r"'([^'\s]*)'")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"()\[\]]+)")


def reason(exc: BaseException) -> str:
    """The cause in words: "Connection refused" rather than three nested reprs."""
    # requests quotes the URL it was given in some of its errors, a scheme-less one too
    text = _QUOTED.sub(lambda m: f"'{redact_url(m[1])}'", redact(str(exc)))
    found = _ERRNO.search(text)
    if found:
        return found[1].strip()
    return clipped(text or type(exc).__name__, 200)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps: requests and urllib3 nest the socket's error two deep."""
    todo, seen = [exc], set()
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        inner = [e.__cause__, e.__context__, getattr(e, "reason", None), *e.args]
        todo += [x for x in inner if isinstance(x, BaseException)]


def unreachable(url: str, exc: BaseException, timeout: tuple[float, float]) -> Unreachable | None:
    """``exc`` as "no connection to the host" (DNS, refused, unreachable, connect timeout);
    None for anything that happened once a connection was made."""
    host = urlsplit(url).netloc
    causes = list(_causes(exc))
    if any(isinstance(e, socket.gaierror | urllib3.exceptions.NameResolutionError)
           for e in causes):  # fmt: skip
        return Unreachable(f"{url}: the host name {host} does not resolve (DNS: "
                           f"{reason(exc)})", host)  # fmt: skip
    # urllib3's NewConnectionError (any OSError of connect()) is a ConnectTimeoutError too
    if any(isinstance(e, urllib3.exceptions.NewConnectionError | ConnectionRefusedError)
           for e in causes):  # fmt: skip
        return Unreachable(f"{url}: cannot connect to {host} ({reason(exc)})", host)
    if any(isinstance(e, requests.exceptions.ConnectTimeout
                      | urllib3.exceptions.ConnectTimeoutError) for e in causes):  # fmt: skip
        return Unreachable(f"{url}: no connection to {host} within {timeout[0]:g} s", host)
    return None


def bad_url(url: str, exc: BaseException) -> HTTPFatal:
    return HTTPFatal(
        f"{redact_url(url)}: not a URL that can be fetched ({reason(exc)}); {URL_FIX}", NO_ANSWER
    )


def classify(
    url: str, exc: BaseException, timeout: tuple[float, float]
) -> HTTPFatal | RetryableHTTP:
    """The error to raise for ``exc``, met while requesting ``url``."""
    if isinstance(exc, requests.exceptions.InvalidHeader | UnicodeEncodeError):
        # Its text quotes the header, which may be the token: never show it. A header
        # outside Latin-1 (a token of '€') is http.client's UnicodeEncodeError, not a URL's.
        return HTTPFatal(
            f"{url}: a request header is not valid: check that HF_TOKEN (or the token "
            "file) is one line of ASCII without spaces",
            NO_ANSWER,
        )
    if isinstance(exc, ValueError | requests.exceptions.URLRequired):
        return bad_url(url, exc)  # InvalidURL, MissingSchema, InvalidSchema, LocationParseError
    if isinstance(exc, requests.exceptions.TooManyRedirects):
        return HTTPFatal(f"{url}: too many redirects; {URL_FIX}", NO_ANSWER)
    if isinstance(exc, requests.exceptions.SSLError | urllib3.exceptions.SSLError):
        if "certificate" in str(exc).lower():
            return HTTPFatal(
                f"{url}: the TLS certificate is not trusted ({reason(exc)}); check the host "
                "name, or point REQUESTS_CA_BUNDLE at the CA bundle of a private mirror",
                NO_ANSWER,
            )
        return RetryableHTTP(f"{url}: TLS failed ({reason(exc)})")
    if (cut := unreachable(url, exc, timeout)) is not None:
        return cut
    if isinstance(exc, requests.exceptions.Timeout | urllib3.exceptions.TimeoutError):
        return RetryableHTTP(
            f"{url}: no answer in time ({timeout[0]:g} s to connect, {timeout[1]:g} s to read)"
        )
    if isinstance(exc, requests.exceptions.ConnectionError):
        return RetryableHTTP(f"{url}: could not connect ({reason(exc)})")
    return RetryableHTTP(f"{url}: {type(exc).__name__} ({reason(exc)})")
