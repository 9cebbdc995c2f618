"""HTTP outcomes the downloader tells apart. Each names the URL, what came, and the fix.

They are :class:`lockpipe.errors.FetchError`s (exit 8); integrity, format and disk
space have their own codes in :mod:`lockpipe.errors`. :class:`Stopped` is not a
user-facing error: it unwinds the download threads on Ctrl-C.
"""

from __future__ import annotations

from lockpipe.errors import FetchError

NO_ANSWER = 0  # HTTPFatal.status when no HTTP answer came (a malformed URL, a bad certificate)


class HTTPFatal(FetchError):
    """401, 403, 404 or another answer that retrying cannot fix."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RetryableHTTP(FetchError):
    """A 429, a 5xx, a timeout or a dropped connection: worth another try after a pause.

    ``status`` is the HTTP status when one came (429 and 503 slow the run down),
    ``retry_after`` the seconds the server asked to wait, if it said.
    """

    def __init__(
        self, message: str, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


class Unreachable(RetryableHTTP):
    """No connection to ``host``: its name does not resolve, or nothing answers there.

    Worth a try or two (a resolver or a link may come back), but it is this host's
    network, DNS or proxy that fails, not the server: fewer connections change nothing.
    """

    def __init__(self, message: str, host: str) -> None:
        super().__init__(message)
        self.host = host


class TooSlow(RetryableHTTP):
    """A body arriving under the run's slowest rate: its bytes do not make the retry
    free, as a drop's do, or a server sending a byte at a time would be retried for ever."""


class RangeRefused(HTTPFatal):
    """416: the server at ``url`` holds no bytes from where a piece starts; ``total`` is
    the file's size its ``Content-Range: bytes */N`` gave, when it did."""

    def __init__(self, url: str, start: int, total: int | None) -> None:
        holds = f"its file is {total:,} bytes" if total is not None else "it names no size"
        super().__init__(f"{url}: HTTP 416, no bytes from {start:,} on ({holds})", 416)
        self.url, self.total = url, total


class RangeIgnored(FetchError):
    """The server answered a ranged request with the whole file (200)."""


class Stopped(Exception):
    """The run is being interrupted; the journal keeps what was written."""
