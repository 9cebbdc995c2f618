"""A login scoped to a namespace (``podman login HOST/team`` writes the ``auths`` key
``HOST/team``) logs in to a real distribution 2.8 registry with htpasswd (Basic) auth,
while the host-wide key of the same file holds a wrong password: the repository asked
for picks its key, most specific first (containers-auth.json(5))."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.client import resolve, resolve_many
from lockpipe.registry.tags import list_tags
from tests.integration.test_registry_auth import basic_registry  # noqa: F401 (shared)
from tests.registry_servers import (
    PASSWORD,
    USER,
    skopeo_raw_digest,
)

pytestmark = pytest.mark.integration
CREDS = f"{USER}:{PASSWORD}"


@pytest.fixture
def ref(basic_registry: str) -> str:  # noqa: F811 (the fixture imported above)
    """``HOST/team/basic:1`` on test_registry_auth's htpasswd registry."""
    return basic_registry


def _auth(user: str, password: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture
def logins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An auth file of this test alone (no file of this machine's user is read)."""
    for name in ("XDG_RUNTIME_DIR", "DOCKER_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "auth.json"
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(path))
    return path


def test_a_namespace_scoped_login_logs_in(ref: str, logins: Path) -> None:
    """Before: 'refused credentials (401): the credentials of testuser (from …auth.json)'
    (the host-wide key's wrong password was sent, the HOST/team key ignored)."""
    host = ref.split("/", 1)[0]
    logins.write_text(json.dumps({"auths": {host: _auth(USER, "wrong-password-1"),
                                            f"{host}/team": _auth(USER, PASSWORD)}}))  # fmt: skip
    assert resolve(ref).digest == skopeo_raw_digest(ref, creds=CREDS)
    assert list_tags(ref) == ["1"]


def test_each_repository_of_one_host_gets_its_own_login(ref: str, logins: Path) -> None:
    """One run resolving two repositories of the host shares no login between them: the
    one outside ``team`` gets the host-wide key (wrong here), and is refused."""
    host = ref.split("/", 1)[0]
    auths = {host: _auth(USER, "wrong-password-2"), f"{host}/team/basic": _auth(USER, PASSWORD)}
    logins.write_text(json.dumps({"auths": auths}))
    got, other = resolve_many([ref, f"{host}/elsewhere/app:1"], platforms=())
    assert not isinstance(got, RegistryError)
    assert got.digest == skopeo_raw_digest(ref, creds=CREDS)
    assert isinstance(other, RegistryError) and "refused" in str(other)
    assert "wrong-password" not in str(other)
