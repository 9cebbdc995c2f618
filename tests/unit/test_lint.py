from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import LintError
from lockpipe.imagebuild.lint import instructions, lint_dockerfile, unpinned_apt
from tests.lockfactory import make_repo

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


# -- images named outside FROM: COPY/ADD --from=, RUN --mount=…,from= ------------------------

STAGES = "ARG BASE\nFROM ${BASE} AS Build\nRUN true\nFROM ${BASE}\n"


@pytest.mark.parametrize(
    "line",
    [
        "COPY --from=build /a /a",  # an earlier stage, by name (case-insensitive)
        "COPY --from=0 /a /a",  # by index
        "COPY --chown=1:1 --from=1 /a /a",
        f"COPY --from=busybox@{D} /bin/busybox /bin/busybox",
        "COPY --from=${BASE} /a /a",  # filled from the lock
        "RUN --mount=type=bind,from=build,source=/a,target=/a true",
        f"RUN --mount=type=cache,target=/root/.cache,from=ghcr.io/x/uv:0.5@{D} true",
        "RUN --mount=type=bind,source=r.txt,target=/r.txt --network=none true",
        "RUN echo --from=busybox:1.36 --mount=type=bind,from=x:1",  # words of the command
    ],
)
def test_images_named_outside_from_that_are_stages_or_pinned_are_clean(line: str) -> None:
    assert rules(f"{STAGES}{line}\n", pinned={"BASE"}) == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("COPY --from=docker.io/library/busybox:1.36 /bin/busybox /bin/", ["pin"]),
        ("ADD --from=busybox:1.36 /bin/busybox /bin/", ["pin"]),
        ("COPY --from=busybox:latest /bin/busybox /bin/", ["latest", "pin"]),
        ("COPY --from=2 /a /a", ["pin"]),  # no third stage: an image named "2"
        ("COPY --from=later /a /a", ["pin"]),  # not an *earlier* stage
        ("COPY --from=${OTHER} /a /a", ["pin"]),
        ("RUN --mount=type=bind,from=ghcr.io/astral-sh/uv:0.5,source=/uv,target=/uv true",
         ["pin"]),
        ("RUN --mount=type=cache,from=ghcr.io/x/cache:0.5,target=/c true", ["pin"]),
        ("RUN --mount=from=x:1,type=bind,target=/x --mount=type=bind,from=y:2,target=/y true",
         ["pin", "pin"]),
        ("ONBUILD COPY --from=busybox:1.36 /a /a", ["pin"]),
    ],
)  # fmt: skip
def test_images_named_outside_from_must_be_pinned(line: str, expected: list[str]) -> None:
    text = f"{STAGES}{line}\nFROM ${{BASE}} AS later\n"
    assert rules(text, pinned={"BASE"}) == expected


def test_an_unpinned_copy_from_says_what_to_do() -> None:
    (finding,) = lint_dockerfile(f"{STAGES}COPY --from=busybox:1.36 /a /a\n", pinned_args={"BASE"})
    assert finding.line == 5 and finding.message == (
        "COPY --from=busybox:1.36: not an earlier stage, so an image pulled at build time: "
        "pin it by digest (@sha256:…) or fill it from the lock through an ARG"
    )


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("COPY --from=docker.io/library/busybox:1.36 /bin/busybox /bin/busybox",
         "COPY --from=docker.io/library/busybox:1.36"),
        ("RUN --mount=type=bind,from=ghcr.io/astral-sh/uv:0.5,source=/uv,target=/bin/uv uv -V",
         "RUN --mount=…,from=ghcr.io/astral-sh/uv:0.5"),
        ("RUN --mount=type=cache,from=ghcr.io/x/cache:0.5,target=/root/.cache true",
         "RUN --mount=…,from=ghcr.io/x/cache:0.5"),
    ],
)  # fmt: skip
def test_lint_through_the_cli_refuses_an_unpinned_image_outside_from(
    line: str, shown: str, tmp_path: Path
) -> None:
    lock = make_repo(tmp_path, dockerfile=f"ARG BASE\nFROM ${{BASE}}\n{line}\n")
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "lint", "--lock", str(lock)], cwd=REPO, text=True,
        capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )  # fmt: skip
    assert out.returncode == LintError.return_code, out.stderr
    assert f"images/app/Dockerfile:3: [pin] {shown}: not an earlier stage" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\x7f"])
def test_a_control_character_in_an_instruction_is_a_finding(char: str) -> None:
    text = f"FROM scratch\nRUN --mount=type=bind,source=a{char}b true\n"
    found = lint_dockerfile(text, pinned_args=set())
    assert [(f.line, f.rule) for f in found] == [(2, "control")]
    assert repr(char) in found[0].message
    assert rules("FROM scratch\nRUN printf 'a\tb'\n") == []  # a tab is text


# -- package managers: what the index serves today -------------------------------------------


@pytest.mark.parametrize(
    ("run", "tool"),
    [
        ("apt-get update && apt-get install -y --no-install-recommends curl", "apt-get install"),
        ("apt-get -y -q install curl", "apt-get -y -q install"),
        ("apk add --no-cache bash", "apk add"),
        ("dnf -y install gcc", "dnf -y install"),
        ("npm install -g left-pad", "npm install"),
        ("yarn global add x", "yarn global add"),
        ("pipx install ruff", "pipx install"),
        ("uv tool install ruff", "uv tool install"),
        ("gem install rails", "gem install"),
        ("<<EOF\nset -e\napt-get install -y curl\nEOF", "apt-get install"),  # a heredoc body
        # options with their values before the verb (the local review's)
        ("apt-get -o Acquire::Retries=3 install -y gcc", "apt-get -o Acquire::Retries=3 install"),
        ("yum --enablerepo epel install gcc", "yum --enablerepo epel install"),
        ("dnf --setopt install_weak_deps=False install -y gcc",
         "dnf --setopt install_weak_deps=False install"),
        ("apk --repository http://x add gcc", "apk --repository http://x add"),
        ("npm --global install yarn", "npm --global install"),
        ("conda install -y numpy", "conda install"),
    ],
)  # fmt: skip
def test_a_package_manager_install_is_named_with_where_pins_go(run: str, tool: str) -> None:
    """apt-get install in a RUN took the archive's packages of that day, outside the
    *_APT_PACKAGES build args and their APT_SNAPSHOT, and linted clean."""
    (finding,) = lint_dockerfile(f"FROM scratch\nRUN {run}\n", pinned_args=set())
    assert finding.rule == "download" and finding.line == 2
    assert finding.message.startswith(f"RUN installs with '{tool}', which takes what its index")
    assert "*_APT_PACKAGES build arg (installed from the lock's APT_SNAPSHOT)" in finding.message


@pytest.mark.parametrize(
    "run",
    [
        "npm ci",  # package-lock.json's integrity hashes
        "npm ci && npm run build > install.log",
        'sh /usr/local/lib/lockpipe/apt-install.sh "${BUILD_APT_PACKAGES}" "${APT_SNAPSHOT}"',
        "apt-get install --snapshot 20250101T000000Z -y jq",
        'echo "deb https://snapshot.debian.org/archive/debian/x bookworm main" > s && '
        "apt-get install -y jq",
    ],
)
def test_installs_held_by_a_lock_file_or_a_snapshot_are_clean(run: str) -> None:
    assert lint_dockerfile(f"FROM scratch\nRUN {run}\n", pinned_args=set()) == []
