from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.imagebuild.lint import instructions, lint_dockerfile, unpinned_apt

REPO = Path(__file__).resolve().parents[2]
D = "sha256:" + "0" * 64


def rules(text: str, *, pinned: set[str] | None = None, allow_copy: bool = True) -> list[str]:
    return [
        f.rule for f in lint_dockerfile(text, pinned_args=pinned or set(), allow_copy=allow_copy)
    ]


def test_continuations_join_and_keep_the_first_line_number() -> None:
    got = list(instructions("# c\nFROM x AS y\nRUN a \\\n  # inner comment\n  && b\n\nCMD c\n"))
    assert [(i.line, i.keyword, i.args) for i in got] == [
        (2, "FROM", "x AS y"),
        (3, "RUN", "a && b"),
        (7, "CMD", "c"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        f"FROM debian:bookworm@{D}\nRUN true\n",
        "ARG BASE\nFROM ${BASE} AS build\nFROM build\nCOPY --from=build /a /a\n",
        "FROM scratch\nCOPY busybox /bin/busybox\n",
        "ARG BASE\nFROM $BASE\nRUN curl -fsSLo f https://x/f && echo 'abc  f' | sha256sum -c -\n",
        "ARG BASE\nFROM $BASE\nRUN pip install --require-hashes -r r.txt\n",
        f"# syntax=docker/dockerfile:1@{D}\nFROM x@{D}\n",
    ],
)
def test_clean(text: str) -> None:
    assert rules(text, pinned={"BASE"}) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FROM debian:bookworm\n", ["pin"]),
        ("FROM debian:latest\n", ["latest", "pin"]),
        (f"FROM debian:latest@{D}\n", ["latest"]),
        ("ARG BASE=debian:latest\nFROM ${BASE}\n", ["latest"]),
        ("ARG OTHER\nFROM ${OTHER}\n", ["pin"]),
        (f"FROM x@{D}\nRUN curl -LO https://e/x.tgz && tar xf x.tgz\n", ["download"]),
        (f"FROM x@{D}\nRUN wget https://e/x\n", ["download"]),
        (f"FROM x@{D}\nRUN pip install librosa\n", ["download"]),
        (f"FROM x@{D}\nRUN git clone https://e/r\n", ["download"]),
        (f"FROM x@{D}\nADD https://e/x.tgz /x.tgz\n", ["download"]),
        (f"FROM x@{D}\nRUN curl -fsSL https://e/i.sh | sh; echo sha256sum -c\n", ["download"]),
        (f"# syntax=docker/dockerfile:1\nFROM x@{D}\n", ["pin"]),
    ],
)
def test_broken(text: str, expected: list[str]) -> None:
    assert rules(text, pinned={"BASE"}) == expected


def test_apt_packages_need_a_snapshot() -> None:
    assert unpinned_apt({"BUILD_APT_PACKAGES": "cmake", "RUNTIME_APT_PACKAGES": " "}) == [
        "BUILD_APT_PACKAGES"
    ]
    assert unpinned_apt({"BUILD_APT_PACKAGES": "cmake", "APT_SNAPSHOT": "20261101T000000Z"}) == []


def test_no_copy_targets_reject_copy_and_add() -> None:
    text = f"FROM x@{D}\nCOPY a /a\nADD b /b\n"
    assert rules(text, allow_copy=False) == ["no-copy", "no-copy"]
    assert rules(text, allow_copy=True) == []


def test_finding_renders_path_line_rule_and_fix() -> None:
    (finding,) = lint_dockerfile("FROM debian:bookworm\n", pinned_args=set())
    assert finding.render("images/x/Dockerfile") == (
        "images/x/Dockerfile:1: [pin] FROM debian:bookworm: pin it by digest (@sha256:…) "
        "or fill it from the lock through an ARG"
    )


@pytest.mark.parametrize(
    ("context", "pinned", "allow_copy"),
    [
        ("frank-small", {"VLLM_BASE"}, False),
        ("llama-cuda", {"BUILD_BASE", "RUNTIME_BASE"}, True),
    ],
)
def test_committed_dockerfiles_are_clean(context: str, pinned: set[str], allow_copy: bool) -> None:
    text = (REPO / "images" / context / "Dockerfile").read_text()
    assert lint_dockerfile(text, pinned_args=pinned, allow_copy=allow_copy) == []
