"""llama.cpp (any ``sources`` entry on GitHub): follow a release or a branch to a commit.

What is followed (``follow`` in the entry, docs/refresh.md):

- absent: the tag the pinned ``url`` names (``…/refs/tags/b10069.tar.gz``): the
  entry only changes if that tag was moved or its archive regenerated;
- ``latest-release``: GitHub's latest release (``/releases/latest``);
- any other name: that branch (or tag), archived by commit.

The commit comes from GitHub's API (``/repos/{o}/{r}/commits/{ref}``), the
archive through the payload downloader, its tree hash from its content
(:mod:`lockpipe.refresh.archive`). The span old → new comes from the compare
endpoint, for the report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import FetchError, LockError
from lockpipe.jsonshape import Reader
from lockpipe.lock.model import Source
from lockpipe.payloads.cache import cached
from lockpipe.refresh import rules
from lockpipe.refresh.api import Api
from lockpipe.refresh.archive import Fetched, Tree
from lockpipe.refresh.model import Change, Link, Moved, Warn
from lockpipe.urls import shown

LATEST = "latest-release"
_GITHUB = re.compile(r"^https://github\.com/([^/]+)/([^/]+?)(?:\.git)?/?$")
_TAG_URL = re.compile(r"/archive/refs/tags/([^/]+)\.tar\.gz$")
# A tag lockpipe puts into the API's path, the archive's URL, the lock and the report: a
# conservative part of what `git check-ref-format` allows (no "/", blanks, control or
# glob characters, no "..", no leading "-" or trailing ".lock"), 128 characters at most.
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]{0,127}")
# GitHub's compare statuses (docs.github.com/rest/commits/commits#compare-two-commits)
_STATUSES = ("ahead", "behind", "identical", "diverged")
MAX_COUNT = 10**9  # commits between two others: more than any repository has


@dataclass(frozen=True, kw_only=True)
class Archives:
    """How archives are fetched and hashed (the real ones in :mod:`archive`; tests inject)."""

    fetch: Callable[[str], Fetched]
    tree: Callable[[Path], Tree]
    cache: Path


def slug(source: Source) -> str:
    """``owner/repo`` of a GitHub repository URL, or a LockError naming the fix."""
    m = _GITHUB.match(source.repository)
    if m is None:
        raise LockError(f"sources.{source.name}.repository: {source.repository!r} is not "
                        "https://github.com/OWNER/REPO; refresh-digests follows GitHub "
                        "repositories only")  # fmt: skip
    return f"{m[1]}/{m[2]}"


def pinned_tag(source: Source) -> str | None:
    m = _TAG_URL.search(source.url or "")
    return m[1] if m else None


def is_tag(name: str) -> bool:
    """Whether ``name`` is a tag lockpipe uses as it is (``b10069``, ``v1.2.0-rc1``)."""
    return bool(_TAG.fullmatch(name)) and ".." not in name and not name.endswith((".", ".lock"))


def followed(source: Source, gh: Api) -> tuple[str, bool]:
    """(the ref to resolve, whether it is a tag)."""
    what = f"sources.{source.name}"
    if source.follow is None:
        tag = pinned_tag(source)
        if tag is None:
            raise LockError(f"{what}: its url names no tag (…/archive/refs/tags/TAG.tar.gz) "
                            f"and it has no follow; set follow to {LATEST!r} or a "
                            "branch")  # fmt: skip
        return tag, True
    if source.follow == LATEST:
        release = gh.get(f"repos/{slug(source)}/releases/latest", what)
        tag = release.get("tag_name") if isinstance(release, dict) else None
        if not isinstance(tag, str) or not tag:
            raise FetchError(f"{what}: GitHub's latest release of {slug(source)} has no tag_name")
        if not is_tag(tag):
            raise FetchError(f"{what}: GitHub's latest release of {slug(source)} has tag_name "
                             f"{shown(tag, 60)}, which lockpipe does not take for a tag (letters, "
                             "digits, '.', '_', '+', '-'; no '..', 128 at most); set follow to "
                             "a branch, or pin the release's url by hand")  # fmt: skip
        return tag, True
    return source.follow, False


def _commit(gh: Api, repo: str, ref: str, what: str) -> tuple[str, str | None]:
    doc = gh.get(f"repos/{repo}/commits/{ref}", what)
    sha = doc.get("sha") if isinstance(doc, dict) else None
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise FetchError(f"{what}: GitHub's API gave no commit sha for {repo}@{ref}")
    commit = doc.get("commit")  # GitHub's shape; any other one gives no date, not a trace
    committer = commit.get("committer") if isinstance(commit, dict) else None
    return sha, rules.iso_time(committer.get("date") if isinstance(committer, dict) else None)


def _compare(gh: Api, repo: str, span: str, what: str) -> tuple[int, str]:
    """(total_commits, status) of GitHub's compare of ``span`` (``OLD...NEW``); a FetchError
    naming the URL and the field where either is not what GitHub documents."""
    path = f"repos/{repo}/compare/{span}"
    read = Reader(where=f"{what}: {gh.url(path)}", root="the answer", error=FetchError,
                  fix=f"is {gh.shown} {gh.name}?")  # fmt: skip
    cmp = gh.get(path, what)
    count = read.get(cmp, ("total_commits",), int)
    status = read.get(cmp, ("status",), str)
    if not 0 <= count <= MAX_COUNT:
        raise read.fail(f"total_commits is {count}, not a count of commits (0 to {MAX_COUNT:,})")
    if status not in _STATUSES:
        raise read.fail(f"status is {shown(status, 40)}, not one of {', '.join(_STATUSES)}")
    return count, status


def refresh_source(source: Source, gh: Api, archives: Archives) -> tuple[Change | None, list[Warn]]:
    """The change to ``sources.NAME`` (None when nothing moved) and its warnings."""
    what, repo = f"sources.{source.name}", slug(source)
    ref, tagged = followed(source, gh)
    commit, date = _commit(gh, repo, ref, what)
    base = source.repository.rstrip("/").removesuffix(".git")
    url = f"{base}/archive/refs/tags/{ref}.tar.gz" if tagged else f"{base}/archive/{commit}.tar.gz"
    fetched = archives.fetch(url)
    tree = archives.tree(fetched.path)
    _same_commit(what, url, fetched, tree, commit, ref if tagged else None)
    new: dict[str, Any] = {"commit": commit, "url": url, "sha256": fetched.sha256,
                           "tree_sha256": tree.sha256, "root": tree.root}  # fmt: skip
    old: dict[str, Any] = {"commit": source.commit, "url": source.url, "sha256": source.sha256,
                           "tree_sha256": source.tree_sha256, "root": source.root}  # fmt: skip
    moved = tuple(Moved(k, old[k], v) for k, v in new.items() if old[k] != v)
    if not moved:
        return None, []
    old_tag = pinned_tag(source)
    warns = rules.tag_backwards("sources", source.name, old_tag, ref if tagged else None)
    notes: list[str] = []
    links: list[Link] = []
    dates = [("new commit", date or "unknown")]
    if source.commit == commit and source.sha256 and source.sha256 != fetched.sha256:
        notes.append(_same_content(source, tree, archives))
    if source.commit and source.commit != commit:
        span = f"{old_tag or source.commit[:12]}...{ref if tagged else commit[:12]}"
        count: int | str
        try:
            count, status = _compare(gh, repo, f"{source.commit}...{commit}", what)
            old_date = _commit(gh, repo, source.commit, what)[1]
        except FetchError as exc:
            # The span is for the reviewer; the pins themselves are resolved above.
            notes.append(f"no commit count: GitHub's compare of the pinned commit failed ({exc})")
            count, status, old_date = "?", "unknown", None
        warns += rules.commits_backwards("sources", source.name, status, source.commit, commit)
        links.append(Link(f"compare {span} ({count} commits, {status})", f"{base}/compare/{span}"))
        dates.insert(0, ("pinned commit", old_date or "unknown"))
    elif source.commit is None:
        notes.append("commit recorded for the first time")
    if moved == (Moved("tree_sha256", None, tree.sha256),):
        notes.append("tree hash recorded for the first time; nothing else moved")
    links.append(Link(f"commit {commit[:12]}", f"{base}/commit/{commit}"))
    change = Change(kind="sources", name=source.name, what=f"{repo}@{source.follow or ref}",
                    moved=moved, updates=new, tag=ref if tagged else None, dates=tuple(dates),
                    links=tuple(links), notes=tuple(notes),
                    source=f"GitHub API ({gh.shown}): {ref} -> commit {commit}; archive {url} "
                    f"fetched and hashed (sha256 and tree_sha256)")  # fmt: skip
    return change, warns


def _same_commit(what: str, url: str, fetched: Fetched, tree: Tree, commit: str,
                 tag: str | None) -> None:  # fmt: skip
    """A FetchError when the archive says (its pax ``comment``, as ``git archive`` writes it)
    it was made from another commit than the one GitHub's API named: its sha256 and tree hash
    would be pinned beside a commit they are not of. An archive that names none passes."""
    if tree.commit is None or tree.commit == commit:
        return
    came = f"the mirror's copy {fetched.mirror}" if fetched.mirror else "GitHub's archive"
    if fetched.mirror:
        fix = (
            "the mirror's copy is stale (or the tag moved): refresh the mirror's copy, or "
            "run again without --mirror (LOCKPIPE_MIRROR)"
        )
    elif tag:
        fix = f"the tag {tag} moved between the two requests: run again"
    else:
        fix = "run again"
    raise FetchError(f"{what}: {url}: {came} is of commit {tree.commit} (its pax header's "
                     f"comment), but GitHub's API names commit {commit}; {fix}")  # fmt: skip


def _same_content(source: Source, tree: Tree, archives: Archives) -> str:
    """Why the bytes of the same commit changed: a regenerated archive, or content."""
    before = source.tree_sha256
    old_copy = cached(archives.cache, source.sha256 or "")
    if before is None and source.sha256 and old_copy.is_file():
        before = archives.tree(old_copy).sha256
    if before is None:
        return ("bytes changed at the same commit; the old tree hash is unknown (no "
                "tree_sha256, no cached copy), so whether the content changed is too")  # fmt: skip
    if before == tree.sha256:
        return "bytes changed, content same: the archive was regenerated (same tree hash)"
    return "bytes AND content changed at the same commit: check the archive by hand"
