"""Logins scoped to a namespace or a repository (``auths`` keys ``host/ns[/repo]``, what
``podman login host/ns`` writes), looked up most specific first as containers-auth.json(5)
orders them, from literal auth files; no helper is run here."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from lockpipe.registry import creds

HOST = "127.0.0.1:5000"


def _auth(user: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:pw-{user}".encode()).decode()}


def _user(tmp_path: Path, auths: dict[str, dict[str, str]], reference: str) -> str | None:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"auths": auths}))
    env = {"HOME": str(tmp_path / "home"), "PATH": "/nonexistent", "REGISTRY_AUTH_FILE": str(path)}
    found = creds.credentials(reference, env)
    return found.username if found else None


def test_the_keys_asked_most_specific_first() -> None:
    """The order containers-auth.json(5) gives for my-registry.local/namespace/user/image."""
    assert creds.scopes("my-registry.local/namespace/user/image") == [
        "my-registry.local/namespace/user/image",
        "my-registry.local/namespace/user",
        "my-registry.local/namespace",
        "my-registry.local",
    ]
    assert creds.scopes(HOST) == [HOST]
    assert creds.scopes("index.docker.io/library/alpine")[-1] == "docker.io"


def test_a_namespace_login_is_found_for_its_repositories(tmp_path: Path) -> None:
    """Before: credentials('127.0.0.1:5000/org/app') found nothing for the key
    '127.0.0.1:5000/org' (looked up by the host alone)."""
    auths = {f"{HOST}/org": _auth("org-user")}
    assert _user(tmp_path, auths, f"{HOST}/org/app") == "org-user"
    assert _user(tmp_path, auths, f"{HOST}/org/team/app") == "org-user"
    assert _user(tmp_path, auths, f"{HOST}/other/app") is None
    assert _user(tmp_path, auths, f"{HOST}/organisation/app") is None  # a whole segment only
    assert _user(tmp_path, auths, HOST) is None


@pytest.mark.parametrize(
    ("reference", "user"),
    [
        (f"{HOST}/org/app", "repo-user"),
        (f"{HOST}/org/team/app", "team-user"),
        (f"{HOST}/org/other", "org-user"),
        (f"{HOST}/else/app", "host-user"),
        (HOST, "host-user"),
    ],
)
def test_the_most_specific_key_wins(tmp_path: Path, reference: str, user: str) -> None:
    auths = {HOST: _auth("host-user"), f"{HOST}/org": _auth("org-user"),
             f"{HOST}/org/team": _auth("team-user"),
             f"{HOST}/org/app": _auth("repo-user")}  # fmt: skip
    assert _user(tmp_path, auths, reference) == user


def test_key_shapes_are_read_as_before(tmp_path: Path) -> None:
    """A docker config's ``http://host`` and ``https://index.docker.io/v1/`` keys still
    answer for every repository of their host; a Hub alias with a namespace is folded."""
    assert _user(tmp_path, {f"http://{HOST}": _auth("a")}, f"{HOST}/org/app") == "a"
    hub = {"https://index.docker.io/v1/": _auth("hub")}
    assert _user(tmp_path, hub, "docker.io/library/alpine") == "hub"
    scoped = {"index.docker.io/me": _auth("me"), "docker.io": _auth("hub")}
    assert _user(tmp_path, scoped, "docker.io/me/app") == "me"
    assert _user(tmp_path, scoped, "docker.io/library/alpine") == "hub"


def test_an_empty_entry_under_a_helper_login_falls_back_to_the_host(tmp_path: Path) -> None:
    """An entry without ``auth`` (a helper's placeholder) is passed over, as before."""
    auths = {f"{HOST}/org": {}, HOST: _auth("host-user")}
    assert _user(tmp_path, auths, f"{HOST}/org/app") == "host-user"
