"""Registry auth against real distribution 2.8 registries: token (JWT x5c) and htpasswd.

Every digest is cross-checked with skopeo reading the same registry.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.client import Registry, resolve, resolve_many
from lockpipe.registry.creds import Credential, credentials
from tests.lockfactory import doc, make_repo
from tests.policy import scratch, unavailable
from tests.registry_servers import (
    PASSWORD,
    REFRESH_TOKEN,
    USER,
    FaultProxy,
    RegistryProc,
    Storage,
    TokenServer,
    htpasswd_auth,
    oci_layout,
    skopeo_copy,
    skopeo_raw_digest,
    token_auth,
)

pytestmark = pytest.mark.integration
CREDS = f"{USER}:{PASSWORD}"
GOOD = Credential(username=USER, secret=PASSWORD, source="test")
WRONG_PASSWORD = "not-the-password-42"
REPO = Path(__file__).resolve().parents[2]
BAD = Credential(username=USER, secret=WRONG_PASSWORD, source="test")


def _need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed")


FLEET = 8  # repositories on the token registry besides team/app: one token scope each


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TokenServer, str]]:
    """(token server, ref of an image pushed with skopeo) on a token-auth registry.

    ``team/fleet-0`` … ``team/fleet-7`` hold the same image under tag ``1``.
    """
    _need("docker-registry", "skopeo")
    with scratch(tmp_path_factory, "token-registry") as work:
        tokens = TokenServer(work)
        registry = RegistryProc(work / "registry", token_auth(tokens))
        try:
            ref = f"{registry.host}/team/app:1"
            layout = oci_layout(work / "layout", ["linux/amd64"], "1.0")
            skopeo_copy(layout, ref, creds=CREDS)
            for n in range(FLEET):
                skopeo_copy(layout, f"{registry.host}/team/fleet-{n}:1", creds=CREDS)
            yield tokens, ref
        finally:
            registry.stop()
            tokens.shutdown()
            tokens.server_close()


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The ref of an image on an htpasswd (Basic auth) registry."""
    _need("docker-registry", "skopeo", "htpasswd")
    with scratch(tmp_path_factory, "basic-registry") as work:
        registry = RegistryProc(work / "registry", htpasswd_auth(work))
        try:
            ref = f"{registry.host}/team/basic:1"
            skopeo_copy(oci_layout(work / "layout", ["linux/amd64"], "2.0"), ref, creds=CREDS)
            yield ref
        finally:
            registry.stop()


def _reg(ref: str, credential: Credential | None) -> Registry:
    return Registry(ref.split("/", 1)[0], scheme="http", credential=credential, timeout=10)


@pytest.mark.parametrize("field", ["token", "access_token"])
def test_the_bearer_flow_resolves_what_skopeo_sees(
    token_registry: tuple[TokenServer, str], field: str
) -> None:
    tokens, ref = token_registry
    tokens.field = field
    try:
        got = resolve(ref, registry=_reg(ref, GOOD))
    finally:
        tokens.field = "token"
    assert got.digest == skopeo_raw_digest(ref, creds=CREDS)
    assert got.version_label == "1.0" and got.available == ("linux/amd64",)


def test_an_expired_token_is_renewed_mid_run(token_registry: tuple[TokenServer, str]) -> None:
    tokens, ref = token_registry
    tokens.expires_in = 2  # cached for 1 s (the client renews 5 s early, at least 1 s)
    reg = _reg(ref, GOOD)
    try:
        before = len(tokens.requests)
        first = resolve(ref, registry=reg, platforms=())
        assert len(tokens.requests) == before + 1
        resolve(ref, registry=reg, platforms=())
        assert len(tokens.requests) == before + 1, "a live token was not reused"
        time.sleep(1.2)
        again = resolve(ref, registry=reg, platforms=())
    finally:
        tokens.expires_in = 300
    assert len(tokens.requests) == before + 2, "the expired token was not renewed"
    assert again.digest == first.digest


def test_a_cached_token_the_registry_rejects_is_renewed_once(
    token_registry: tuple[TokenServer, str],
) -> None:
    tokens, ref = token_registry
    reg = _reg(ref, GOOD)
    tokens.expires_in = -600  # signed already expired: the registry answers 401 to it
    stale = tokens.token(USER, ["repository:team/app:pull"])
    tokens.expires_in = 300
    reg._tokens["repository:team/app:pull"] = (stale, time.monotonic() + 300)
    expected = skopeo_raw_digest(ref, creds=CREDS)
    before = len(tokens.requests)
    assert resolve(ref, registry=reg, platforms=()).digest == expected
    assert len(tokens.requests) == before + 1, "no renewal, or more than one"


def test_a_wrong_password_reads_refused_and_leaks_nothing(
    token_registry: tuple[TokenServer, str],
) -> None:
    tokens, ref = token_registry
    with pytest.raises(RegistryError) as info:
        resolve(ref, registry=_reg(ref, BAD))
    message = str(info.value)
    assert "refused" in message and "unreachable" not in message
    assert tokens.realm in message and USER in message
    assert WRONG_PASSWORD not in message and PASSWORD not in message
    assert not any(token in message for token in tokens.issued)
    assert WRONG_PASSWORD not in repr(BAD)


def test_no_credentials_on_a_private_registry_reads_refused(
    token_registry: tuple[TokenServer, str],
) -> None:
    _, ref = token_registry
    with pytest.raises(RegistryError, match=r"refused credentials \(401\): anonymous access"):
        resolve(ref, registry=_reg(ref, None))


def test_basic_auth_with_htpasswd(basic_registry: str) -> None:
    got = resolve(basic_registry, registry=_reg(basic_registry, GOOD))
    assert got.digest == skopeo_raw_digest(basic_registry, creds=CREDS)
    assert got.version_label == "2.0"
    with pytest.raises(RegistryError) as info:
        resolve(basic_registry, registry=_reg(basic_registry, BAD))
    assert "refused" in str(info.value) and WRONG_PASSWORD not in str(info.value)
    with pytest.raises(RegistryError, match=r"asks for a user and password \(Basic\)"):
        resolve(basic_registry, registry=_reg(basic_registry, None))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No auth file of this machine's user is read: HOME and the rest point into tmp."""
    for name in ("REGISTRY_AUTH_FILE", "XDG_RUNTIME_DIR", "DOCKER_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the manifest cache too
    return tmp_path


def _auth(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode()


def test_credentials_from_registry_auth_file(
    token_registry: tuple[TokenServer, str], clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ref = token_registry
    host = ref.split("/", 1)[0]
    auth = clean_env / "auth.json"
    auth.write_text(json.dumps({"auths": {host: {"auth": _auth(USER, PASSWORD)}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth))
    assert resolve(ref).digest == skopeo_raw_digest(ref, creds=CREDS)


def test_credentials_from_a_docker_config(
    basic_registry: str, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = basic_registry.split("/", 1)[0]
    config = clean_env / "docker"
    config.mkdir()
    (config / "config.json").write_text(
        json.dumps({"auths": {f"http://{host}": {"auth": _auth(USER, PASSWORD)}}})
    )
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    assert resolve(basic_registry).digest == skopeo_raw_digest(basic_registry, creds=CREDS)


def test_credentials_from_a_credential_helper(
    token_registry: tuple[TokenServer, str], clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ref = token_registry
    host = ref.split("/", 1)[0]
    bin_dir, asked = clean_env / "bin", clean_env / "asked"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-test"
    answer = json.dumps({"ServerURL": host, "Username": USER, "Secret": PASSWORD})
    helper.write_text(f"#!/bin/sh\n[ \"$1\" = get ] || exit 3\ncat > {asked}\necho '{answer}'\n")
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    config = clean_env / "docker"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"credHelpers": {host: "test"}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    assert resolve(ref).digest == skopeo_raw_digest(ref, creds=CREDS)
    assert asked.read_text() == host, "the helper was not asked for this registry"


def _helper(bin_dir: Path, name: str, body: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``docker-credential-<name>`` script, first on PATH."""
    bin_dir.mkdir(exist_ok=True)
    helper = bin_dir / f"docker-credential-{name}"
    helper.write_text(f'#!/bin/sh\n[ "$1" = get ] || exit 3\n{body}')
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def _docker_config(root: Path, doc: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    config = root / "docker"
    config.mkdir()
    (config / "config.json").write_text(json.dumps(doc))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))


def test_credentials_from_a_creds_store(
    token_registry: tuple[TokenServer, str], clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, ref = token_registry
    host, asked = ref.split("/", 1)[0], clean_env / "asked"
    answer = json.dumps({"ServerURL": host, "Username": USER, "Secret": PASSWORD})
    _helper(clean_env / "bin", "store", f"cat > {asked}\necho '{answer}'\n", monkeypatch)
    _docker_config(clean_env, {"auths": {host: {}}, "credsStore": "store"}, monkeypatch)
    assert resolve(ref).digest == skopeo_raw_digest(ref, creds=CREDS)
    assert asked.read_text() == host, "the store was not asked for this registry"


def test_a_store_without_the_credential_means_anonymous(
    registry: str, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docker-credential-helpers answer "credentials not found" (exit 1) for an unknown server."""
    ref = f"{registry}/lockpipe-test/registry-anon:{clean_env.name[-8:].lower()}"
    skopeo_copy(oci_layout(clean_env / "layout", ["linux/amd64"], "3.0"), ref)
    _helper(clean_env / "bin", "store",
            "echo 'credentials not found in native keychain'\nexit 1\n", monkeypatch)  # fmt: skip
    _docker_config(clean_env, {"credsStore": "store"}, monkeypatch)
    assert credentials(registry) is None
    got = resolve(ref)
    assert got.digest == skopeo_raw_digest(ref) and got.version_label == "3.0"


def test_an_identity_token_is_exchanged_for_an_access_token(
    token_registry: tuple[TokenServer, str],
) -> None:
    tokens, ref = token_registry
    token = Credential(username="<token>", secret=REFRESH_TOKEN, identity_token=True,
                       source="test")  # fmt: skip
    before = len(tokens.posts)
    got = resolve(ref, registry=_reg(ref, token))
    assert got.digest == skopeo_raw_digest(ref, creds=CREDS)
    form = tokens.posts[before]
    assert form["grant_type"] == "refresh_token" and form["refresh_token"] == REFRESH_TOKEN
    assert form["scope"] == "repository:team/app:pull" and form["client_id"]
    stale = Credential(username="<token>", secret="revoked-token-77", identity_token=True,
                       source="test")  # fmt: skip
    with pytest.raises(RegistryError) as info:
        resolve(ref, registry=_reg(ref, stale))
    assert "refused" in str(info.value) and "revoked-token-77" not in str(info.value)
    assert REFRESH_TOKEN not in str(info.value)


def test_an_identity_token_from_an_auth_file(
    token_registry: tuple[TokenServer, str], clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens, ref = token_registry
    host = ref.split("/", 1)[0]
    auth = clean_env / "auth.json"
    auth.write_text(json.dumps({"auths": {host: {"identitytoken": REFRESH_TOKEN}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth))
    before = len(tokens.posts)
    assert resolve(ref).digest == skopeo_raw_digest(ref, creds=CREDS)
    assert len(tokens.posts) == before + 1, "the identity token was not exchanged"


def test_registry_auth_file_does_not_hide_the_xdg_config_file(
    basic_registry: str, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """containers-auth.json(5): the override replaces the primary file; the search goes on."""
    host = basic_registry.split("/", 1)[0]
    override = clean_env / "override.json"
    override.write_text(json.dumps({"auths": {"other.example": {"auth": _auth("x", "y")}}}))
    config = clean_env / "xdg" / "containers"
    config.mkdir(parents=True)
    entry = {"auth": _auth(USER, PASSWORD)}
    (config / "auth.json").write_text(json.dumps({"auths": {host: entry}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(override))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(clean_env / "xdg"))
    assert resolve(basic_registry).digest == skopeo_raw_digest(basic_registry, creds=CREDS)
    # Not cross-checked with skopeo's own lookup: skopeo 1.9 (Debian 12) searches on past
    # the override as the man page says, skopeo 1.18 (Debian 13) reads the override alone
    # (measured in the Debian 13 rehearsal; docs/registry.md).


def test_resolve_many_shares_expiring_tokens_across_threads(
    token_registry: tuple[TokenServer, str], clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 references, 8 threads, tokens alive 1 s and every request 0.2 s away."""
    tokens, ref = token_registry
    upstream = ref.split("/", 1)[0]
    proxy = FaultProxy(upstream)
    proxy.delay = 0.2
    auth = clean_env / "auth.json"
    auth.write_text(json.dumps({"auths": {proxy.host: {"auth": _auth(USER, PASSWORD)}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth))
    refs = [f"{proxy.host}/team/fleet-{n % FLEET}:1" for n in range(2 * FLEET)]
    tokens.expires_in = 2  # cached 1 s: each scope's token expires during the run
    before = len(tokens.requests)
    try:
        results = resolve_many(refs, concurrency=8)
    finally:
        tokens.expires_in = 300
        proxy.shutdown()
        proxy.server_close()
    errors = [r for r in results if isinstance(r, RegistryError)]
    assert not errors, errors[0]
    expected = {n: skopeo_raw_digest(f"{upstream}/team/fleet-{n}:1", creds=CREDS)
                for n in range(FLEET)}  # fmt: skip
    for n, got in enumerate(results):
        assert not isinstance(got, RegistryError)
        assert got.digest == expected[n % FLEET] and got.version_label == "1.0"
    asked = len(tokens.requests) - before
    sent = len(proxy.seen)
    assert asked > FLEET, "no token was renewed mid-run"
    assert asked < sent, f"{asked} tokens for {sent} requests: the cache was not shared"


# --- the token server through the CLI: retried, its credentials kept to its own host -------

ZERO = "sha256:" + "0" * 64


def _refresh_cli(
    ref: str, tmp: Path, auth: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``lockpipe refresh-digests --kind bases`` on a lock pinning ``ref`` (a zero digest),
    the credentials of ``auth`` (an auth file's entry for its host); the lock's path."""
    lock = make_repo(tmp / "checkout", doc(bases={"busybox": {"ref": ref, "digest": ZERO}}))
    auth_file = tmp / "auth.json"
    auth_file.write_text(json.dumps({"auths": {ref.split("/", 1)[0]: auth}}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "REGISTRY_AUTH_FILE": str(auth_file),
           "HOME": str(tmp / "home"), "XDG_CACHE_HOME": str(tmp / "cache"),
           "LOCKPIPE_CACHE": str(tmp / "cache" / "lockpipe")}  # fmt: skip
    for name in ("XDG_RUNTIME_DIR", "DOCKER_CONFIG", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    result = subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock),
         "--kind", "bases"],
        cwd=REPO, text=True, capture_output=True, check=False, env=env,
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return result, lock


BASIC = {"auth": _auth(USER, PASSWORD)}
IDENTITY = {"identitytoken": REFRESH_TOKEN}


@pytest.mark.parametrize("auth", [BASIC, IDENTITY], ids=["basic", "refresh-token"])
def test_a_token_server_failing_once_is_retried_after_what_it_asks(
    token_registry: tuple[TokenServer, str], tmp_path: Path, auth: dict[str, Any]
) -> None:
    tokens, ref = token_registry
    tokens.fail_status, tokens.fail_times, tokens.retry_after = 503, 1, "1"
    before = len(tokens.requests)
    started = time.monotonic()
    try:
        result, lock = _refresh_cli(ref, tmp_path, auth)
    finally:
        tokens.fail_times = 0
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 1.0, "the Retry-After of 1 s was not waited"
    method = "POST" if auth is IDENTITY else "GET"
    asked = tokens.requests[before:]  # the run asks for its one scope more than once
    assert asked[0] == f"{method} answered 503", asked
    assert asked[1:] and set(asked[1:]) == {"repository:team/app:pull"}, asked
    pinned = json.loads(lock.read_text())["bases"]["busybox"]["digest"]
    assert pinned == skopeo_raw_digest(ref, creds=CREDS)


def test_a_token_server_that_always_fails_is_one_error_after_bounded_tries(
    token_registry: tuple[TokenServer, str], tmp_path: Path
) -> None:
    tokens, ref = token_registry
    tokens.fail_status, tokens.fail_times, tokens.retry_after = 500, 10_000, "0"
    before = len(tokens.requests)
    try:
        result, lock = _refresh_cli(ref, tmp_path, BASIC)
    finally:
        tokens.fail_times = 0
    assert result.returncode == RegistryError.return_code, result.stderr
    assert f"the token server at {tokens.realm} answered 500 after 5 tries" in result.stderr
    assert "retry later, or pin the base from another registry" in result.stderr
    assert tokens.requests[before:] == ["GET answered 500"] * 5
    assert json.loads(lock.read_text())["bases"]["busybox"]["digest"] == ZERO
    assert PASSWORD not in result.stderr


@pytest.mark.parametrize("auth", [BASIC, IDENTITY], ids=["basic", "refresh-token"])
def test_a_token_server_redirecting_elsewhere_gets_no_credentials_there(
    token_registry: tuple[TokenServer, str], tmp_path: Path, auth: dict[str, Any]
) -> None:
    """The token server sends its request on to another host (127.0.0.2): neither the
    password nor the refresh token (a POST's body) goes there."""
    tokens, ref = token_registry
    other = Storage(f"127.0.0.1:{tokens.server_address[1]}", authorization=None)
    relay = "relay:s3cret-relay@"  # the Location's own login: not shown in the error either
    there = other.url.replace("http://", f"http://{relay}") if auth is IDENTITY else other.url
    tokens.redirect, tokens.redirect_times = there, 1
    try:
        result, lock = _refresh_cli(ref, tmp_path, auth)
    finally:
        tokens.redirect_times = 0
        other.stop()
    assert result.returncode == RegistryError.return_code, result.stderr
    assert all(authorization is None for _, _, authorization in other.seen), other.seen
    assert f"the token server at {tokens.realm}" in result.stderr
    assert other.host in result.stderr and "refused credentials" not in result.stderr
    assert "s3cret-relay" not in result.stderr
    if auth is IDENTITY:
        assert other.seen == [], "the refresh token (the POST's body) was sent to another host"
        assert REFRESH_TOKEN not in result.stderr
    else:
        assert [method for method, _, _ in other.seen] == ["GET"]
        assert PASSWORD not in result.stderr
    assert json.loads(lock.read_text())["bases"]["busybox"]["digest"] == ZERO
