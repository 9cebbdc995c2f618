"""A FAKE of GitHub's REST API on 127.0.0.1, for tests only. It is not GitHub.

It answers the few endpoints ``lockpipe refresh-digests`` reads, in the shapes
GitHub documents (https://docs.github.com/rest), from a literal history:

    GET /repos/{owner}/{repo}/releases/latest   {"tag_name": ...}
    GET /repos/{owner}/{repo}/commits/{ref}
        {"sha": ..., "commit": {"committer": {"date": ...}}}
    GET /repos/{owner}/{repo}/compare/{base}...{head}
        {"status": "ahead|behind|identical", "ahead_by", "behind_by", "total_commits"}
    GET /repos/{owner}/{repo}/tags[?page=N]   [{"name": ..., "commit": {"sha": ...}}],
        ``per_page`` tags a page, ``Link: <…?page=N+1>; rel="next"`` while more remain

``ref`` is a commit sha, a tag or a branch. History is one straight line of
commits, so compare is index arithmetic. With ``token`` set, a request without
``Authorization: Bearer <token>`` gets 401, as a private repository does;
``auth_seen`` keeps every Authorization header, for tests that check the token
travels and nowhere else.

Faults, as GitHub shows them: ``fail`` is a list of statuses to answer the next
requests with (``[502]``: one Bad Gateway, then normal answers), with
``retry_after`` as its ``Retry-After``; ``rate_limit_reset`` (epoch seconds)
answers every request 403 with ``X-RateLimit-Remaining: 0`` and that
``X-RateLimit-Reset``, as GitHub does when the hourly limit is spent.
``next_base`` makes the tag pages' ``Link`` point at another server (a
second fake), for the test that a token never follows a link off the API's host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.httpfake import FakeHandler, FakeServer

_PATH = re.compile(
    r"/repos/([^/]+/[^/]+)/(releases/latest|commits/([^/]+)|compare/(.+)\.\.\.(.+)|tags)"
)


@dataclass
class FakeRepo:
    """A straight history: ``commits`` oldest first as (sha, ISO date); tags and branches."""

    commits: list[tuple[str, str]] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    latest_release: str | None = None

    def sha(self, ref: str) -> str | None:
        if ref in self.tags:
            return self.tags[ref]
        if ref in self.branches:
            return self.branches[ref]
        return ref if any(ref == c for c, _ in self.commits) else None

    def index(self, sha: str) -> int:
        return [c for c, _ in self.commits].index(sha)


class FakeGitHub(FakeServer):
    """The FAKE GitHub. ``requests`` keeps every request's path, query included."""

    def __init__(self, token: str | None = None) -> None:
        super().__init__(_Handler)
        self.repos: dict[str, FakeRepo] = {}
        self.token = token
        self.auth_seen: list[str | None] = []
        self.requests: list[str] = []
        self.fail: list[int] = []  # statuses for the next requests, one each
        self.retry_after = ""
        self.rate_limit_reset: int | None = None
        self.per_page = 2
        self.next_base: str | None = None  # where the tag pages' next links point ("": relative)
        self.tags_answer: Any = None  # what every tags request gets instead, when set
        self.release_answer: Any = None  # what every releases/latest request gets, when set
        self.compare_answer: Any = None  # what every compare request gets instead, when set


class _Handler(FakeHandler):
    server: FakeGitHub

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append(self.path)
        srv.auth_seen.append(self.headers.get("Authorization"))
        if srv.token and self.headers.get("Authorization") != f"Bearer {srv.token}":
            return self.send_json(401, {"message": "Bad credentials"})
        if srv.fail:
            extra = {"Retry-After": srv.retry_after} if srv.retry_after else {}
            return self.send_json(srv.fail.pop(0), {"message": "Server Error"}, extra)
        if srv.rate_limit_reset is not None:
            return self.send_json(403, {"message": "API rate limit exceeded"},
                                  {"X-RateLimit-Remaining": "0",
                                   "X-RateLimit-Reset": str(srv.rate_limit_reset)})  # fmt: skip
        m = _PATH.fullmatch(self.path.split("?")[0])
        repo = srv.repos.get(m[1]) if m else None
        if m is None or repo is None:
            return self.send_json(404, {"message": "Not Found"})
        if m[2] == "tags":
            return self._tags(repo, m[1])
        if m[2] == "releases/latest":
            if srv.release_answer is not None:
                return self.send_json(200, srv.release_answer)
            if repo.latest_release is None:
                return self.send_json(404, {"message": "Not Found"})
            return self.send_json(200, {"tag_name": repo.latest_release})
        if m[3] is not None:
            sha = repo.sha(m[3])
            if sha is None:
                return self.send_json(422, {"message": f"No commit found for SHA: {m[3]}"})
            date = dict(repo.commits)[sha]
            return self.send_json(200, {"sha": sha, "commit": {"committer": {"date": date}}})
        if srv.compare_answer is not None:
            return self.send_json(200, srv.compare_answer)
        base, head = repo.sha(m[4]), repo.sha(m[5])
        if base is None or head is None:
            return self.send_json(404, {"message": "Not Found"})
        delta = repo.index(head) - repo.index(base)
        status = "ahead" if delta > 0 else "behind" if delta < 0 else "identical"
        ahead, behind = max(delta, 0), max(-delta, 0)
        return self.send_json(200, {"status": status, "ahead_by": ahead, "behind_by": behind,
                                    "total_commits": ahead})  # fmt: skip

    def _tags(self, repo: FakeRepo, name: str) -> None:
        srv = self.server
        if srv.tags_answer is not None:
            return self.send_json(200, srv.tags_answer)
        query = parse_qs(urlsplit(self.path).query)
        page = int(query.get("page", ["1"])[0])
        tags = sorted(repo.tags.items())
        start = (page - 1) * srv.per_page
        chunk = tags[start : start + srv.per_page]
        extra = {}
        if start + srv.per_page < len(tags):
            base = srv.url if srv.next_base is None else srv.next_base  # "": a relative link
            extra["Link"] = f'<{base}/repos/{name}/tags?page={page + 1}>; rel="next"'
        return self.send_json(200, [{"name": t, "commit": {"sha": c}} for t, c in chunk], extra)
