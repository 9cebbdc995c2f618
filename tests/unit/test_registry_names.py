"""Where references live: API hosts, Hub's library/ prefix, loopback, registries.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.names import (
    Endpoint,
    Source,
    conf_files,
    endpoint,
    is_loopback,
    load_confs,
    parse_registries_conf,
    pull_sources,
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
        registry=registry, host=host, repository=repository, scheme=scheme
    )
    (only,) = pull_sources(ref, confs=[])
    assert (only.host, only.repository, only.scheme, only.mirror) == (host, repository, scheme,
                                                                       False)  # fmt: skip


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


def _locations(ref: str, conf: str) -> list[str]:
    return [s.location for s in pull_sources(ref, confs=parse_registries_conf(conf, "t.conf"))]


def test_registries_conf_mirrors_and_insecure() -> None:
    confs = parse_registries_conf(CONF, "test.conf")
    assert endpoint("registry.internal:8443/team/app:2", confs=confs).scheme == "http"
    hub = pull_sources("ubuntu:24.04", confs=confs)
    assert [s.location for s in hub] == [
        "mirror.local:5000/hub/library/ubuntu",
        "mirror2.example.com/library/ubuntu",
        "docker.io/library/ubuntu",
    ]
    assert [s.scheme for s in hub] == ["http", "https", "https"]
    assert [s.mirror for s in hub] == [True, True, False]
    assert hub[-1].host == "registry-1.docker.io" and hub[0].host == "mirror.local:5000"
    assert [s.location for s in pull_sources("ghcr.io/a/b:1", confs=confs)] == ["ghcr.io/a/b"]


def test_prefix_is_matched_and_location_replaces_it() -> None:
    conf = """
[[registry]]
prefix = "docker.io/library"
location = "internal.example/hub"
insecure = true
[[registry]]
prefix = "docker.io/library/ubuntu"
location = "ubuntu-mirror.example:5000/u"
"""
    assert _locations("debian:12", conf) == ["internal.example/hub/debian"]
    (deb,) = pull_sources("debian:12", confs=parse_registries_conf(conf, "t.conf"))
    assert deb == Source(registry="internal.example", host="internal.example",
                         repository="hub/debian", scheme="http", mirror=False)  # fmt: skip
    assert _locations("ubuntu:24.04", conf) == ["ubuntu-mirror.example:5000/u"]  # longest wins
    assert _locations("docker.io/vllm/vllm-openai:v1", conf) == ["docker.io/vllm/vllm-openai"]
    assert _locations("docker.io/libraryx/a:1", conf) == ["docker.io/libraryx/a"]  # not a prefix
    # a push still goes to the reference's own registry: rewrites apply to pulls only
    confs = parse_registries_conf(conf, "t.conf")
    assert endpoint("debian:12", confs=confs).host == "registry-1.docker.io"


def test_a_wildcard_prefix_matches_subdomains() -> None:
    conf = '[[registry]]\nprefix = "*.corp.example"\ninsecure = true\n'
    (src,) = pull_sources("a.corp.example/team/app:1", confs=parse_registries_conf(conf, "t"))
    assert src.location == "a.corp.example/team/app" and src.scheme == "http"
    assert _locations("corp.example.org/x/y:1", conf) == ["corp.example.org/x/y"]


MIRRORED = """
[[registry]]
location = "quay.io"
[[registry.mirror]]
location = "digest-mirror.example"
pull-from-mirror = "digest-only"
[[registry.mirror]]
location = "tag-mirror.example"
pull-from-mirror = "tag-only"
[[registry.mirror]]
location = "any-mirror.example"

[[registry]]
location = "ghcr.io"
mirror-by-digest-only = true
[[registry.mirror]]
location = "ghcr-mirror.example"
"""
DIGEST = "sha256:" + "a" * 64


def test_digest_only_mirrors_never_answer_for_a_tag() -> None:
    assert _locations("quay.io/a/b:1", MIRRORED) == [
        "tag-mirror.example/a/b", "any-mirror.example/a/b", "quay.io/a/b"]  # fmt: skip
    assert _locations(f"quay.io/a/b@{DIGEST}", MIRRORED) == [
        "digest-mirror.example/a/b", "any-mirror.example/a/b", "quay.io/a/b"]  # fmt: skip
    assert _locations("ghcr.io/o/r:1", MIRRORED) == ["ghcr.io/o/r"]
    assert _locations(f"ghcr.io/o/r:1@{DIGEST}", MIRRORED) == ["ghcr-mirror.example/o/r",
                                                                "ghcr.io/o/r"]  # fmt: skip


def test_a_blocked_registry_is_an_error_naming_the_file() -> None:
    conf = '[[registry]]\nprefix = "docker.io/evil"\nlocation = "docker.io/evil"\nblocked = true\n'
    with pytest.raises(RegistryError) as info:
        pull_sources("docker.io/evil/app:1", confs=parse_registries_conf(conf, "/etc/x.conf"))
    assert "docker.io/evil is blocked in /etc/x.conf" in str(info.value)
    assert _locations("docker.io/good/app:1", conf) == ["docker.io/good/app"]


@pytest.mark.parametrize(("conf", "match"), [
    ('[[registry]]\ninsecure = true\n', "neither prefix nor location"),
    ('[[registry]]\nprefix = "a.example/x"\n', "has no location"),
    ('[[registry]]\nlocation = "https://a.example"\n', "has a URL scheme"),
    ('[[registry]]\nlocation = "a.example"\n[[registry.mirror]]\nlocation = "m"\n'
     'pull-from-mirror = "sometimes"\n', "is not one of all, digest-only, tag-only"),
    ('[[registry]]\nlocation = "a.example"\nmirror-by-digest-only = true\n'
     '[[registry.mirror]]\nlocation = "m"\npull-from-mirror = "all"\n', "keep one"),
    ('[[registry]]\nlocation = "a.example"\npull-from-mirror = "all"\n', "belongs in its"),
])  # fmt: skip
def test_tables_podman_refuses_are_named(conf: str, match: str) -> None:
    with pytest.raises(RegistryError, match=match) as info:
        parse_registries_conf(conf, "bad.conf")
    assert str(info.value).startswith("bad.conf: ")


def test_a_later_file_overrides_a_prefix(tmp_path: Path) -> None:
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text('[[registry]]\nlocation = "r.example:5000"\ninsecure = true\n')
    second.write_text('[[registry]]\nlocation = "r.example:5000"\ninsecure = false\n')
    confs = load_confs([first, second, tmp_path / "missing.conf"])
    assert endpoint("r.example:5000/a/b:1", confs=confs).scheme == "https"


def _conf_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    system, home = tmp_path / "etc", tmp_path / "home"
    (system / "registries.conf.d").mkdir(parents=True)
    (system / "registries.conf").write_text("")
    (system / "registries.conf.d" / "50-sys.conf").write_text("")
    user = home / ".config" / "containers"
    (user / "registries.conf.d").mkdir(parents=True)
    (user / "registries.conf.d" / "10-user.conf").write_text("")
    return system, home, user


def test_which_files_apply(tmp_path: Path) -> None:
    system, home, user = _conf_tree(tmp_path)
    env = {"HOME": str(home)}
    sys_d, user_d = system / "registries.conf.d" / "50-sys.conf", user / "registries.conf.d"
    # no user file: the system's, its drop-ins, then the user's drop-ins
    assert conf_files(env, system) == [system / "registries.conf", sys_d,
                                       user_d / "10-user.conf"]  # fmt: skip
    # CONTAINERS_REGISTRIES_CONF replaces the main file only: drop-ins still apply (podman 4.3)
    override = tmp_path / "mine.conf"
    assert conf_files({**env, "CONTAINERS_REGISTRIES_CONF": str(override)}, system) == [
        override, sys_d, user_d / "10-user.conf"]  # fmt: skip
    # a user file replaces the system's, and only the user's drop-ins follow it
    (user / "registries.conf").write_text("")
    assert conf_files(env, system) == [user / "registries.conf", user_d / "10-user.conf"]
    # containers/image reads $HOME/.config, not $XDG_CONFIG_HOME (skopeo 1.9, podman 4.3)
    assert conf_files({**env, "XDG_CONFIG_HOME": str(tmp_path / "x")}, system)[0] == (
        user / "registries.conf"
    )


def test_loopback_hosts_are_plain_http() -> None:
    assert all(map(is_loopback, ["127.0.0.1:5000", "localhost", "[::1]:5000", "[::1]"]))
    assert not any(map(is_loopback, ["127.0.0.2:5000", "localhost.example", "ghcr.io"]))


def test_a_broken_registries_conf_is_named() -> None:
    with pytest.raises(RegistryError, match=r"bad\.conf: not valid TOML"):
        parse_registries_conf("[[registry]\nlocation=", "bad.conf")


def test_a_bad_reference_names_the_fix() -> None:
    with pytest.raises(RegistryError, match="write it as registry/repository:tag"):
        endpoint("Not A Ref", confs=[])


def test_a_missing_override_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lockpipe.registry.names import host_confs

    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(tmp_path / "nope.conf"))
    with pytest.raises(RegistryError, match=r"CONTAINERS_REGISTRIES_CONF=.*nope\.conf: no such"):
        host_confs()
