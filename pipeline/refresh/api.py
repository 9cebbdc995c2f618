"""GET a JSON document from an HTTP API (GitHub's, the Hub's, PyPI's), errors in one line.

Every failure is a :class:`FetchError` that names the URL and the fix; a token
goes into the Authorization header and nowhere else (never into a message).
A refused request (401/403) reads as refused, with ``refused`` saying what to
do, never as "unreachable".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import requests

from pipeline.errors import FetchError

TIMEOUT = (10.0, 60.0)
MAX_PAGES = 50  # a tree listing of 50 pages is not a model repository
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True, kw_only=True)
class Api:
    """One API: its base URL, the token it takes, and what to say when it refuses."""

    base: str
    name: str  # "GitHub's API", "the Hub"
    refused: str  # the fix for 401/403: "set GITHUB_TOKEN"
    token: str | None = field(default=None, repr=False)

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
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            resp = requests.get(url, params=params, headers=headers, timeout=TIMEOUT)
        except requests.RequestException as exc:
            raise FetchError(f"{what}: {self.name} at {self.base} unreachable "
                             f"({type(exc).__name__}); check the network or proxy "
                             "(HTTPS_PROXY) from this host") from None  # fmt: skip
        if resp.status_code in (401, 403):
            raise FetchError(f"{what}: {self.name} refused {url} ({resp.status_code}); "
                             f"{self.refused}")  # fmt: skip
        if resp.status_code == 404:
            raise FetchError(f"{what}: {url} not found (404); check the name in the lock")
        if resp.status_code != 200:
            raise FetchError(f"{what}: {self.name} answered {resp.status_code} for {url}; "
                             "retry later")  # fmt: skip
        try:
            return resp.json(), resp.headers.get("Link", "")
        except ValueError:
            raise FetchError(f"{what}: {url} answered 200 without JSON; is {self.base} "
                             f"{self.name}?") from None  # fmt: skip
