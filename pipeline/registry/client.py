"""A minimal OCI distribution client: resolve a tag to its manifest digest.

Speaks the registry v2 API with ``requests``: HEAD on the manifest, with the
anonymous Bearer token dance when the registry asks for it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import requests

from pipeline.errors import RegistryError
from pipeline.lock.refs import parse_ref

ACCEPT = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])  # fmt: skip
HUB_API = "registry-1.docker.io"


def _token(ref: str, challenge: str, timeout: float) -> str | None:
    """An anonymous Bearer token for ``challenge``; None when it asks for no Bearer token."""
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if not challenge.lower().startswith("bearer") or "realm" not in fields:
        return None
    realm = fields["realm"]
    params = {k: v for k, v in fields.items() if k in ("service", "scope")}
    try:
        resp = requests.get(realm, params=params, timeout=timeout)
    except requests.RequestException as exc:
        raise RegistryError(
            f"{ref}: token server {urlsplit(realm).netloc or realm} unreachable "
            f"({type(exc).__name__}); check the network, DNS or proxy (HTTPS_PROXY) from this host"
        ) from None
    return _token_from(ref, resp, realm, fields.get("scope", "this repository"))


def _token_from(ref: str, resp: requests.Response, realm: str, scope: str) -> str:
    if resp.status_code in (401, 403):
        raise RegistryError(
            f"{ref}: the token server at {realm} refused credentials ({resp.status_code}) "
            f"for {scope}; lockpipe asks anonymously, so the image must be public: check "
            "the name, or pin a public mirror of it"
        )
    if resp.status_code != 200:
        raise RegistryError(
            f"{ref}: the token server at {realm} answered {resp.status_code}; retry later, or pin "
            "the base from another registry"
        )
    try:
        body = resp.json()
    except ValueError:
        body = None
    token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise RegistryError(
            f"{ref}: the token server at {realm} answered without a token (no 'token' or "
            "'access_token' in its JSON); it is not a registry token server, or it is "
            "misconfigured: check the registry's auth settings"
        )
    return token


def manifest_digest(ref: str, *, insecure: bool = False, timeout: float = 30.0) -> str:
    """The digest the registry serves for ``ref``'s tag (``sha256:…``)."""
    image = parse_ref(ref)
    host = HUB_API if image.registry == "docker.io" else image.registry
    scheme = "http" if insecure else "https"
    url = (
        f"{scheme}://{host}/v2/{image.repository}/manifests/{image.digest or image.tag or 'latest'}"
    )
    headers = {"Accept": ACCEPT}
    resp = _head(ref, host, url, headers, timeout)
    if resp.status_code == 401:
        token = _token(ref, resp.headers.get("WWW-Authenticate", ""), timeout)
        if token:
            headers["Authorization"] = f"Bearer {token}"
            resp = _head(ref, host, url, headers, timeout)
    if resp.status_code == 404:
        raise RegistryError(f"{ref}: not found at {host} (wrong repository or tag?)")
    if resp.status_code != 200 or "Docker-Content-Digest" not in resp.headers:
        raise RegistryError(f"{ref}: {host} answered {resp.status_code} without a digest")
    return str(resp.headers["Docker-Content-Digest"])


def _head(
    ref: str, host: str, url: str, headers: dict[str, str], timeout: float
) -> requests.Response:
    try:
        return requests.head(url, headers=headers, timeout=timeout)
    except requests.RequestException as exc:
        raise RegistryError(
            f"{ref}: registry {host} unreachable ({type(exc).__name__}); check the network, "
            "DNS or proxy (HTTPS_PROXY) from this host"
        ) from None
