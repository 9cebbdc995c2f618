"""refresh-digests on llama.cpp: a FAKE GitHub API (tests/fake_github.py) for the commit and
the compare span, and the archive itself from nginx on 127.0.0.1 (as the --mirror), fetched
through the payload downloader."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from tests.fake_github import FakeGitHub, FakeRepo
from tests.integration.payload_servers import Nginx, nginx_binary
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
GH = "https://github.com/ggml-org/llama.cpp"
TOKEN = "ghp_fake_token_never_printed"
C = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(6)]  # ids only
DATES = [f"2026-11-{10 + i:02d}T00:00:00Z" for i in range(6)]
FILES = {"CMakeLists.txt": b"project(llama)\n", "src/llama.cpp": b"int main() {}\n",
         "scripts/build.sh": b"#!/bin/sh\n"}  # fmt: skip


def tar_gz(root: str, files: dict[str, bytes], level: int = 9, mtime: int = 0,
           commit: str | None = None) -> bytes:  # fmt: skip
    """A GitHub-style archive: one top folder, a build script executable; with ``commit``, a
    pax global header whose ``comment`` names it, as ``git archive`` writes one."""
    raw = io.BytesIO()
    pax = {"comment": commit} if commit else None
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT, pax_headers=pax) as tar:
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(f"{root}/{path}")
            info.size, info.mode = len(data), 0o755 if path.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=level, mtime=mtime)


def tree_by_hand(files: dict[str, bytes]) -> str:
    """The tree hash docs/refresh.md defines, computed here independently of the package."""
    rows = [f"{'100755' if p.endswith('.sh') else '100644'} {hashlib.sha256(d).hexdigest()} {p}\n"
            for p, d in sorted(files.items())]  # fmt: skip
    return hashlib.sha256("".join(rows).encode()).hexdigest()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    server = FakeGitHub(token=TOKEN)
    server.repos["ggml-org/llama.cpp"] = FakeRepo(
        commits=list(zip(C, DATES, strict=True)),
        tags={"b10001": C[0], "b10069": C[1], "b10100": C[4]}, branches={"master": C[5]},
        latest_release="b10100",
    )  # fmt: skip
    yield server
    server.stop()


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    if nginx_binary() is None:
        unavailable("nginx is needed to serve the archives (apt-get install nginx-light)")
    server = Nginx(tmp_path / "nginx")
    yield server
    server.stop()


def serve(nginx: Nginx, tag: str, data: bytes) -> None:
    path = nginx.www / "github.com/ggml-org/llama.cpp/archive/refs/tags" / f"{tag}.tar.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _lock(tmp_path: Path, **source: str) -> Path:
    document = doc()
    document["sources"] = {"llama.cpp": {
        "repository": GH, "commit": C[1], "url": f"{GH}/archive/refs/tags/b10069.tar.gz",
        "sha256": hashlib.sha256(b"the old archive").hexdigest(), "root": "llama.cpp-b10069",
        "origin": {"source": "by hand", "seen": "2026-01-01"}, **source}}  # fmt: skip
    return make_repo(tmp_path / "checkout", document)


def refresh(lock: Path, gh: FakeGitHub, nginx: Nginx, *args: str, token: str | None = TOKEN,
            ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "LOCKPIPE_GITHUB_API": gh.url,
           "LOCKPIPE_CACHE": str(lock.parent.parent / "cache")}  # fmt: skip
    env.pop("GITHUB_TOKEN", None)
    if token:
        env["GITHUB_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock),
         "--kind", "sources", "--mirror", nginx.url, *args],
        cwd=REPO, text=True, capture_output=True, check=False, env=env,
    )  # fmt: skip


def test_the_latest_release_is_followed_to_its_commit_archive_and_tree(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    archive = tar_gz("llama.cpp-b10100", FILES)
    serve(nginx, "b10100", archive)
    lock = _lock(tmp_path, follow="latest-release")
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    result = refresh(lock, github, nginx, "--report-md", str(md), "--report-json", str(js))
    assert result.returncode == 0, result.stderr
    entry = json.loads(lock.read_text())["sources"]["llama.cpp"]
    assert entry["commit"] == C[4] and entry["url"] == f"{GH}/archive/refs/tags/b10100.tar.gz"
    assert entry["sha256"] == hashlib.sha256(archive).hexdigest()
    assert entry["tree_sha256"] == tree_by_hand(FILES)
    assert entry["root"] == "llama.cpp-b10100" and entry["follow"] == "latest-release"
    assert entry["origin"]["source"].startswith(f"GitHub API ({github.url}): b10100 -> commit")
    report = md.read_text()
    assert f"[compare b10069...b10100 (3 commits, ahead)]({GH}/compare/b10069...b10100)" in report
    assert f"- pinned commit: {DATES[1]}" in report and f"- new commit: {DATES[4]}" in report
    assert json.loads(js.read_text())["changes"][0]["tag"] == "b10100"
    # the token went to the API as a Bearer token, and nowhere a person reads
    assert set(github.auth_seen) == {f"Bearer {TOKEN}"}
    for text in (result.stdout, result.stderr, report, js.read_text(), lock.read_text()):
        assert TOKEN not in text
    # the archive is in the cache where the build's fetch_verified looks for it
    cached = lock.parent.parent / "cache" / "sha256" / entry["sha256"][:2] / entry["sha256"]
    assert cached.read_bytes() == archive


def test_a_re_compressed_archive_reads_as_bytes_changed_content_same(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    pinned = tar_gz("llama.cpp-b10069", FILES, level=9)
    regenerated = tar_gz("llama.cpp-b10069", FILES, level=1, mtime=1234)
    assert pinned != regenerated
    serve(nginx, "b10069", regenerated)
    lock = _lock(tmp_path, sha256=hashlib.sha256(pinned).hexdigest(),
                 tree_sha256=tree_by_hand(FILES))  # fmt: skip
    result = refresh(lock, github, nginx)
    assert result.returncode == 0, result.stderr
    assert "bytes changed, content same" in result.stdout  # a report line: a result (issue 19)
    entry = json.loads(lock.read_text())["sources"]["llama.cpp"]
    assert entry["sha256"] == hashlib.sha256(regenerated).hexdigest() and entry["commit"] == C[1]
    assert entry["tree_sha256"] == tree_by_hand(FILES)


def test_nothing_moved_writes_nothing(github: FakeGitHub, nginx: Nginx, tmp_path: Path) -> None:
    archive = tar_gz("llama.cpp-b10069", FILES)
    serve(nginx, "b10069", archive)
    lock = _lock(tmp_path, sha256=hashlib.sha256(archive).hexdigest(),
                 tree_sha256=tree_by_hand(FILES))  # fmt: skip
    before = lock.read_bytes()
    result = refresh(lock, github, nginx, "--check")
    assert result.returncode == 0, result.stderr
    assert lock.read_bytes() == before


def test_a_release_older_than_the_pinned_one_is_warned_about(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    github.repos["ggml-org/llama.cpp"].latest_release = "b10001"
    serve(nginx, "b10001", tar_gz("llama.cpp-b10001", FILES))
    lock = _lock(tmp_path, follow="latest-release")
    md = tmp_path / "r.md"
    result = refresh(lock, github, nginx, "--report-md", str(md))
    assert result.returncode == 0, result.stderr
    report = md.read_text()
    assert "(backwards): tag moved backwards: b10069 -\\> b10001" in report
    assert "is behind the pinned" in report


@pytest.mark.parametrize("fault", ["no-token", "no-archive", "check"])
def test_a_fault_or_check_leaves_the_lock_byte_identical(
    fault: str, github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    if fault != "no-archive":
        serve(nginx, "b10100", tar_gz("llama.cpp-b10100", FILES))
    lock = _lock(tmp_path, follow="latest-release")
    before = lock.read_bytes()
    result = refresh(lock, github, nginx, *(["--check"] if fault == "check" else []),
                     token=None if fault == "no-token" else TOKEN)  # fmt: skip
    expected = {"no-token": FetchError.return_code, "no-archive": FetchError.return_code,
                "check": 3}[fault]  # fmt: skip
    assert result.returncode == expected, result.stderr
    if fault == "no-token":
        assert "refused" in result.stderr and "set GITHUB_TOKEN" in result.stderr
    if fault == "no-archive":
        assert f"{GH}/archive/refs/tags/b10100.tar.gz: could not fetch the archive" in result.stderr
        assert "mirror " in result.stderr and "404" in result.stderr
    assert "Traceback" not in result.stderr
    assert lock.read_bytes() == before


def test_an_unwritable_cache_is_one_fetch_error_naming_it(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    serve(nginx, "b10100", tar_gz("llama.cpp-b10100", FILES))
    lock = _lock(tmp_path, follow="latest-release")
    before = lock.read_bytes()
    blocker = tmp_path / "a-file"
    blocker.write_text("a file, not a folder")
    result = refresh(lock, github, nginx, "--cache", str(blocker / "cache"))
    assert result.returncode == FetchError.return_code, result.stderr
    assert "Traceback" not in result.stderr
    assert "cannot write the cache" in result.stderr and "--cache (LOCKPIPE_CACHE)" in result.stderr
    assert lock.read_bytes() == before


def test_one_bad_gateway_from_github_does_not_fail_the_run(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    serve(nginx, "b10100", tar_gz("llama.cpp-b10100", FILES))
    github.fail, github.retry_after = [502], "0"
    lock = _lock(tmp_path, follow="latest-release")
    result = refresh(lock, github, nginx)
    assert result.returncode == 0, result.stderr
    assert json.loads(lock.read_text())["sources"]["llama.cpp"]["commit"] == C[4]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (["b10100"], "the answer is a list, not an object"),
        ({"tag_name": 10100}, "tag_name is an integer, not a string"),
        ({"name": "b10100"}, "the answer has no tag_name"),
        ({"tag_name": "v1.0"}, "the latest release's tag_name 'v1.0' is no build tag (bNNNN)"),
    ],
)
def test_a_latest_release_answer_of_another_shape_is_one_line_naming_it(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path, answer: object, words: str
) -> None:
    """--propose reads the llama.cpp repository's latest release (no longer every page of its
    tags); an answer of another shape, or a tag that is no build, is one line naming it."""
    archive = tar_gz("llama.cpp-b10069", FILES)
    serve(nginx, "b10069", archive)
    lock = _lock(tmp_path, sha256=hashlib.sha256(archive).hexdigest(),
                 tree_sha256=tree_by_hand(FILES))  # fmt: skip
    before = lock.read_bytes()
    assert refresh(lock, github, nginx, "--propose", "--dry-run").returncode == 0
    github.release_answer = answer
    result = refresh(lock, github, nginx, "--propose", "--dry-run")
    assert result.returncode == FetchError.return_code, result.stderr
    assert "Traceback" not in result.stderr
    # --dry-run: the entry's line of the report, then the exit naming it
    url = f"{github.url}/repos/ggml-org/llama.cpp/releases/latest"
    assert f"sources.llama.cpp: not proposed: {url}: " in result.stderr
    assert words in result.stderr
    assert lock.read_bytes() == before


@pytest.mark.parametrize("tag", ["../x", "b1/x", "b 1", "b1\x7f", "-b1", "b1.lock", "b" * 300])
def test_a_latest_release_tag_that_no_tag_can_be_is_refused_before_it_is_used(
    tag: str, github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    """GitHub's tag_name goes into the API's path, the archive's URL, the lock and the cache:
    one with ``..``, ``/``, blanks or control characters is refused, named, before any use."""
    github.repos["ggml-org/llama.cpp"].latest_release = tag
    lock = _lock(tmp_path, follow="latest-release")
    before = lock.read_bytes()
    result = refresh(lock, github, nginx)
    assert result.returncode == FetchError.return_code, result.stderr
    assert "Traceback" not in result.stderr
    said = "sources.llama.cpp: GitHub's latest release of ggml-org/llama.cpp has tag_name "
    assert said + repr(tag[:60]) in result.stderr, result.stderr
    assert "set follow to a branch, or pin the release's url by hand" in result.stderr
    assert len(result.stderr) < 600 and not any("/commits/" in r for r in github.requests)
    assert lock.read_bytes() == before


def _latest_with_reports(
    github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    """refresh to the latest release (b10100), the Markdown report on stdout, the JSON one
    in a file; a run that ends well and shows no traceback."""
    serve(nginx, "b10100", tar_gz("llama.cpp-b10100", FILES))
    lock = _lock(tmp_path, follow="latest-release")
    js = tmp_path / "r.json"
    result = refresh(lock, github, nginx, "--report-md", "-", "--report-json", str(js))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result, lock, js


@pytest.mark.parametrize("date", ["\ud800", "yesterday", "2026-11-14T00:00:00Z\n# injected"])
def test_a_commit_date_that_is_not_a_date_reads_as_unknown(
    date: str, github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    """A lone surrogate (JSON's "\\ud800") as the committer's date crashed the report with
    UnicodeEncodeError's traceback when it was written (issue 18 review). A date is for the
    reviewer, never a pin: one that is not an ISO 8601 time reads as unknown, the pins
    are still resolved."""
    repo = github.repos["ggml-org/llama.cpp"]
    repo.commits = [(c, date if c in (C[1], C[4]) else d) for c, d in repo.commits]
    result, lock, js = _latest_with_reports(github, nginx, tmp_path)
    assert "- pinned commit: unknown" in result.stdout
    assert "- new commit: unknown" in result.stdout
    assert "(3 commits, ahead)" in result.stdout
    assert json.loads(lock.read_text())["sources"]["llama.cpp"]["commit"] == C[4]
    assert dict(json.loads(js.read_text())["changes"][0]["dates"]) == {
        "pinned commit": "unknown", "new commit": "unknown"}  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ({"total_commits": "\ud800", "status": "ahead"}, "total_commits is a string, not an"),
        ({"total_commits": 3, "status": "\udcff"}, "status is not text: it holds the lone "),
        ({"total_commits": 3}, "the answer has no status"),
        ({"total_commits": True, "status": "ahead"}, "total_commits is true/false, not an"),
        ({"total_commits": -1, "status": "ahead"}, "total_commits is -1, not a count of"),
        ({"total_commits": 10**19, "status": "ahead"}, "total_commits is 10000000000000000000,"),
        ({"total_commits": 3, "status": "sideways"}, "status is 'sideways', not one of ahead, "),
    ],
)
def test_a_compare_answer_github_does_not_give_is_no_commit_count(
    answer: dict[str, object], words: str, github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    """The compare span is for the reviewer: total_commits and status not as GitHub documents
    them (a lone surrogate crashed the report) are named in the report's note, the count
    reads "?", the status unknown; the pins are still resolved."""
    github.compare_answer = answer
    result, lock, js = _latest_with_reports(github, nginx, tmp_path)
    compare = f"{github.url}/repos/ggml-org/llama.cpp/compare/{C[1]}...{C[4]}"
    said = "no commit count: GitHub's compare of the pinned commit failed (sources.llama.cpp: "
    assert said + f"{compare}: {words}" in result.stdout, result.stdout
    assert "(? commits, unknown)" in result.stdout
    assert json.loads(lock.read_text())["sources"]["llama.cpp"]["commit"] == C[4]
    assert json.loads(js.read_text())["changes"][0]["tag"] == "b10100"


@pytest.mark.parametrize("made_from", [C[3], C[4], None])
def test_an_archive_of_another_commit_than_the_api_names_is_refused(
    made_from: str | None, github: FakeGitHub, nginx: Nginx, tmp_path: Path
) -> None:
    """The FAKE API says b10100 is commit C[4]; the mirror's copy of the tag's archive says
    (its pax global header's comment, as git archive and so GitHub write it) it was made from
    C[3]: a stale copy, or a tag moved between the two requests. Its sha256 and tree hash were
    pinned beside C[4] (issue 18). The same archive of C[4], or one naming no commit (not
    made by git archive), is taken as before."""
    serve(nginx, "b10100", tar_gz("llama.cpp-b10100", FILES, commit=made_from))
    lock = _lock(tmp_path, follow="latest-release")
    before = lock.read_bytes()
    result = refresh(lock, github, nginx)
    assert "Traceback" not in result.stderr
    if made_from == C[4] or made_from is None:
        assert result.returncode == 0, result.stderr
        assert json.loads(lock.read_text())["sources"]["llama.cpp"]["commit"] == C[4]
        return
    assert result.returncode == FetchError.return_code, result.stderr
    url = f"{GH}/archive/refs/tags/b10100.tar.gz"
    assert f"sources.llama.cpp: {url}: the mirror's copy {nginx.url}/github.com/" in result.stderr
    assert f"is of commit {C[3]}" in result.stderr and f"names commit {C[4]}" in result.stderr
    assert "run again without --mirror" in result.stderr
    assert lock.read_bytes() == before
