"""HTTP outcomes the downloader tells apart. Each names the URL, what came, and the fix.

They are :class:`pipeline.errors.FetchError`s (exit 8); integrity, format and disk
space have their own codes in :mod:`pipeline.errors`.
"""

from __future__ import annotations

from pipeline.errors import FetchError


class HTTPFatal(FetchError):
    """401, 403, 404 or another answer that retrying cannot fix."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class RetryableHTTP(FetchError):
    """A 429, a 5xx, a timeout or a dropped connection: worth another try after a pause."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RangeIgnored(FetchError):
    """The server answered a ranged request with the whole file (200)."""
