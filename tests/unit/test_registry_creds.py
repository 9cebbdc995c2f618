"""Credential sources and their order, parsed from literal files; no helper is run here."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.creds import auth_files, credentials, from_config, normalize


def _auth(pair: str) -> str:
    return base64.b64encode(pair.encode()).decode()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": "/nonexistent", **extra}


def test_the_order_of_files(tmp_path: Path) -> None:
    """containers-auth.json(5): REGISTRY_AUTH_FILE replaces the primary (runtime) file."""
    home = tmp_path / "home"
    env = _env(tmp_path, REGISTRY_AUTH_FILE="/a.json", XDG_RUNTIME_DIR="/run/u",
               DOCKER_CONFIG="/d")  # fmt: skip
    rest = [home / ".config/containers/auth.json", Path("/d/config.json"), home / ".dockercfg"]
    assert auth_files(env) == [Path("/a.json"), *rest]
    del env["REGISTRY_AUTH_FILE"]
    assert auth_files(env) == [Path("/run/u/containers/auth.json"), *rest]
    bare = auth_files(_env(tmp_path), uid=1234)
    assert bare == [Path("/run/containers/1234/auth.json"), home / ".config/containers/auth.json",
                    home / ".docker/config.json", home / ".dockercfg"]  # fmt: skip
    xdg = auth_files(_env(tmp_path, XDG_CONFIG_HOME="/x"), uid=0)
    assert xdg[1] == Path("/x/containers/auth.json")


def test_xdg_config_home_and_the_legacy_dockercfg_are_read(tmp_path: Path) -> None:
    config = tmp_path / "xdg" / "containers"
    config.mkdir(parents=True)
    (config / "auth.json").write_text(json.dumps({"auths": {"r.io": {"auth": _auth("x:y")}}}))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".dockercfg").write_text(json.dumps(
        {"https://old.io": {"auth": _auth("o:p"), "email": "a@b"}}))  # fmt: skip
    env = _env(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"),
               XDG_RUNTIME_DIR=str(tmp_path / "run"))  # fmt: skip
    got = credentials("r.io", env)
    assert got is not None and got.username == "x" and got.source == str(config / "auth.json")
    old = credentials("old.io", env)
    assert old is not None and (old.username, old.secret) == ("o", "p")


def test_the_first_file_that_knows_the_registry_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first.json", tmp_path / "docker"
    first.write_text(json.dumps({"auths": {"other.io": {"auth": _auth("x:y")}}}))
    second.mkdir()
    (second / "config.json").write_text(json.dumps({"auths": {
        "https://index.docker.io/v1/": {"auth": _auth("hub:pw")},
        "ghcr.io": {"auth": _auth("gh:pat:with:colons")}}}))  # fmt: skip
    env = _env(tmp_path, REGISTRY_AUTH_FILE=str(first), DOCKER_CONFIG=str(second))
    hub = credentials("docker.io", env)
    assert hub is not None and (hub.username, hub.secret) == ("hub", "pw")
    gh = credentials("ghcr.io", env)
    assert gh is not None and gh.secret == "pat:with:colons" and "pat" not in repr(gh)
    other = credentials("other.io", env)
    assert other is not None and other.source == str(first)
    assert credentials("quay.io", env) is None


def test_an_identity_token_is_kept_as_such() -> None:
    cred = from_config({"auths": {"r.io": {"identitytoken": "refresh-xyz"}}}, "r.io", "f")
    assert cred is not None and cred.identity_token and cred.secret == "refresh-xyz"
    assert "refresh-xyz" not in repr(cred) and "refresh-xyz" not in str(cred)


def test_a_missing_helper_is_named_with_the_fix(tmp_path: Path) -> None:
    doc = {"credHelpers": {"r.io": "nosuch"}, "auths": {"r.io": {"auth": _auth("a:b")}}}
    with pytest.raises(RegistryError, match="docker-credential-nosuch is not on PATH"):
        from_config(doc, "r.io", "f", _env(tmp_path))
    plain = from_config({"auths": {"r.io": {}}, "credsStore": ""}, "r.io", "f", _env(tmp_path))
    assert plain is None


@pytest.mark.parametrize(("text", "match"), [
    ("{not json", "not valid JSON"),
    (json.dumps({"auths": {"r.io": {"auth": "@@@"}}}), "not base64"),
    (json.dumps({"auths": {"r.io": {"auth": _auth("nocolon")}}}), "does not hold user:password"),
])  # fmt: skip
def test_broken_files_are_named(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "auth.json"
    path.write_text(text)
    with pytest.raises(RegistryError, match=match) as info:
        credentials("r.io", _env(tmp_path, REGISTRY_AUTH_FILE=str(path)))
    assert str(path) in str(info.value)


def test_normalize() -> None:
    assert normalize("https://index.docker.io/v1/") == "docker.io"
    assert normalize("http://127.0.0.1:5000") == "127.0.0.1:5000"
    assert normalize("registry-1.docker.io") == "docker.io"
