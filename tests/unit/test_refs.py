from __future__ import annotations

import pytest

from lockpipe.lock.refs import ReferenceError, parse_ref

D = "sha256:" + "0" * 64


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("ubuntu:24.04", "docker.io", "library/ubuntu", "24.04", None),
        (
            "nvidia/cuda:12.9.1-devel-ubuntu24.04",
            "docker.io",
            "nvidia/cuda",
            "12.9.1-devel-ubuntu24.04",
            None,
        ),
        (f"docker.io/library/debian:bookworm@{D}", "docker.io", "library/debian", "bookworm", D),
        (
            f"index.docker.io/vllm/vllm-openai:v0.29.0-cu129@{D}",
            "docker.io",
            "vllm/vllm-openai",
            "v0.29.0-cu129",
            D,
        ),
        ("127.0.0.1:5000/lockpipe/busybox:1", "127.0.0.1:5000", "lockpipe/busybox", "1", None),
        (
            "localhost/vllm/vllm-openai:frank-small",
            "localhost",
            "vllm/vllm-openai",
            "frank-small",
            None,
        ),
        (f"quay.io/org/img@{D}", "quay.io", "org/img", None, D),
        ("registry:5000/x", "registry:5000", "x", None, None),
    ],
)
def test_parse(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = parse_ref(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        digest,
    )


def test_pinned_keeps_tag_and_adds_digest() -> None:
    ref = parse_ref("ubuntu:24.04")
    assert ref.pinned(D) == f"docker.io/library/ubuntu:24.04@{D}"
    with pytest.raises(ReferenceError, match="no digest"):
        ref.pinned()


@pytest.mark.parametrize(
    "text", ["", " ubuntu", "Ubuntu:1", "ubuntu@sha256:abc", "ubuntu:bad/tag", "a//b", "ubuntu:-x"]
)
def test_invalid(text: str) -> None:
    with pytest.raises(ReferenceError):
        parse_ref(text)
