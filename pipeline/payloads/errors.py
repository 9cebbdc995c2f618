"""Payload errors. Each one names the file or URL, what was expected, what came, and the fix.

They subclass :class:`pipeline.fetch.FetchError` so ``__main__`` reports them
like any other fetch failure (exit code 8, or the subclass's own code).
"""

from __future__ import annotations

from pipeline.fetch import FetchError


class PayloadError(FetchError):
    """A payload could not be fetched, placed or checked."""


class HTTPFatal(PayloadError):
    """401, 403, 404 or another answer that retrying cannot fix."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RetryableHTTP(PayloadError):
    """A 5xx, a timeout or a dropped connection: worth another try after a pause."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RangeIgnored(PayloadError):
    """The server answered a ranged request with the whole file (200)."""


class IntegrityError(PayloadError):
    """The bytes received do not match the size or sha256 the lock pins."""

    return_code = 9


class FormatError(PayloadError):
    """The file matches its checksum, but its header breaks the lock's expectations."""

    return_code = 10


class DiskSpaceError(PayloadError):
    """The store's file system has too little room for what is still to fetch."""

    return_code = 11
