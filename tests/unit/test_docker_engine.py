"""The docker engine's checks that need no daemon: a stand-in client answers ``info()``."""

from __future__ import annotations

from typing import Any

import pytest

from lockpipe.engines.base import BuildRequest
from lockpipe.engines.docker import CONTAINERD_STORE, DockerEngine
from lockpipe.errors import EngineError


class _Client:  # a stand-in for docker.DockerClient: only what the checks call
    def __init__(self, driver_status: list[list[str]]) -> None:
        self._info = {"DriverStatus": driver_status}
        self.api = object()  # no _post: a build that got past the check would fail differently

    def info(self) -> dict[str, Any]:
        return self._info


def _engine(driver_status: list[list[str]], version: str = "26.1.5+dfsg1") -> DockerEngine:
    engine = DockerEngine.__new__(DockerEngine)  # skip __init__: no daemon here
    engine.client = _Client(driver_status)
    engine.url = "unix:///test.sock"
    engine._version = version
    return engine


def test_the_containerd_image_store_is_refused_with_the_fix(tmp_path: Any) -> None:
    engine = _engine([["driver-type", CONTAINERD_STORE]])
    req = BuildRequest(context=tmp_path, dockerfile="Dockerfile", tag="t:1", build_args={},
                       platform="linux/amd64", timestamp=0, no_cache=False)  # fmt: skip
    with pytest.raises(EngineError, match=r"moby/moby#47717.*containerd-snapshotter.*buildah"):
        engine.build(req, lambda line: None)


def test_the_graphdriver_store_passes_the_check() -> None:
    _engine(
        [["Backing Filesystem", "extfs"], ["Supports d_type", "true"]]
    )._refuse_containerd_store()


@pytest.mark.parametrize("version", ["20.10.24+dfsg1", "24.0.7", "26.1.5+dfsg1"])
def test_docker_never_claims_reproducible_builds(version: str) -> None:
    repro = _engine([], version).reproducibility()
    assert repro.reproducible is False
    assert repro.how.startswith(f"dockerd {version}:")


class _Container:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def reload(self) -> None:
        pass


class _Containers:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def get(self, name: str) -> _Container:
        return _Container(self.attrs)


@pytest.mark.parametrize(
    ("attrs", "words"),
    [
        ({"State": {"Running": "yes"}, "Image": "x"}, "State.Running is a string, not true/false"),
        ({"State": {"Running": False}, "Image": "x"}, "its answer has no State.ExitCode"),
        ({"State": []}, "State is a list, not an object"),
    ],
)
def test_a_daemons_answer_of_another_shape_is_an_engine_error(
    attrs: dict[str, Any], words: str
) -> None:
    """issue 18's review: the daemon's JSON is read through jsonshape.Reader, so a changed
    shape is one EngineError naming the call, not a KeyError's traceback."""
    engine = _engine([["driver-type", "overlay2"]])
    engine.client.containers = _Containers(attrs)
    with pytest.raises(EngineError, match=r"docker inspect container c: ") as info:
        engine.state("c")
    assert words in str(info.value)
    engine.client.containers = _Containers(
        {"State": {"Running": False, "ExitCode": 3}, "Image": "sha256:" + "a" * 64}
    )
    assert engine.state("c").exit_code == 3


class _Images:
    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def push(self, repo: str, tag: str, **kwargs: Any) -> Any:
        return iter(self.items)


DIGEST = "sha256:" + "d" * 64
PUSHED = {"aux": {"Tag": "1", "Digest": DIGEST, "Size": 527}}


@pytest.mark.parametrize(
    ("items", "words"),
    [
        ([["pushed"]], "a line of its answer is a list, not an object"),
        ([{"aux": "x"}], "aux is a string, not an object"),
        ([{"aux": {"Digest": 5}}], "aux.Digest is an integer, not a string"),
        (
            [{"aux": {"Digest": "sha256:../../x"}}],
            "the digest is 'sha256:../../x', not sha256:<64 hex>",
        ),
    ],
)
def test_a_push_answer_of_another_shape_is_an_engine_error(items: list[Any], words: str) -> None:
    """issue 18's review: the push stream was read with item.get(...) (an AttributeError on a
    list or an aux string) and any Digest was returned as the manifest digest (str(5))."""
    engine = _engine([])
    engine.client.images = _Images(items)
    with pytest.raises(EngineError, match=r"docker push r/a:1: ") as info:
        engine.push("r/a:1", "r/a:1")
    assert words in str(info.value) and "lockpipe doctor" in str(info.value)
    engine.client.images = _Images([{"status": "Pushed"}, PUSHED])
    assert engine.push("r/a:1", "r/a:1") == DIGEST


class _Image:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs


class _ImageStore:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def get(self, ref: str) -> _Image:
        return _Image(self.attrs)


def test_an_env_of_another_shape_is_an_engine_error() -> None:
    engine = _engine([])
    engine.client.images = _ImageStore({"Config": {"Env": ["A=1", ["B=2"]]}})
    with pytest.raises(EngineError, match=r"docker inspect image x: Config\.Env\[1\] is a list"):
        engine.image_env("x")
    engine.client.images = _ImageStore({"Config": {"Env": ["A=1", "B"]}})
    assert engine.image_env("x") == {"A": "1"}


class _Found:
    def __init__(self, image_id: object) -> None:
        self.id = image_id


class _IdStore:
    def __init__(self, image_id: object) -> None:
        self.image_id = image_id

    def get(self, ref: str) -> _Found:
        return _Found(self.image_id)


@pytest.mark.parametrize("image_id", [None, "latest", 5])
def test_an_image_id_of_another_shape_is_an_engine_error(image_id: object) -> None:
    """The ID smoke compares with the build record's, and a build's no-op check: None
    was an AttributeError traceback (None.startswith), 'latest' passed as sha256:latest."""
    engine = _engine([])
    engine.client.images = _IdStore(image_id)
    with pytest.raises(EngineError, match=r"docker inspect image x: the image ID is "):
        engine.image_id("x")
    engine.client.images = _IdStore("sha256:" + "e" * 64)
    assert engine.image_id("x") == "sha256:" + "e" * 64
