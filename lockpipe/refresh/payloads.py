"""Hugging Face payloads: a branch → its commit, and each named file's size and hashes.

The branch is the payload's ``follow`` (default ``main``): a payload pinned on
another branch (a quantisation branch, a release branch) stays on it. The
revision comes from ``/api/models/{repo}/revision/{branch}`` (``sha``,
``lastModified``), the files from the tree API at that commit
(``/api/models/{repo}/tree/{sha}?recursive=true``): an LFS file's ``lfs.oid``
is the sha256 of its bytes, any other file's ``oid`` its git blob id. Only the
files the lock names are pinned; the lock decides what a payload is. A gated
repository needs ``HF_TOKEN`` and its licence accepted on the Hub.
"""

from __future__ import annotations

import re
from typing import Any

from lockpipe.errors import FetchError
from lockpipe.lock.model import Payload, PayloadFile
from lockpipe.refresh import rules
from lockpipe.refresh.api import Api
from lockpipe.refresh.gitsha import MAX_GIT_FILE, git_file_sha256
from lockpipe.refresh.model import Change, Link, Moved, Warn
from lockpipe.refresh.rules import iso_time
from lockpipe.urls import clipped, shown

_COMMIT = re.compile(r"[0-9a-f]{40}")  # a commit, or a git blob id
_SHA256 = re.compile(r"[0-9a-f]{64}")
HUGE = 2**63  # no size the Hub gives: its sizes are signed 64-bit


def _revision(hub: Api, repo: str, rev: str, what: str) -> tuple[str, str | None]:
    doc = hub.get(f"api/models/{repo}/revision/{rev}", what)
    sha = doc.get("sha") if isinstance(doc, dict) else None
    if not isinstance(sha, str) or not _COMMIT.fullmatch(sha):
        raise FetchError(f"{what}: the Hub gave no commit sha (40 hex digits) for {repo}@{rev}, "
                         f"but {shown(sha, 60)}; is HF_ENDPOINT a Hugging Face "
                         "Hub?")  # fmt: skip
    # for the reviewer and rules.revision_backwards, never a pin: not a date, unknown
    return sha, iso_time(doc.get("lastModified"))


def _pins(entry: dict[str, Any], what: str) -> dict[str, Any]:
    """A tree entry as the lock pins it: size, and the LFS sha256 or the git blob id.

    Checked here, at the boundary: an id names a file in the store and a temporary
    file, so one that is not hex (``../..``) never gets that far."""
    lfs = entry.get("lfs")
    size = entry.get("size")
    if isinstance(lfs, dict):
        key, oid, shape = "sha256", lfs.get("oid"), _SHA256
    else:
        key, oid, shape = "git_sha1", entry.get("oid"), _COMMIT
    if (
        type(size) is not int
        or not 0 <= size < HUGE
        or not isinstance(oid, str)
        or not shape.fullmatch(oid)
    ):
        raise FetchError(f"{what}: the Hub's tree entry for {entry.get('path')!r} has no size "
                         f"and {key} as the Hub gives them (size {shown(size, 40)}, "
                         f"oid {shown(oid, 80)}); is HF_ENDPOINT a Hugging Face "
                         "Hub?")  # fmt: skip
    if key == "git_sha1" and size > MAX_GIT_FILE:  # fetched whole to hash it: bounded
        raise FetchError(f"{what}: the Hub's tree lists {entry.get('path')!r} as kept in git "
                         f"(no lfs entry) with {size:,} bytes, more than the {MAX_GIT_FILE:,} "
                         "bytes lockpipe fetches to hash such a file; is HF_ENDPOINT a "
                         "Hugging Face Hub?")  # fmt: skip
    return {"size": size, key: oid}


def _listed(tree: list[Any], what: str) -> dict[str, dict[str, Any]]:
    """The files of a tree listing by path; FetchError for an entry without a path."""
    out = {}
    for e in tree:
        if not isinstance(e, dict) or e.get("type") != "file":
            continue
        if not isinstance(e.get("path"), str):
            raise FetchError(f"{what}: the Hub's tree listed a file without a path "
                             f"({clipped(str(e), 120)}); is HF_ENDPOINT a Hugging Face "
                             "Hub?")  # fmt: skip
        out[e["path"]] = e
    return out


def _old(f: PayloadFile) -> dict[str, Any]:
    out = {"size": f.size, "sha256": f.sha256, "git_sha1": f.git_sha1}
    return {k: v for k, v in out.items() if v is not None}


def refresh_payload(p: Payload, hub: Api) -> tuple[Change | None, list[Warn]]:
    """The change to ``payloads.NAME`` (None when nothing moved) and its warnings."""
    what, branch = f"payloads.{p.name}", p.follow
    sha, date = _revision(hub, p.repository, branch, what)
    tree = hub.get_all(f"api/models/{p.repository}/tree/{sha}", what, {"recursive": "true"})
    listed = _listed(tree, what)
    missing = [f.path for f in p.files if f.path not in listed]
    if missing:
        raise FetchError(f"{what}: {', '.join(missing)} not in {p.repository} at {branch} "
                         f"({sha[:12]}); fix the file names in the lock")  # fmt: skip
    warns: list[Warn] = []
    new_files = {f.path: _pins(listed[f.path], what) for f in p.files}
    for f in p.files:  # a registry names blobs by sha256: pin one for files kept in git too
        new = new_files[f.path]
        if "git_sha1" in new:
            keep = f.sha256 and f.git_sha1 == new["git_sha1"]
            new["sha256"] = f.sha256 if keep else git_file_sha256(
                hub, p.repository, sha, f.path, new["size"], new["git_sha1"],
                f"{what}.files.{f.path}")  # fmt: skip
    if not p.snapshot and "sha256" not in new_files[p.single.path]:
        raise FetchError(f"{what}: {p.single.path} is not an LFS file, so the Hub publishes no "
                         "sha256 for it; pin it as a snapshot (files: {path: {}}) to take "
                         "its git blob id")  # fmt: skip
    moved = [Moved("revision", p.revision, sha)] if p.revision != sha else []
    for f in p.files:
        old, new = _old(f), new_files[f.path]
        prefix = "" if not p.snapshot else f"files.{f.path}."
        moved += [Moved(prefix + k, str(old[k]) if k in old else None, str(v))
                  for k, v in new.items() if old.get(k) != v]  # fmt: skip
        warns += rules.size_jump(p.name, f.path, f.size, new["size"])
    if not moved:
        return None, warns
    dates = [("new revision", date or "unknown")]
    if p.revision and p.revision != sha:
        try:
            old_date = _revision(hub, p.repository, p.revision, what)[1]
        except FetchError:  # the pinned commit left the history: only its date is missed
            old_date = None
        dates.insert(0, ("pinned revision", old_date or "unknown"))
        warns += rules.revision_backwards("payloads", p.name, p.revision, sha, old_date, date)
    updates: dict[str, Any] = {"revision": sha}
    if p.snapshot:
        updates["files"] = new_files
    else:
        updates.update(new_files[p.single.path])
    page = hub.shown
    notes = () if p.revision != sha else ("same revision: values the lock lacked are pinned",)
    change = Change(kind="payloads", name=p.name, what=f"{p.repository}@{branch}",
                    moved=tuple(moved), updates=updates, tag=branch, dates=tuple(dates),
                    links=(Link(f"commit {sha[:12]}", f"{page}/{p.repository}/commit/{sha}"),),
                    notes=notes,
                    source=f"the Hub ({page}): {p.repository}@{branch} -> {sha}; sizes and "
                    "hashes from its tree API")  # fmt: skip
    return change, warns
