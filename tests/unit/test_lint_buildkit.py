"""What BuildKit reads, lint reads: mount specs, syntax directives, heredocs, remote sources.

Each case was a wrong PASS: the engine pulls an image or downloads, lint saw nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import LintError
from lockpipe.imagebuild.lint import instructions, lint_dockerfile
from tests.lockfactory import make_repo

REPO = Path(__file__).resolve().parents[2]
D = "sha256:" + "0" * 64
HEAD = "ARG BASE\nFROM ${BASE}\n"


def rules(text: str) -> list[str]:
    return [f.rule for f in lint_dockerfile(text, pinned_args={"BASE"})]


def cli(tmp_path: Path, dockerfile: str) -> subprocess.CompletedProcess[str]:
    lock = make_repo(tmp_path, dockerfile=dockerfile)
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "lint", "--lock", str(lock)], cwd=REPO, text=True,
        capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )  # fmt: skip


# -- RUN --mount: BuildKit reads the spec as CSV and lower-cases each key -----------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("RUN --mount=type=bind,FROM=ubuntu:22.04,target=/u true", ["pin"]),
        ("RUN --mount=type=bind,From=ubuntu:latest,target=/u true", ["latest", "pin"]),
        # CSV quoting (the single quotes are the Dockerfile's, the double ones the CSV's)
        ("RUN --mount='type=bind,\"from=ubuntu:22.04\",target=/u' true", ["pin"]),
        # the Dockerfile's own quotes, which BuildKit's flag parser drops
        ('RUN --mount=type=bind,"from=ubuntu:22.04",target=/u true', ["pin"]),
        # a quoted flag with a space in it is one flag, not the end of the flags
        ('RUN --mount="type=bind,target=/u,from=ubuntu:22.04" true', ["pin"]),
        ('RUN --mount="type=bind,target=/u, from=ubuntu:22.04" true', ["pin"]),
        # BuildKit ends a flag at an ASCII space only: the em space is inside the target
        ("RUN --mount=type=bind,target=/u\u2003x,from=ubuntu:22.04 true", ["pin"]),
        ("ONBUILD\tRUN --mount=type=bind,FROM=ubuntu:22.04,target=/u true", ["pin"]),
    ],
)
def test_a_mount_from_as_buildkit_reads_it_must_be_pinned(line: str, expected: list[str]) -> None:
    assert rules(f"{HEAD}{line}\n") == expected


@pytest.mark.parametrize(
    "line",
    [
        f"RUN --mount=type=bind,FROM=ubuntu:22.04@{D},target=/u true",
        'RUN --mount=type=bind,"FROM=0",target=/u true',  # the stage, by index
        'COPY --from="0" /a /a',  # BuildKit's flag parser drops the quotes
        "COPY --FROM=ubuntu:22.04 /a /a",  # an unknown flag: BuildKit fails the build
    ],
)
def test_a_mount_or_copy_from_buildkit_accepts_is_clean(line: str) -> None:
    assert rules(f"{HEAD}{line}\n") == []


@pytest.mark.parametrize(
    "line",
    [
        # BuildKit's flag parser takes the escaped space into --platform: the image is ubuntu
        "FROM --platform=linux/amd64\\ scratch ubuntu:22.04",
        "FROM --platform='linux/amd64 scratch' ubuntu:22.04",
    ],
)
def test_the_image_of_a_from_is_the_word_after_its_flags(line: str) -> None:
    assert rules(f"{HEAD}{line}\n") == ["pin"]


def test_the_cli_refuses_an_upper_case_mount_from(tmp_path: Path) -> None:
    out = cli(tmp_path, f"{HEAD}RUN --mount=type=bind,FROM=ubuntu:latest,target=/u cp /u/x /x\n")
    assert out.returncode == LintError.return_code, out.stderr
    assert "images/app/Dockerfile:3: [pin] RUN --mount=…,from=ubuntu:latest" in out.stderr


# -- # syntax=: BuildKit's DetectSyntax drops a BOM and a shebang, reads // and JSON too ----


@pytest.mark.parametrize(
    "text",
    [
        f"\ufeff# syntax=docker/dockerfile:1\n{HEAD}",
        f"#!/usr/bin/env docker-build\n# syntax=docker/dockerfile:1\n{HEAD}",
        f"// syntax=docker/dockerfile:1\n{HEAD}",
        f"\ufeff//syntax = docker/dockerfile:1\n{HEAD}",
        '{"syntax": "docker/dockerfile:1"}',
        '\ufeff{"syntax": "docker/dockerfile:1", "other": 1}\n',
        f"# check=error=true\n#  SYNTAX = docker/dockerfile:1\n{HEAD}",  # keys in any case
    ],
)
def test_a_syntax_directive_buildkit_honours_must_be_pinned(text: str) -> None:
    assert "pin" in rules(text)


@pytest.mark.parametrize(
    "text",
    [
        f"\ufeff# syntax=docker/dockerfile:1@{D}\n{HEAD}",
        f"// syntax=docker/dockerfile:1@{D}\n{HEAD}",
        f'{{"syntax": "docker/dockerfile:1@{D}"}}',
        f"# syntax=docker/dockerfile:1@{D} --opt\n{HEAD}",  # the image is the first word
    ],
)
def test_a_pinned_syntax_directive_in_any_form_is_clean(text: str) -> None:
    assert rules(text) == []


def test_the_cli_refuses_a_syntax_directive_after_a_bom(tmp_path: Path) -> None:
    out = cli(tmp_path, f"\ufeff# syntax=docker/dockerfile:1\n{HEAD}RUN true\n")
    assert out.returncode == LintError.return_code, out.stderr
    assert "images/app/Dockerfile:1: [pin] # syntax=docker/dockerfile:1" in out.stderr


# -- downloads: heredoc bodies, pip3.N, git sources, scheme case ------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "RUN <<EOF\ncurl -fsSL -o /x https://e/x\nEOF",
        "RUN <<-'EOT' bash\n\tset -e\n\t# a comment in the script\n\twget https://e/x\n\tEOT",
        "RUN cat <<A && sh <<B\nnothing\nA\npip install requests\nB",
        "RUN pip3.11 install requests",
        "RUN python3.11 -m pip install requests",
        "RUN CURL -o /x https://e/x",
        "ADD git@github.com:org/repo.git /src",
        "ADD HTTPS://github.com/org/repo.git /src",
        "ADD ssh://git@github.com/org/repo.git /src",
        "ADD HTTPS://e/x.tgz /x.tgz",  # a context path to BuildKit, flagged all the same
    ],
)
def test_a_download_buildkit_runs_is_a_finding(line: str) -> None:
    assert rules(f"{HEAD}{line}\n") == ["download"]


def test_a_heredoc_body_is_not_read_as_instructions() -> None:
    # the body's FROM is text in a script: no stage, so --from=1 names an image
    text = f"{HEAD}RUN <<EOF\nFROM ubuntu:latest\nEOF\nCOPY --from=1 /a /a\n"
    got = [(i.line, i.keyword) for i in instructions(text)]
    assert got == [(1, "ARG"), (2, "FROM"), (3, "RUN"), (6, "COPY")]
    assert rules(text) == ["pin"]


def test_the_cli_refuses_a_download_in_a_heredoc(tmp_path: Path) -> None:
    out = cli(tmp_path, f"{HEAD}RUN <<EOF\ncurl -fsSL -o /x https://e/x\nEOF\n")
    assert out.returncode == LintError.return_code, out.stderr
    assert "images/app/Dockerfile:3: [download] RUN downloads with 'curl'" in out.stderr


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, "FROM x\nRUN " + "[" * 100_000 + " <<EOF\nx\nEOF\n"],
    ids=["file", "run"],
)
def test_json_nested_past_pythons_recursion_is_no_json(text: str) -> None:
    """json.loads of the whole file (a JSON syntax directive) or of a RUN's arguments (its
    exec form) recursed past Python's limit: a RecursionError traceback from lint."""
    assert isinstance(lint_dockerfile(text, pinned_args=set()), list)


def test_an_unterminated_heredoc_is_a_finding() -> None:
    """BuildKit fails the build, but buildah 1.28 (no heredoc support) ran 'RUN cat <<NOPE'
    as shell and the FROM after it as a stage lint never checked (issue 18)."""
    text = "ARG BASE\nFROM ${BASE}\nRUN cat <<NOPE\nFROM ubuntu:24.04\nRUN echo unpinned\n"
    found = lint_dockerfile(text, pinned_args={"BASE"})
    assert [f.rule for f in found] == ["heredoc"] and "<<NOPE, which no line ends" in found[
        0
    ].message
    assert lint_dockerfile(text + "NOPE\n", pinned_args={"BASE"}) == []
