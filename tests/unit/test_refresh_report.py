"""The refresh report rendered from literal outcomes: Markdown for the PR, JSON, terminal lines."""

from __future__ import annotations

import json
import re

from lockpipe.refresh import report
from lockpipe.refresh.model import Change, Link, Moved, Newer, Outcome, Warn

OLD, NEW = "178a6c44937154dc4c4eff0d166f4a044c4fceba", "b" * 40
LLAMA = Change(
    kind="sources", name="llama.cpp", what="ggml-org/llama.cpp@latest-release",
    moved=(Moved("commit", OLD, NEW), Moved("sha256", "1" * 64, "2" * 64)),
    updates={"commit": NEW}, source="GitHub API", tag="b10100",
    dates=(("pinned commit", "2026-11-01T00:00:00Z"), ("new commit", "2026-11-20T00:00:00Z")),
    links=(Link("compare b10069...b10100 (31 commits, ahead)",
                "https://github.com/ggml-org/llama.cpp/compare/b10069...b10100"),),
)  # fmt: skip
WARN = Warn(kind="bases", name="vllm-openai", rule="label-unchanged", message="same label")
NEWER = Newer(pip="frank-small-audio", file="images/frank-small/requirements-audio.txt",
              package="vllm", pinned="0.29.0", latest="0.33.0",
              url="https://pypi.org/project/vllm/0.33.0/")  # fmt: skip
OUTCOME = Outcome(changes=(LLAMA,), warnings=(WARN,), newer=(NEWER,),
                  checked={"sources": ("llama.cpp",), "pip": ("frank-small-audio",)})  # fmt: skip


def test_markdown_puts_warnings_first_then_each_change_old_to_new_with_links() -> None:
    md = report.markdown(OUTCOME, "locks/digests.json")
    assert "1 entry changed of 2 checked (sources 1, pip 1)" in md
    assert md.index("### Warnings") < md.index("### `sources.llama.cpp`")
    assert "`bases.vllm-openai` (label-unchanged): same label" in md
    assert f"| commit | `{OLD}` | `{NEW}` |" in md
    assert "### `sources.llama.cpp` — ggml-org/llama.cpp@latest-release (b10100)" in md
    assert ("[compare b10069...b10100 (31 commits, ahead)]"
            "(https://github.com/ggml-org/llama.cpp/compare/b10069...b10100)") in md  # fmt: skip
    assert "- pinned commit: 2026-11-01T00:00:00Z" in md
    assert "| vllm | 0.29.0 | [0.33.0](https://pypi.org/project/vllm/0.33.0/) |" in md


def test_an_unpinned_value_reads_as_unpinned_and_nothing_moved_reads_as_current() -> None:
    moved = (Moved("files.config.json.size", None, "42"),)
    change = Change(kind="payloads", name="m", what="org/m@main", updates={}, moved=moved,
                    source="the Hub")  # fmt: skip
    assert "| files.config.json.size | *(unpinned)* | `42` |" in report.markdown(
        Outcome(changes=(change,)), "lock"
    )
    assert "Every pin is current." in report.markdown(Outcome(checked={"bases": ("a",)}), "l")


def test_json_carries_the_same_facts() -> None:
    doc = json.loads(report.as_json(OUTCOME, "locks/digests.json"))
    (change,) = doc["changes"]
    assert change["key"] == "sources.llama.cpp" and change["tag"] == "b10100"
    assert change["moved"][0] == {"key": "commit", "old": OLD, "new": NEW}
    assert doc["warnings"][0]["rule"] == "label-unchanged"
    assert doc["newer"][0]["latest"] == "0.33.0"
    assert doc["checked"] == {"sources": ["llama.cpp"], "pip": ["frank-small-audio"]}


def test_terminal_lines_name_each_change_warning_and_newer_release() -> None:
    out = report.lines(OUTCOME)
    assert out[0].startswith(f"sources.llama.cpp: ggml-org/llama.cpp@latest-release: commit {OLD}")
    assert "warning: bases.vllm-openai: same label" in out
    assert out[-1] == "pip.frank-small-audio: vllm 0.29.0 pinned, 0.33.0 released (not moved)"


def test_hostile_upstream_text_cannot_break_the_markdown() -> None:
    """A version label, a release tag and a date are upstream's text, not ours."""
    label = "1.0 | x |\n## Approved\n[click](https://evil.example)<img src=x>`rm`"
    change = Change(kind="bases", name="b", what="r/x:1", updates={}, source="s", tag=label,
                    moved=(Moved("version_label", "1.0", label),),
                    dates=(("new revision", "2026\n- [ok](https://evil.example)"),),
                    links=(Link("commit a", "https://hub.example/x) [y](https://evil"),),
                    )  # fmt: skip
    warn = Warn(kind="bases", name="b", rule="label-unchanged", message=f"stayed {label!r}")
    md = report.markdown(Outcome(changes=(change,), warnings=(warn,)), "lock")
    assert not any(line.startswith("## Approved") for line in md.splitlines())
    for live in (r"\[click", r"<img", r"`rm", r"\[ok"):  # each only with a backslash before it
        assert re.search(r"(?<!\\)" + live, md) is None, live
    assert "\\[click\\](https://evil.example)\\<img src=x\\>\\`rm\\`" in md
    (row,) = [line for line in md.splitlines() if line.startswith("| version_label")]
    assert row.count("|") - row.count("\\|") == 4  # three cells, however the label reads
    assert "- [commit a](https://hub.example/x%29%20[y]%28https://evil)" in md
    assert "- new revision: 2026 - \\[ok\\](https://evil.example)" in md


def test_a_removed_value_reads_as_removed() -> None:
    gone = Moved("platforms.linux/amd64", "sha256:" + "1" * 64, None)
    change = Change(kind="bases", name="b", what="r/x:1", updates={}, source="s", moved=(gone,))
    assert "| *(removed)* |" in report.markdown(Outcome(changes=(change,)), "lock")
    assert "-> (removed)" in report.lines(Outcome(changes=(change,)))[0]


def test_proposed_upgrades_are_a_section_with_each_target_s_verdicts() -> None:
    from lockpipe.refresh.proposal import Proposal, Verdict

    fail = Verdict(target="frank-small", check="preflight:backend", status="fail",
                   detail="a | pipe and <b>tag</b>\nnew line", fix="drop it")  # fmt: skip
    gain = Verdict(target="llama-cuda", check="metrics", status="gain", detail="counters")
    ok = Proposal(kind="sources", name="llama.cpp", pinned="b10069", version="b11434",
                  new="t", targets=("llama-cuda",), verdicts=(gain,))  # fmt: skip
    bad = Proposal(kind="bases", name="vllm-openai", pinned="v0.29.0-cu129", version="0.33.0",
                   new="r", targets=("frank-small",), verdicts=(fail,))  # fmt: skip
    held = Proposal(kind="bases", name="vllm-openai", pinned="v0.29.0-cu129", version="0.30.0",
                    new="r", targets=("frank-small",), held="first seen today")  # fmt: skip
    outcome = Outcome(proposals=(ok, bad, held))
    md = report.markdown(outcome, "locks/digests.json")
    assert "### Proposed upgrades" in md and "2 proposed, 1 held by --min-age" in md
    assert "(every affected target would start)" in md
    assert "(would break frank-small (preflight:backend))" in md
    assert "a \\| pipe and \\<b\\>tag\\</b\\> new line | drop it |" in md  # inert, one line
    assert "`lockpipe upgrade llama.cpp b11434`" in md
    assert "lockpipe upgrade vllm-openai 0.30.0" not in md  # a held one is not offered
    doc = json.loads(report.as_json(outcome, "locks/digests.json"))
    assert [p["summary"] for p in doc["proposals"]] == [
        "every affected target would start",
        "would break frank-small (preflight:backend)",
        "held: first seen today",
    ]
    assert doc["proposals"][1]["verdicts"][0]["fix"] == "drop it"
    assert "proposed: bases.vllm-openai v0.29.0-cu129 -> 0.33.0: would break" in "\n".join(
        report.lines(outcome))  # fmt: skip
