from __future__ import annotations

from lockpipe.imagebuild.reproduce import Reproduction, layer_difference

A, B, C = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64


def test_the_first_differing_layer_is_named() -> None:
    assert layer_difference([A, B], [A, C]).startswith("layer 2 of 2 differs (sha256:bbbbbbbbbbbb")
    assert layer_difference([A], [A, B]) == "the builds made 1 and 2 layers"
    assert "image config differs" in layer_difference([A, B], [A, B])


def test_a_reproduction_reads_as_a_verdict() -> None:
    same = Reproduction(target="t", engine="buildah", first=A, second=A, why="")
    assert same.same and str(same) == f"t: reproducible with buildah: both builds {A}"
    differ = Reproduction(
        target="t", engine="docker", first=A, second=B, why="layer 2 of 2 differs"
    )
    assert not differ.same
    assert str(differ) == f"t: NOT reproducible with docker: {A} then {B}; layer 2 of 2 differs"


def test_the_second_build_starts_in_the_next_wall_clock_second() -> None:
    """Whole-second layer mtimes: two builds inside one second would agree by luck."""
    from lockpipe.imagebuild.reproduce import next_second

    slept: list[float] = []
    next_second(clock=lambda: 1000.3, sleep=slept.append)
    assert len(slept) == 1 and 1000.3 + slept[0] >= 1001.0
    next_second(clock=lambda: 1000.999, sleep=slept.append)
    assert 1000.999 + slept[1] >= 1001.0
