"""Where references live: API hosts, Hub's library/ prefix, loopback, registries.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import RegistryError
from pipeline.registry.names import (
    Endpoint,
    conf_files,
    endpoint,
    is_loopback,
    load_confs,
    mirror_insecure,
    parse_registries_conf,
)


@pytest.mark.parametrize(
    ("ref", "registry", "host", "repository", "scheme"),
    [
        ("ubuntu:24.04", "docker.io", "registry-1.docker.io", "library/ubuntu", "https"),
        ("docker.io/vllm/vllm-openai:v0.9", "docker.io", "registry-1.docker.io",
         "vllm/vllm-openai", "https"),
        ("index.docker.io/library/debian:12", "docker.io", "registry-1.docker.io",
         "library/debian", "https"),
        ("ghcr.io/ggml-org/llama.cpp:server", "ghcr.io", "ghcr.io", "ggml-org/llama.cpp", "https"),
        ("nvcr.io/nvidia/cuda:12.9.1-devel", "nvcr.io", "nvcr.io", "nvidia/cuda", "https"),
        ("quay.io/podman/stable:v5", "quay.io", "quay.io", "podman/stable", "https"),
        ("127.0.0.1:5000/lockpipe-test/busybox:1", "127.0.0.1:5000", "127.0.0.1:5000",
         "lockpipe-test/busybox", "http"),
        ("localhost/x/y:1", "localhost", "localhost", "x/y", "http"),
        ("registry.internal:8443/team/app:2", "registry.internal:8443", "registry.internal:8443",
         "team/app", "https"),
    ],
)  # fmt: skip
def test_endpoints(ref: str, registry: str, host: str, repository: str, scheme: str) -> None:
    assert endpoint(ref, confs=[]) == Endpoint(
        registry=registry, host=host, repository=repository, scheme=scheme, mirrors=()
    )


CONF = """
unqualified-search-registries = ["docker.io"]

[[registry]]
location = "registry.internal:8443"
insecure = true

[[registry]]
prefix = "docker.io"
location = "docker.io"
[[registry.mirror]]
location = "mirror.local:5000/hub"
insecure = true
[[registry.mirror]]
location = "mirror2.example.com"
"""


def test_registries_conf_mirrors_and_insecure() -> None:
    confs = parse_registries_conf(CONF, "test.conf")
    assert endpoint("registry.internal:8443/team/app:2", confs=confs).scheme == "http"
    hub = endpoint("ubuntu:24.04", confs=confs)
    assert hub.mirrors == (
        "mirror.local:5000/hub/library/ubuntu",
        "mirror2.example.com/library/ubuntu",
    )
    assert hub.scheme == "https" and hub.host == "registry-1.docker.io"
    assert mirror_insecure("mirror.local:5000/hub/library/ubuntu", confs)
    assert not mirror_insecure("mirror2.example.com/library/ubuntu", confs)
    assert endpoint("ghcr.io/a/b:1", confs=confs).mirrors == ()


def test_a_later_file_overrides_a_location_and_drop_ins_are_read(tmp_path: Path) -> None:
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text('[[registry]]\nlocation = "r.example:5000"\ninsecure = true\n')
    second.write_text('[[registry]]\nlocation = "r.example:5000"\ninsecure = false\n')
    confs = load_confs([first, second, tmp_path / "missing.conf"])
    assert endpoint("r.example:5000/a/b:1", confs=confs).scheme == "https"
    assert conf_files({"CONTAINERS_REGISTRIES_CONF": str(first)}) == [first]


def test_loopback_hosts_are_plain_http() -> None:
    assert all(map(is_loopback, ["127.0.0.1:5000", "localhost", "[::1]:5000", "[::1]"]))
    assert not any(map(is_loopback, ["127.0.0.2:5000", "localhost.example", "ghcr.io"]))


def test_a_broken_registries_conf_is_named() -> None:
    with pytest.raises(RegistryError, match=r"bad\.conf: not valid TOML"):
        parse_registries_conf("[[registry]\nlocation=", "bad.conf")


def test_a_bad_reference_names_the_fix() -> None:
    with pytest.raises(RegistryError, match="write it as registry/repository:tag"):
        endpoint("Not A Ref", confs=[])
