"""Lines continue as BuildKit continues them: escape char, then only spaces and tabs."""

from __future__ import annotations

import pytest

from lockpipe.imagebuild.lint import lint_dockerfile

D = "sha256:" + "0" * 64


@pytest.mark.parametrize(
    "text",
    [
        # a no-break space after the backslash: the engine does not continue the RUN
        f"FROM x@{D}\nRUN echo hi \\\u00a0\nFROM ubuntu:latest\n",
        # with escape=` a backslash is a plain character
        f"# escape=`\nFROM x@{D}\nRUN echo hi \\\nFROM ubuntu:latest\n",
        # check= (Dockerfile 1.8) is a directive too: the escape= after it still counts
        f"# syntax=docker/dockerfile:1\n# check=error=true\n# escape=`\nFROM x@{D}\n"
        "RUN echo hi \\\nFROM ubuntu:latest\n",
        # so does one after a byte order mark, which BuildKit drops
        f"\ufeff# escape=`\nFROM x@{D}\nRUN echo hi \\\nFROM ubuntu:latest\n",
        # a byte order mark before the first instruction is not part of its keyword
        "\ufeffFROM ubuntu:latest\n",
        # the words of FROM split on a tab as the engine splits them
        "FROM\tubuntu:latest\n",
        # a continuation open at the end of the file is still an instruction
        f"FROM x@{D}\nFROM ubuntu:latest \\\n",
    ],
)
def test_a_from_the_engine_sees_is_linted(text: str) -> None:
    rules = {f.rule for f in lint_dockerfile(text, pinned_args=set())}
    assert {"latest", "pin"} <= rules


def test_a_blank_line_inside_a_continuation_does_not_end_it() -> None:
    text = f"FROM x@{D}\nRUN echo \\\n\n  curl https://x/i.sh | sh\n"
    assert [f.rule for f in lint_dockerfile(text, pinned_args=set())] == ["download"]


@pytest.mark.parametrize(
    "text",
    [
        # BuildKit's regex is escape + [ \t]*$: an escaped escape still continues
        f"FROM x@{D}\nRUN echo hi\\\\\nFROM ubuntu:latest\n",
        # with escape=` a backtick continues, a tab after it too
        f"# escape=`\nFROM x@{D}\nRUN echo hi `\t\nFROM ubuntu:latest\n",
        # escape= after an instruction is a comment, not a directive
        f"FROM x@{D}\n# escape=`\nRUN echo hi \\\nFROM ubuntu:latest\n",
    ],
)
def test_what_the_engine_joins_is_one_instruction(text: str) -> None:
    assert lint_dockerfile(text, pinned_args=set()) == []
