from __future__ import annotations

from lockpipe.imagebuild.reproduce import Reproduction, layer_difference

A, B, C = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64


def test_the_first_differing_layer_is_named() -> None:
    assert layer_difference([A, B], [A, C]).startswith("layer 2 of 2 differs (sha256:bbbbbbbbbbbb")
    assert layer_difference([A], [A, B]) == "the builds made 1 and 2 layers"
    assert "image config differs" in layer_difference([A, B], [A, B])


def test_a_reproduction_reads_as_a_verdict() -> None:
    same = Reproduction(target="t", engine="buildah", first=A, second=A, why="")
    assert same.same and str(same) == (
        f"t: reproducible with buildah: a cached build and a clean build both gave {A}"
    )
    differ = Reproduction(
        target="t", engine="docker", first=A, second=B, why="layer 2 of 2 differs"
    )
    assert not differ.same
    assert str(differ) == (
        f"t: NOT reproducible with docker: the cached build gave {A}, the clean build {B}; "
        "layer 2 of 2 differs"
    )


def test_the_second_build_starts_in_the_next_wall_clock_second() -> None:
    """Whole-second layer mtimes: two builds inside one second would agree by luck."""
    from lockpipe.imagebuild.reproduce import next_second

    slept: list[float] = []
    next_second(clock=lambda: 1000.3, sleep=slept.append)
    assert len(slept) == 1 and 1000.3 + slept[0] >= 1001.0
    next_second(clock=lambda: 1000.999, sleep=slept.append)
    assert 1000.999 + slept[1] >= 1001.0


def test_each_from_of_a_pinned_base_is_marked_and_nothing_else() -> None:
    """The marker keeps buildah's cache from taking a step another build made (basenames.py)."""
    from lockpipe.imagebuild.context import mark_bases

    text = (
        "ARG BASE\nFROM --platform=linux/amd64 ${BASE} AS build\nRUN true\n"
        "FROM build AS second\nFROM \\\n  $BASE\nFROM scratch\nFROM ref@sha256:1\n"
    )
    pin = "ref@sha256:" + "1" * 64
    text = text.replace("ref@sha256:1", pin)
    staged, marked = mark_bases(text, {"BASE": pin})
    out = staged.splitlines()
    label = f'LABEL "io.github.lockpipe.from"="{pin}"'
    assert out[2] == label and out[3] == "RUN true"
    assert out[4] == "FROM build AS second" and out[5] == "FROM \\"
    assert out[6:8] == ["  $BASE", label]
    assert out[8] == "FROM scratch" and out[9:] == [f"FROM {pin}", label]
    assert marked == [pin, pin, pin]


def test_heredocs_comments_and_defaults_are_read_as_docker_reads_them() -> None:
    from lockpipe.imagebuild.context import mark_bases

    pin = "r@sha256:" + "2" * 64
    text = (
        "FROM ${BASE:-x} AS a\n"
        "COPY <<EOF /notes\nFROM ${BASE}\nEOF\n"
        "FROM \\\n# a comment\n  ${BASE}\n"
        "FROM other@sha256:" + "3" * 64 + "\n"
    )
    staged, marked = mark_bases(text, {"BASE": pin})
    out = staged.splitlines()
    label = f'LABEL "io.github.lockpipe.from"="{pin}"'
    assert out[1] == label  # the ARG with a default
    assert out[2:5] == ["COPY <<EOF /notes", "FROM ${BASE}", "EOF"]  # the body is content
    assert out[5:9] == ["FROM \\", "# a comment", "  ${BASE}", label]
    assert marked == [pin, pin, "other@sha256:" + "3" * 64]


def test_a_first_name_other_than_the_pin_is_pulled_and_a_failed_pull_names_the_fix() -> None:
    import pytest

    from lockpipe.engines.basenames import is_pinned_name, settle_first_names
    from lockpipe.errors import BuildError

    pin = "127.0.0.1:5000/t/busybox:1@sha256:" + "a" * 64
    assert is_pinned_name("127.0.0.1:5000/t/busybox@sha256:" + "a" * 64, pin)
    assert not is_pinned_name("127.0.0.1:5000/t/mirror:1", pin)
    assert not is_pinned_name("127.0.0.1:5000/t/other@sha256:" + "a" * 64, pin)
    pulled: list[str] = []
    names = {pin: "127.0.0.1:5000/t/mirror:1"}
    assert settle_first_names("buildah", [pin], names.get, pulled.append) == [pin]
    absent: dict[str, str] = {}  # not in storage: bud pulls it by the pinned reference
    assert settle_first_names("buildah", [pin], absent.get, pulled.append) == []

    def refuse(ref: str) -> None:
        raise BuildError("dial tcp: connection refused")

    with pytest.raises(BuildError) as err:
        settle_first_names("buildah", [pin], names.get, refuse)
    assert "mirror:1" in str(err.value) and "reachable" in str(err.value)
