"""A minimal OCI distribution client: resolve a tag to its manifest digest.

Speaks the registry v2 API with ``requests``: HEAD on the manifest, with the
anonymous Bearer token dance when the registry asks for it.
"""

from __future__ import annotations

import re

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


def _token(challenge: str, timeout: float) -> str | None:
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if not challenge.lower().startswith("bearer") or "realm" not in fields:
        return None
    params = {k: v for k, v in fields.items() if k in ("service", "scope")}
    resp = requests.get(fields["realm"], params=params, timeout=timeout)
    resp.raise_for_status()
    body = resp.json()
    return str(body.get("token") or body.get("access_token"))


def manifest_digest(ref: str, *, insecure: bool = False, timeout: float = 30.0) -> str:
    """The digest the registry serves for ``ref``'s tag (``sha256:…``)."""
    image = parse_ref(ref)
    host = HUB_API if image.registry == "docker.io" else image.registry
    scheme = "http" if insecure else "https"
    url = (
        f"{scheme}://{host}/v2/{image.repository}/manifests/{image.digest or image.tag or 'latest'}"
    )
    headers = {"Accept": ACCEPT}
    try:
        resp = requests.head(url, headers=headers, timeout=timeout)
        if resp.status_code == 401:
            token = _token(resp.headers.get("WWW-Authenticate", ""), timeout)
            if token:
                headers["Authorization"] = f"Bearer {token}"
                resp = requests.head(url, headers=headers, timeout=timeout)
    except requests.RequestException as exc:
        raise RegistryError(
            f"{ref}: registry {host} unreachable ({type(exc).__name__}); check the network, "
            "DNS or proxy (HTTPS_PROXY) from this host"
        ) from None
    if resp.status_code == 404:
        raise RegistryError(f"{ref}: not found at {host} (wrong repository or tag?)")
    if resp.status_code != 200 or "Docker-Content-Digest" not in resp.headers:
        raise RegistryError(f"{ref}: {host} answered {resp.status_code} without a digest")
    return str(resp.headers["Docker-Content-Digest"])
