"""A repository's tags: ``GET /v2/<name>/tags/list``, every page (the distribution spec).

The registry pages with ``?n=`` and a ``Link: <…?last=…>; rel="next"`` header; each page is
followed on the same registry (a Link to another host is refused: the token is that host's).
Mirrors are not asked: a mirror may hold only what was pulled through it, so its tag list
is not the registry's.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from lockpipe.errors import RegistryError
from lockpipe.jsonshape import Reader
from lockpipe.registry.creds import credentials
from lockpipe.registry.names import endpoint
from lockpipe.registry.transport import Registry
from lockpipe.urls import next_page, shown

PAGE = 1000
MAX_PAGES = 100
# the bytes of all pages together: a repository's tags are not 64 MiB of JSON, and the
# parsed pages are held at many times their size
MAX_LISTING = 64 * 1024 * 1024


def list_tags(ref: str, *, registry: Registry | None = None) -> list[str]:
    """Every tag of ``ref``'s repository, as the registry lists them; RegistryError naming
    ``ref`` and the fix when it cannot."""
    ep = endpoint(ref)
    credential = None if registry else credentials(f"{ep.registry}/{ep.repository}")
    reg = registry or Registry(ep.host, scheme=ep.scheme, credential=credential)
    path = f"tags/list?n={PAGE}"
    out: list[str] = []
    fix = "is it a registry (distribution API v2)?"
    read = Reader(where=f"{ref}: {ep.host}'s tags/list", root="the answer", error=RegistryError,
                  fix=fix)  # fmt: skip
    size = 0
    for _ in range(MAX_PAGES):
        resp = reg.request("GET", ep.repository, path, headers={"Accept": "application/json"})
        size += len(resp.content)
        if size > MAX_LISTING:
            first = reg.url(ep.repository, "tags/list")
            raise RegistryError(f"{ref}: the tags/list pages at {first} hold more than "
                                f"{MAX_LISTING >> 20} MiB in all; {fix}")  # fmt: skip
        doc = read.parse(resp.content)
        listed = read.get(doc, ("tags",), list, [])  # null: a repository without tags
        out += [read.get(doc, ("tags", i), str) for i in range(len(listed))]
        page = reg.url(ep.repository, "tags/list")  # what a relative next link is read against
        url = next_page(resp.headers.get("Link", ""), page, read.fail)
        if url is None:
            return out
        if not reg.owns(url):
            raise RegistryError(
                f"{ref}: tags/list's next page is on another host "
                f"({shown(urlsplit(url).netloc, 100)}); refusing to follow it"
            )
        path = url  # Registry.request takes an absolute URL on its own origin as it is
    raise RegistryError(f"{ref}: more than {MAX_PAGES} pages of tags at {ep.host}")
