"""Pure parsers: WWW-Authenticate, rate limits, platform selection (Retry-After and backoff
are every client's: tests/unit/test_http.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry import platforms as pf
from lockpipe.registry.cache import BlobCache, default_root
from lockpipe.registry.headers import (
    Challenge,
    parse_challenge,
    parse_challenges,
    ratelimit_remaining,
)


def test_bearer_challenges() -> None:
    got = parse_challenge(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
        'scope="repository:library/ubuntu:pull"'
    )
    assert got == Challenge("bearer", {"realm": "https://auth.docker.io/token",
                                       "service": "registry.docker.io",
                                       "scope": "repository:library/ubuntu:pull"})  # fmt: skip
    spaced = parse_challenge('Bearer realm = "https://x/t" , error="insufficient_scope"')
    assert spaced is not None and spaced.params["realm"] == "https://x/t"
    assert spaced.params["error"] == "insufficient_scope"
    assert parse_challenge('Basic realm="Registry Realm"') == Challenge(
        "basic", {"realm": "Registry Realm"}
    )
    assert parse_challenge("") is None
    quoted = parse_challenge(r'Bearer realm="https://x/t?a=\"b\""')
    assert quoted is not None and quoted.params["realm"] == 'https://x/t?a="b"'


def test_two_challenges_in_one_header_are_read_apart_and_bearer_is_answered() -> None:
    """requests joins two WWW-Authenticate headers with ', ': Basic's realm replaced
    Bearer's ('Registry' as the token server), and the token flow broke (issue 18)."""
    both = 'Bearer realm="https://a/token",service="reg", Basic realm="Registry"'
    assert parse_challenges(both) == [
        Challenge("bearer", {"realm": "https://a/token", "service": "reg"}),
        Challenge("basic", {"realm": "Registry"}),
    ]
    assert parse_challenge(both) == parse_challenges(both)[0]


@pytest.mark.parametrize(
    "header",
    [
        'Bearer realm="https://a/token",service="reg", Basic realm="Registry"',
        'Basic realm="Registry", Bearer realm="https://a/token",service="reg"',
    ],
)
def test_the_bearer_challenge_is_answered_whatever_its_place(header: str) -> None:
    assert parse_challenge(header) == Challenge(
        "bearer", {"realm": "https://a/token", "service": "reg"}
    )


def test_ratelimit_remaining() -> None:
    assert ratelimit_remaining("76;w=21600") == 76
    assert ratelimit_remaining("bogus") is None and ratelimit_remaining(None) is None


A, B, C, D = ("sha256:" + letter * 64 for letter in "abcd")
INDEX = {
    "mediaType": pf.OCI_INDEX,
    "manifests": [
        {"digest": A, "platform": {"os": "linux", "architecture": "amd64"}},
        {"digest": B, "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
        {"digest": C, "platform": {"os": "unknown", "architecture": "unknown"}},
        {"digest": D, "platform": {"os": "linux", "architecture": "arm", "variant": "v7"}},
    ],
}


def test_platform_selection() -> None:
    entries = pf.entries("r", INDEX)
    assert [n for n, _ in entries] == ["linux/amd64", "linux/arm64/v8", "linux/arm/v7"]
    got = pf.select("r", entries, ["linux/amd64", "linux/arm64", "linux/arm/v7"])
    assert got == {"linux/amd64": A, "linux/arm64": B, "linux/arm/v7": D}
    assert pf.select("r", entries, ["linux/arm64/v8"]) == {"linux/arm64/v8": B}
    with pytest.raises(pf.PlatformMissing) as info:
        pf.select("r", entries, ["linux/arm/v6"])  # a v6 host cannot run v7
    assert "no linux/arm/v6 image in its index" in str(info.value)
    assert "available: linux/amd64, linux/arm64/v8, linux/arm/v7" in str(info.value)
    assert info.value.platform == "linux/arm/v6"
    assert info.value.available == ("linux/amd64", "linux/arm64/v8", "linux/arm/v7")
    assert isinstance(info.value, RegistryError) and info.value.return_code == 18


def _index(*platforms: str) -> list[tuple[str, str]]:
    return [(p, f"sha256:{p.replace('/', '-')}") for p in platforms]


def test_an_exact_platform_wins_over_an_earlier_variant() -> None:
    """containers/image's matcher: the best-ranked candidate, not the first entry listed."""
    amd = _index("linux/amd64/v3", "linux/amd64")
    assert pf.select("r", amd, ["linux/amd64"]) == {"linux/amd64": "sha256:linux-amd64"}
    assert pf.select("r", amd, ["linux/amd64/v3"]) == {"linux/amd64/v3": "sha256:linux-amd64-v3"}
    assert pf.select("r", _index("linux/amd64"), ["linux/amd64/v2"]) == {
        "linux/amd64/v2": "sha256:linux-amd64"}  # fmt: skip
    with pytest.raises(pf.PlatformMissing):  # a v3-only build does not run on every amd64 host
        pf.select("r", _index("linux/amd64/v3"), ["linux/amd64"])
    arm64 = _index("linux/arm64/v8")
    assert pf.select("r", arm64, ["linux/arm64"]) == {"linux/arm64": "sha256:linux-arm64-v8"}
    assert pf.select("r", _index("linux/arm64"), ["linux/arm64/v8"]) == {
        "linux/arm64/v8": "sha256:linux-arm64"}  # fmt: skip
    arm = _index("linux/arm/v6", "linux/arm/v7")
    assert pf.select("r", arm, ["linux/arm/v7"]) == {"linux/arm/v7": "sha256:linux-arm-v7"}
    assert pf.select("r", arm, ["linux/arm/v6"]) == {"linux/arm/v6": "sha256:linux-arm-v6"}
    assert pf.wanted("linux/arm/v7") == ["linux/arm/v7", "linux/arm/v6", "linux/arm/v5",
                                         "linux/arm"]  # fmt: skip
    with pytest.raises(RegistryError, match="write it as os/arch or os/arch/variant"):
        pf.wanted("amd64")


def test_a_single_manifest_is_named_as_such() -> None:
    with pytest.raises(pf.PlatformMissing) as info:
        pf.select("r", [("linux/amd64", "sha256:x")], ["linux/arm64"], index=False)
    message = str(info.value)
    assert "a single-platform image for linux/amd64, not linux/arm64" in message
    assert "index (" not in message and "in its index" not in message
    assert pf.config_platform({"architecture": "amd64"}) == "unknown/amd64"
    assert pf.config_platform({}) == "unknown/unknown"
    with pytest.raises(pf.PlatformMissing, match="config names no os/architecture") as none:
        pf.select("r", [(pf.config_platform({}), "sha256:x")], ["linux/amd64"], index=False)
    assert "None" not in str(none.value)


def test_media_types_and_digests() -> None:
    body = json.dumps(INDEX).encode()
    assert pf.is_index(json.loads(body), None)
    assert pf.media_type({"manifests": []}, None) == pf.OCI_INDEX
    assert pf.media_type({}, pf.DOCKER_MANIFEST + "; charset=utf-8") == pf.DOCKER_MANIFEST
    pf.check_digest("r", body, pf.sha256_digest(body))
    with pytest.raises(RegistryError, match="bytes do not match their digest"):
        pf.check_digest("r", body + b" ", pf.sha256_digest(body))
    assert (
        pf.version_label({"config": {"Labels": {"org.opencontainers.image.version": "1"}}}) == "1"
    )
    assert pf.version_label({"config": {"Labels": None}}) is None


def test_the_blob_cache_answers_only_with_bytes_that_match(tmp_path: Path) -> None:
    cache = BlobCache(tmp_path)
    data = b'{"schemaVersion":2}'
    digest = pf.sha256_digest(data)
    assert cache.get(digest) is None
    cache.put(digest, data)
    assert cache.get(digest) == data
    cache.put(pf.sha256_digest(b"x"), b"not x")  # wrong name: not kept
    assert cache.get(pf.sha256_digest(b"x")) is None
    (tmp_path / "sha256" / digest.removeprefix("sha256:")).write_bytes(b"damaged")
    assert cache.get(digest) is None
    assert not (tmp_path / "sha256" / digest.removeprefix("sha256:")).exists()
    assert default_root({"XDG_CACHE_HOME": "/c"}) == Path("/c/lockpipe/registry")
    assert default_root({"LOCKPIPE_CACHE": "/p", "HOME": "/h"}) == Path(
        "/h/.cache/lockpipe/registry"
    )  # LOCKPIPE_* is read by cli/options.py alone: the CLI passes --cache
    assert default_root({"HOME": "/h"}) == Path("/h/.cache/lockpipe/registry")
