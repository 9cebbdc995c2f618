"""Registry credentials, found where podman, skopeo and docker keep them.

Order, as containers-auth.json(5) gives it: the primary file
(``$REGISTRY_AUTH_FILE`` when set, in place of
``$XDG_RUNTIME_DIR/containers/auth.json``, itself ``/run/containers/$UID/auth.json``
without ``XDG_RUNTIME_DIR``), then ``$XDG_CONFIG_HOME/containers/auth.json``
(``~/.config/…``), ``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``,
and ``~/.dockercfg`` (the legacy format: the ``auths`` table alone). In each
file ``credHelpers[registry]`` wins, then an ``auths`` entry with ``auth`` or
``identitytoken``, then ``credsStore``. An ``auths`` key may name a namespace or a
repository (``host/ns[/repo]``, what ``podman login host/ns`` writes): the repository
asked for is matched most specific first (``host/ns/repo``, ``host/ns``, ``host``).
The first file that knows the repository answers. A secret never reaches a log, an
error message or a repr.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lockpipe.errors import RegistryError
from lockpipe.fs import read_utf8
from lockpipe.jsonshape import loads

HUB_KEYS = ("docker.io", "index.docker.io", "registry-1.docker.io")
HUB_SERVER = "https://index.docker.io/v1/"  # the key docker itself writes for Docker Hub
HELPER_TIMEOUT = 30.0
LEGACY = ".dockercfg"  # docker < 1.7: {registry: {auth, email}}, no "auths" around it


@dataclass(frozen=True, kw_only=True)
class Credential:
    """A user and secret (password or token) for one registry, and where they came from."""

    username: str
    secret: str = field(repr=False)
    identity_token: bool = False  # secret is an OAuth2 refresh token, not a password
    source: str  # the file or helper, for messages

    def __str__(self) -> str:
        return f"{self.username} (from {self.source})"


def auth_files(env: Mapping[str, str], uid: int | None = None) -> list[Path]:
    """The candidate files, in the order they are asked."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if env.get("REGISTRY_AUTH_FILE"):
        primary = Path(env["REGISTRY_AUTH_FILE"])
    elif env.get("XDG_RUNTIME_DIR"):
        primary = Path(env["XDG_RUNTIME_DIR"]) / "containers" / "auth.json"
    else:
        primary = Path(f"/run/containers/{os.getuid() if uid is None else uid}/auth.json")
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else home / ".config"
    docker = Path(env["DOCKER_CONFIG"]) if env.get("DOCKER_CONFIG") else home / ".docker"
    return [primary, config / "containers" / "auth.json", docker / "config.json",
            home / LEGACY]  # fmt: skip


def normalize(key: str) -> str:
    """An ``auths`` key as a registry name, with the namespace or repository it may name:
    no scheme, no /v1/ or /v2/, Hub aliases folded (``index.docker.io/org`` is
    ``docker.io/org``)."""
    for prefix in ("https://", "http://"):
        key = key.removeprefix(prefix)
    key = key.rstrip("/")
    for suffix in ("/v1", "/v2"):
        key = key.removesuffix(suffix)
    host, sep, rest = key.partition("/")
    return ("docker.io" if host in HUB_KEYS else host) + sep + rest


def scopes(reference: str) -> list[str]:
    """The ``auths`` keys that may hold ``reference``'s credential (``host[/ns…/repo]``),
    most specific first, as containers-auth.json(5) orders them: ``host/ns/repo``,
    ``host/ns``, ``host``."""
    parts = normalize(reference).split("/")
    return ["/".join(parts[:n]) for n in range(len(parts), 0, -1)]


def credentials(reference: str, env: Mapping[str, str] = os.environ) -> Credential | None:
    """The credential for ``reference`` (a registry, ``host/repository`` to include the
    namespace-scoped logins) from the first source that has one; None if none does."""
    keys = scopes(reference)
    for path in auth_files(env):
        doc = _read(path)
        if doc is not None and path.name == LEGACY:
            doc = {"auths": doc}
        if doc is not None:
            found = from_config(doc, keys[0], str(path), env)
            if found is not None:
                return found
    return None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        text = read_utf8(path, RegistryError)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise RegistryError(
            f"{path}: cannot be read ({exc.strerror}); fix its permissions"
        ) from None
    try:
        doc = loads(text)
    except ValueError:
        raise RegistryError(
            f"{path}: not valid JSON; fix it or log in again (podman login / docker login)"
        ) from None
    if not isinstance(doc, dict):
        raise RegistryError(f"{path}: not a JSON object; fix it or log in again")
    return doc


def from_config(
    doc: Mapping[str, Any], registry: str, source: str, env: Mapping[str, str] = os.environ
) -> Credential | None:
    """The credential one parsed auth.json / config.json holds for ``registry`` (a host,
    or ``host/repository``: its ``auths`` entries are matched most specific first;
    helpers answer for the host)."""
    keys = scopes(registry)
    host = keys[-1]
    helpers = doc.get("credHelpers") or {}
    for key, helper in helpers.items() if isinstance(helpers, dict) else ():
        if normalize(key) == host and isinstance(helper, str):
            return from_helper(helper, host, env)
    auths = doc.get("auths") or {}
    for scope in keys:
        for key, entry in auths.items() if isinstance(auths, dict) else ():
            if normalize(key) == scope and isinstance(entry, dict):
                found = from_entry(entry, source, key)
                if found is not None:
                    return found
    store = doc.get("credsStore")
    if isinstance(store, str) and store:
        return from_helper(store, host, env)
    return None


def from_entry(entry: Mapping[str, Any], source: str, key: str) -> Credential | None:
    """One ``auths`` entry: ``identitytoken`` first, else base64 ``user:password`` in ``auth``."""
    where = f"{source}: auths[{key!r}]"
    user = str(entry.get("username") or "")
    if entry.get("identitytoken"):
        return Credential(
            username=user or "<token>",
            secret=str(entry["identitytoken"]),
            identity_token=True,
            source=source,
        )
    auth = entry.get("auth")
    if not auth:
        if entry.get("password") and user:
            return Credential(username=user, secret=str(entry["password"]), source=source)
        return None
    try:
        user, sep, password = base64.b64decode(str(auth), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise RegistryError(
            f"{where}: 'auth' is not base64 of user:password; log in again"
        ) from None
    if not sep or not user:
        raise RegistryError(f"{where}: 'auth' does not hold user:password; log in again")
    return Credential(username=user, secret=password, source=source)


def from_helper(name: str, registry: str, env: Mapping[str, str]) -> Credential | None:
    """Run ``docker-credential-<name> get`` with the server on stdin.

    Not through ``lockpipe.cmd.call``: that echoes output and takes no stdin,
    and a helper's output is a secret.
    """
    tool = f"docker-credential-{name}"
    path = shutil.which(tool, path=env.get("PATH"))
    if path is None:
        raise RegistryError(
            f"{registry}: the credential helper {tool} is not on PATH; install it, or remove "
            f"{name!r} from credHelpers/credsStore"
        )
    server = HUB_SERVER if registry == "docker.io" else registry
    try:
        proc = subprocess.run(
            [path, "get"], input=server, capture_output=True, text=True,
            timeout=HELPER_TIMEOUT, env=dict(env), check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise RegistryError(
            f"{registry}: {tool} get did not answer in {HELPER_TIMEOUT:.0f} s; unlock its store"
        ) from None
    if proc.returncode != 0:
        if "not found" in (proc.stdout + proc.stderr).lower():
            return None
        raise RegistryError(
            f"{registry}: {tool} get failed (exit {proc.returncode}); run it by hand to see why"
        )
    try:
        answer = loads(proc.stdout)
        user, secret = str(answer["Username"]), str(answer["Secret"])
    except (ValueError, KeyError, TypeError):
        raise RegistryError(
            f"{registry}: {tool} get did not print JSON with Username and Secret; fix the helper"
        ) from None
    return Credential(username=user, secret=secret, identity_token=user == "<token>", source=tool)
