"""Docker tags read as Renovate reads them: version, pre-release, compatibility suffix."""

from __future__ import annotations

from lockpipe.refresh.versions import newer, parse_tag

# The six tags of vllm/vllm-openai (issue 20)
TAGS = ["v0.29.0-cu129", "v0.30.0-cu129", "v0.31.0-cu130", "v0.32.0rc1-cu129",
        "v0.32.0-cu129-ubuntu2404", "v0.33.0-cu129"]  # fmt: skip


def test_only_newer_stable_tags_with_the_same_suffix_are_proposed() -> None:
    assert [v.tag for v in newer("v0.29.0-cu129", TAGS)] == ["v0.30.0-cu129", "v0.33.0-cu129"]
    assert [v.version for v in newer("v0.29.0-cu129", [*TAGS, "v0.33.0", "latest"])] == [
        "0.30.0",
        "0.33.0",
    ]


def test_the_parts_of_a_tag() -> None:
    rc = parse_tag("v0.32.0rc1-cu129")
    assert rc is not None and (rc.release, rc.prerelease, rc.suffix, rc.stable) == (
        (0, 32, 0), "rc1", "cu129", False
    )  # fmt: skip
    two = parse_tag("v0.32.0-cu129-ubuntu2404")
    assert two is not None and two.suffix == "cu129-ubuntu2404"
    assert parse_tag("latest") is None and parse_tag("nightly-abc") is None
    base = parse_tag("v0.29.0-cu129")
    assert base is not None and base.with_version("0.33.0") == "v0.33.0-cu129"


def test_precision_and_suffix_must_match() -> None:
    # tags shaped as nvidia/cuda's (a parser's input: which exist is the registry's business)
    cuda = [
        "12.9.1-devel-ubuntu24.04",
        "12.9.2-devel-ubuntu24.04",
        "13.0-devel-ubuntu24.04",
        "13.0.1-devel-ubuntu22.04",
        "13.0.1-runtime-ubuntu24.04",
        "13.0.1-devel-ubuntu24.04",
    ]
    got = [v.tag for v in newer("12.9.1-devel-ubuntu24.04", cuda)]
    assert got == ["12.9.2-devel-ubuntu24.04", "13.0.1-devel-ubuntu24.04"]
    assert [v.tag for v in newer("24.04", ["24.10", "25.04", "24.04.1", "26"])] == [
        "24.10",
        "25.04",
    ]
    assert newer("latest", TAGS) == []


def test_a_tag_longer_than_the_tag_grammar_is_not_a_version() -> None:
    # 5000 digits was a ValueError from int() (4300 at most); 128 characters is a tag's limit
    assert parse_tag("2" * 5000) is None and parse_tag("1." + "9" * 127) is None
    assert newer("1", ["2" * 5000, "v" + "3" * 5000, "4" * 5000 + "-cu129", "5"]) == [
        parse_tag("5")
    ]
    longest = parse_tag("1." + "9" * 126)  # 128 characters: a tag
    assert longest is not None and longest.release == (1, int("9" * 126))
