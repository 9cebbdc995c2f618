"""Quadlet key validation: the table from podman's source, and the seeds' key mistakes."""

from __future__ import annotations

import pytest

from lockpipe.deploy import keys
from lockpipe.errors import DeployError


def test_seeds_container_entrypoint_names_the_right_key() -> None:
    # The fleet's frank-small deploy: "unsupported key in group Container", then
    # "Unit frank-small.service not found" at restart.
    with pytest.raises(DeployError, match=r"ContainerEntrypoint=: unsupported key.*the key is "
                       r"Entrypoint="):  # fmt: skip
        keys.check([("ContainerEntrypoint", "vllm")], (5, 7), "frank-small.container")


def test_seeds_entry_is_not_the_v1_spelling_either() -> None:
    assert keys.problems([("Entry", "vllm")], (5, 7)) == [
        "[Container] Entry=: unsupported key in any podman quadlet; the key is Entrypoint="
    ]


def test_key_newer_than_the_host_podman_is_rejected() -> None:
    (entry,) = keys.problems([("Entrypoint", "vllm")], (4, 9))
    assert "quadlet added it in 5.0" in entry and "PodmanArgs=--entrypoint" in entry
    assert keys.problems([("Entrypoint", "vllm")], (5, 0)) == []
    assert "needs podman 5.0" in keys.problems([("Notify", "healthy")], (4, 9))[0]
    assert keys.problems([("Notify", "true")], (4, 4)) == []


def test_no_quadlet_before_podman_4_4() -> None:
    with pytest.raises(DeployError, match=r"podman 4\.3 has no quadlet.*--podman-version"):
        keys.check([("Image", "x")], (4, 3), "x.container")


def test_table_matches_podman_source() -> None:
    # Counts of supportedContainerKeys at the release tags (pkg/systemd/quadlet/quadlet.go).
    counts = {(4, 4): 29, (4, 5): 52, (4, 8): 73, (4, 9): 73, (5, 0): 76, (5, 4): 87,
              (5, 5): 92, (5, 8): 94}  # fmt: skip
    assert {v: len(keys.supported_keys(v)) for v in counts} == counts
    assert keys.since("HealthCmd") == (4, 5) and keys.since("Entrypoint") == (5, 0)


@pytest.mark.parametrize(
    ("text", "version"),
    [("podman version 4.3.1", (4, 3)), ("podman version 5.4.2\n", (5, 4)), ("5.4", (5, 4))],
)
def test_parse_version(text: str, version: keys.Version) -> None:
    assert keys.parse_version(text) == version


def test_unparsable_version_names_the_option() -> None:
    with pytest.raises(DeployError, match="--podman-version"):
        keys.parse_version("podman: command not found")


@pytest.mark.parametrize("text", ["1" * 5000 + ".2", "5.4" + "0" * 5000, "\u0665.\u0664"])
def test_a_version_of_absurd_digits_is_no_version(text: str) -> None:
    """5,000 digits were int()'s ValueError traceback (its 4,300-digit limit)."""
    with pytest.raises(DeployError, match=r"cannot read a podman version from .*--podman-version"):
        keys.parse_version(text)
