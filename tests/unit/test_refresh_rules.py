"""The warning rules of a refresh, each on its own, with values that trip it and ones that don't."""

from __future__ import annotations

from lockpipe.refresh import rules


def test_a_llama_cpp_tag_lower_than_the_pinned_one_is_backwards() -> None:
    (w,) = rules.tag_backwards("sources", "llama.cpp", "b10069", "b10001")
    assert w.rule == "backwards" and "b10069 -> b10001" in w.message
    assert rules.tag_backwards("sources", "llama.cpp", "b10069", "b10100") == []
    assert rules.tag_backwards("sources", "llama.cpp", "b10069", "master") == []


def test_a_compare_status_behind_or_diverged_is_backwards() -> None:
    old, new = "a" * 40, "b" * 40
    assert rules.commits_backwards("sources", "x", "behind", old, new)[0].rule == "backwards"
    assert "diverged" in rules.commits_backwards("sources", "x", "diverged", old, new)[0].message
    assert rules.commits_backwards("sources", "x", "ahead", old, new) == []


def test_a_hub_revision_dated_before_the_pinned_one_is_backwards() -> None:
    (w,) = rules.revision_backwards("payloads", "m", "a" * 40, "b" * 40,
                                    "2026-11-01T00:00:00Z", "2026-10-01T00:00:00Z")  # fmt: skip
    assert w.rule == "backwards" and "the branch was reset" in w.message
    later = rules.revision_backwards(
        "payloads", "m", "a" * 40, "b" * 40, "2026-10-01", "2026-11-01"
    )
    assert later == []
    assert rules.revision_backwards("payloads", "m", "a" * 40, "b" * 40, None, "2026-11-01") == []


def test_an_old_digest_the_registry_no_longer_serves_is_unfetchable() -> None:
    (w,) = rules.unfetchable("ubuntu", "sha256:" + "1" * 64, fetchable=False)
    assert w.rule == "unfetchable" and "no rolling back" in w.message
    assert rules.unfetchable("ubuntu", "sha256:" + "1" * 64, fetchable=True) == []


def test_a_digest_that_moved_under_the_same_version_label_is_flagged() -> None:
    (w,) = rules.label_unchanged("vllm", "0.29.0", "0.29.0", moved=True)
    assert w.rule == "label-unchanged" and "'0.29.0'" in w.message
    assert rules.label_unchanged("vllm", "0.29.0", "0.30.0", moved=True) == []
    assert rules.label_unchanged("vllm", "0.29.0", "0.29.0", moved=False) == []
    assert rules.label_unchanged("vllm", None, "0.29.0", moved=True) == []


def test_a_model_file_growing_or_shrinking_over_five_percent_is_flagged() -> None:
    (w,) = rules.size_jump("m", "model.safetensors", 1000, 1051)
    assert w.rule == "size-jump" and "+5.1 %" in w.message
    assert rules.size_jump("m", "x", 1000, 940)[0].message.count("-6.0 %") == 1
    assert rules.size_jump("m", "x", 1000, 1050) == []
    assert rules.size_jump("m", "x", None, 1050) == []


def test_an_index_that_became_one_manifest_is_flagged_only_when_children_were_recorded() -> None:
    (w,) = rules.index_gone("busybox", ["linux/amd64", "linux/arm64"], True)
    assert w.rule == "index-gone" and "no longer a multi-arch index" in w.message
    assert "linux/amd64, linux/arm64" in w.message
    assert rules.index_gone("busybox", [], False) == []
