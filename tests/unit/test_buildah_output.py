"""buildah's and podman's JSON output is checked where it enters (issue 18's review): a
version whose output changed shape is one EngineError naming the command, not a KeyError's
traceback. cmd.call, the one place that runs programs, is replaced by a stand-in that
returns the output a real tool could print."""

from __future__ import annotations

import pytest

from lockpipe import cmd
from lockpipe.engines.buildah import BuildahEngine
from lockpipe.errors import EngineError

GOOD = '{"OCIv1": {"rootfs": {"diff_ids": ["sha256:aa"]}, "config": {"Env": ["A=1"]}}}'


@pytest.fixture
def prints(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    outputs: list[str] = []
    monkeypatch.setattr(cmd, "call", lambda *a, **k: outputs.pop(0))
    return outputs


def test_well_formed_output_is_read(prints: list[str]) -> None:
    prints += [
        GOOD,
        GOOD,
        '[{"State": {"Running": false, "ExitCode": 3}, "Image": "' + "a" * 64 + '"}]',
    ]
    engine = BuildahEngine()
    assert engine.layers("x") == ["sha256:aa"] and engine.image_env("x") == {"A": "1"}
    state = engine.state("c")
    assert not state.running and state.exit_code == 3


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("WARN[0000] cgroups v1", "its output is not JSON"),
        ('{"OCIv1": {"rootfs": {}}}', "its output has no OCIv1.rootfs.diff_ids"),
        (
            '{"OCIv1": {"rootfs": {"diff_ids": "sha256:aa"}}}',
            "OCIv1.rootfs.diff_ids is a string, not a list",
        ),
        ("[]", "its output is a list, not an object"),
        ("[" * 100_000, "its output is not JSON"),  # was a RecursionError
    ],
)
def test_output_of_another_shape_is_an_engine_error_naming_the_command(
    prints: list[str], output: str, words: str
) -> None:
    prints.append(output)
    with pytest.raises(EngineError, match=r"`buildah inspect --type image x`: ") as info:
        BuildahEngine().layers("x")
    assert words in str(info.value) and "lockpipe doctor" in str(info.value)


def test_a_container_state_of_another_shape_is_an_engine_error(prints: list[str]) -> None:
    prints.append('[{"State": {"Running": "yes"}}]')
    with pytest.raises(
        EngineError, match=r"podman inspect --type container c`: \[0\]\.State\.Running is a string"
    ):
        BuildahEngine().state("c")


def test_a_run_that_prints_no_container_id_is_an_engine_error(prints: list[str]) -> None:
    """podman run --detach prints the container's ID last; nothing there was an IndexError
    traceback from smoke (engine.run), text a container ID nobody could stop."""
    from lockpipe.engines.base import RunSpec

    for output in ("", "Trying to pull x...\n"):
        prints.append(output)
        with pytest.raises(EngineError, match=r"`podman run --detach .*`: .*no container ID"):
            BuildahEngine().run(RunSpec(image="x"))
    prints.append("c" * 64 + "\n")
    assert BuildahEngine().run(RunSpec(image="x")) == "c" * 64


def test_a_push_that_leaves_no_digest_is_an_engine_error(prints: list[str]) -> None:
    """buildah push --digestfile: a file not written was a FileNotFoundError traceback,
    and what it held was returned as the manifest digest unchecked."""
    prints.append("")
    with pytest.raises(EngineError, match=r"`buildah push` to r/a:1: .*no digest"):
        BuildahEngine().push("a:1", "r/a:1")


def test_an_env_entry_that_is_not_a_string_is_an_engine_error(prints: list[str]) -> None:
    """Env was handed to env_dict unread: a number there was a TypeError traceback
    (smoke --gpu reads the image's LD_LIBRARY_PATH this way)."""
    prints.append('{"OCIv1": {"config": {"Env": ["A=1", 5]}}}')
    with pytest.raises(EngineError, match=r"OCIv1\.config\.Env\[1\] is an integer, not a string"):
        BuildahEngine().image_env("x")


def test_an_image_id_that_is_none_is_an_engine_error(prints: list[str]) -> None:
    """buildah inspect --format {{.FromImageID}}: what it printed was taken as the ID
    ('<no value>' came back as 'sha256:<no value>' to smoke's same-image check)."""
    prints.append("<no value>\n")
    with pytest.raises(EngineError, match=r"FromImageID.*: the image ID is '<no value>'"):
        BuildahEngine().image_id("x")
    prints.append("f" * 64 + "\n")
    assert BuildahEngine().image_id("x") == "sha256:" + "f" * 64
