"""Resolve image references to digests, with the platforms and version they hold.

A tag is asked with HEAD (Docker Hub does not count HEAD against its pull
limit), falling back to GET when the registry sends no digest. Whenever bytes
are read they are checked against the digest they claim. For an index, the
required platforms are picked out of it; the first required platform's config
blob gives ``org.opencontainers.image.version``. registries.conf is applied as
podman and skopeo apply it (names.pull_sources): the mirrors that may answer
for a tag are tried first, then the table's location.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import requests

from lockpipe.errors import RegistryError
from lockpipe.lock.refs import DIGEST_RE, parse_ref
from lockpipe.log import echo
from lockpipe.registry import platforms as pf
from lockpipe.registry.cache import BlobCache, default_root
from lockpipe.registry.creds import Credential, credentials
from lockpipe.registry.names import Endpoint, endpoint, pull_sources
from lockpipe.registry.transport import Registry

__all__ = ["Registry", "Resolved", "exists", "manifest_digest", "registry_for", "resolve",
           "resolve_many"]  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """What a reference points at now."""

    ref: str  # as asked
    digest: str  # the tag's top digest (the index digest for multi-arch)
    media_type: str
    platforms: Mapping[str, str]  # required platform -> child digest; {} for a single manifest
    available: tuple[str, ...]  # every platform the index lists (unknown/unknown skipped)
    version_label: str | None  # org.opencontainers.image.version of the first required platform
    ratelimit_remaining: int | None


class Pool:
    """One :class:`Registry` per (host, scheme, credential), shared by every reference and
    thread: a login scoped to a namespace (``host/ns`` in auth.json) is another one."""

    def __init__(self, timeout: float = 30.0, cache: BlobCache | None = None) -> None:
        self.timeout = timeout
        self.cache = cache
        self._lock = threading.Lock()
        self._registries: dict[tuple[str, str, Credential | None], Registry] = {}
        self._credentials: dict[str, Credential | None] = {}  # by registry/repository

    def get(self, host: str, scheme: str, registry: str, repository: str) -> Registry:
        with self._lock:
            where = f"{registry}/{repository}"
            if where not in self._credentials:
                self._credentials[where] = credentials(where)
            key = (host, scheme, self._credentials[where])
            if key not in self._registries:
                self._registries[key] = Registry(
                    host, scheme=scheme, credential=key[2], timeout=self.timeout
                )
            return self._registries[key]


def registry_for(ref: str) -> tuple[Registry, Endpoint]:
    """The endpoint of ``ref`` and a Registry for its host, with this user's credentials."""
    ep = endpoint(ref)
    credential = credentials(f"{ep.registry}/{ep.repository}")
    return Registry(ep.host, scheme=ep.scheme, credential=credential), ep


def resolve(
    ref: str, *, platforms: Sequence[str] = ("linux/amd64",), registry: Registry | None = None,
    cache: Path | None = None,
) -> Resolved:  # fmt: skip
    """What ``ref`` points at; ``platforms=()`` asks for the digest alone (one HEAD).
    ``cache``: the manifest cache's folder (default :func:`default_root`)."""
    if registry is not None:
        return _resolve_at(registry, endpoint(ref).repository, ref, platforms)
    return _resolve_via(ref, platforms, Pool(cache=BlobCache(cache or default_root())))


def resolve_many(
    refs: Sequence[str], *, platforms: Sequence[str] = ("linux/amd64",), concurrency: int = 8,
    cache: Path | None = None,
) -> list[Resolved | RegistryError]:  # fmt: skip
    """Resolve ``refs`` in parallel, sharing sessions and tokens per host; input order kept."""
    pool = Pool(cache=BlobCache(cache or default_root()))

    def one(ref: str) -> Resolved | RegistryError:
        try:
            return _resolve_via(ref, platforms, pool)
        except RegistryError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as workers:
        return list(workers.map(one, refs))


def exists(ref_with_digest: str) -> bool:
    """Whether a pull of ``repo@sha256:…`` finds it: its mirrors, then the registry.

    False on 404 everywhere; a mirror's failure is noted and passed over, the
    registry's own failure is raised (a dead registry is not "gone").
    """
    sources = pull_sources(ref_with_digest)  # raises on a malformed reference
    digest = _digest_of(ref_with_digest)
    pool = Pool()
    for source in sources:
        reg = pool.get(source.host, source.scheme, source.registry, source.repository)
        try:
            if _holds(reg, source.repository, digest):
                return True
        except RegistryError as exc:
            if not source.mirror:
                raise
            echo(f"note: mirror {source.location} failed, trying the next source: {exc}")
    return False


def held(ref_with_digest: str) -> bool:
    """Whether the registry ``repo@sha256:…`` names holds it, asked alone: what a push to
    that reference wrote. No mirror is asked (a pull-through mirror that kept the digest
    says nothing of a destination that lost it); a failure is raised."""
    digest = _digest_of(ref_with_digest)
    reg, ep = registry_for(ref_with_digest)
    return _holds(reg, ep.repository, digest)


def _digest_of(ref_with_digest: str) -> str:
    digest = parse_ref(ref_with_digest).digest
    if digest is None:
        raise RegistryError(f"{ref_with_digest}: needs repo@sha256:…; add the digest")
    return digest


def _holds(reg: Registry, repository: str, digest: str) -> bool:
    resp = reg.request("HEAD", repository, f"manifests/{digest}",
                       headers={"Accept": pf.ACCEPT}, ok=(200, 404))  # fmt: skip
    return resp.status_code == 200


def manifest_digest(ref: str, *, insecure: bool = False, timeout: float = 30.0) -> str:
    """The digest the registry serves for ``ref``'s tag (``sha256:…``); kept for old callers."""
    ep = endpoint(ref)
    reg = Registry(ep.host, scheme="http" if insecure else ep.scheme,
                   credential=credentials(f"{ep.registry}/{ep.repository}"),
                   timeout=timeout)  # fmt: skip
    return resolve(ref, platforms=(), registry=reg).digest


def _resolve_via(ref: str, platforms: Sequence[str], pool: Pool) -> Resolved:
    """Try each mirror that applies, then the location; the location's error is the one raised."""
    *mirrors, primary = pull_sources(ref)
    for source in mirrors:
        reg = pool.get(source.host, source.scheme, source.registry, source.repository)
        try:
            return _resolve_at(reg, source.repository, ref, platforms, pool.cache)
        except RegistryError as exc:
            echo(f"note: mirror {source.location} failed, trying the next source: {exc}")
    reg = pool.get(primary.host, primary.scheme, primary.registry, primary.repository)
    return _resolve_at(reg, primary.repository, ref, platforms, pool.cache)


def _resolve_at(
    reg: Registry,
    repository: str,
    ref: str,
    platforms: Sequence[str],
    cache: BlobCache | None = None,
) -> Resolved:
    """Resolve at one registry; bytes named by a digest may come from ``cache``."""
    image = parse_ref(ref)
    reference = image.digest or image.tag or "latest"
    accept = {"Accept": pf.ACCEPT}
    head = reg.request("HEAD", repository, f"manifests/{reference}", headers=accept)
    digest = _digest_header(head)
    ctype = head.headers.get("Content-Type")
    if image.digest and digest and digest != image.digest:
        raise RegistryError(f"{ref}: {reg.host} answered for {digest}, not the digest asked; "
                            "a proxy or mirror is broken: bypass it")  # fmt: skip
    digest = image.digest or digest
    body = None
    if not digest:
        body, ctype, digest = _get_manifest(reg, repository, ref, reference, None)
    if not platforms:
        return Resolved(ref=ref, digest=digest, media_type=(ctype or "").split(";")[0],
                        platforms={}, available=(), version_label=None,
                        ratelimit_remaining=reg.ratelimit_remaining)  # fmt: skip
    if body is None:
        body, served_as, _ = _get_manifest(reg, repository, ref, digest, digest, cache)
        ctype = served_as or ctype
    doc = pf.parse_json(ref, body)
    chosen: dict[str, str] = {}
    if pf.is_index(doc, ctype):
        listed = pf.entries(ref, doc)
        available = tuple(name for name, _ in listed)
        chosen = pf.select(ref, listed, platforms)
        first = chosen[platforms[0]]
        child, _, _ = _get_manifest(reg, repository, ref, first, first, cache)
        manifest = pf.parse_json(ref, child)
    else:
        manifest, available = doc, ()
    label = None
    desc = pf.config_descriptor(ref, manifest)
    if desc is not None:
        blob = cache.get(desc[0]) if cache else None
        if blob is None:
            blob = reg.request("GET", repository, f"blobs/{desc[0]}").content
            pf.check_digest(f"{ref} config {desc[0]}", blob, desc[0])
            if cache:
                cache.put(desc[0], blob)
        config = pf.parse_json(ref, blob)
        label = pf.version_label(config)
        if not available:  # a single manifest: its config says which platform it is
            available = (pf.config_platform(config),)
            pf.select(ref, [(available[0], digest)], platforms, index=False)
    return Resolved(ref=ref, digest=digest, media_type=pf.media_type(doc, ctype),
                    platforms=chosen, available=available, version_label=label,
                    ratelimit_remaining=reg.ratelimit_remaining)  # fmt: skip


def _get_manifest(
    reg: Registry,
    repository: str,
    ref: str,
    reference: str,
    expect: str | None,
    cache: BlobCache | None = None,
) -> tuple[bytes, str | None, str]:
    """(bytes, Content-Type, digest) of a manifest, checked against what it claims to be."""
    cached = cache.get(expect) if cache and expect else None
    if cached is not None and expect is not None:
        return cached, None, expect
    resp = reg.request("GET", repository, f"manifests/{reference}", headers={"Accept": pf.ACCEPT})
    body = resp.content
    claimed = expect or _digest_header(resp)
    if claimed is None and DIGEST_RE.match(reference):
        claimed = reference
    if claimed is not None:
        pf.check_digest(f"{ref} manifest", body, claimed)
        if cache:
            cache.put(claimed, body)
    return body, resp.headers.get("Content-Type"), claimed or pf.sha256_digest(body)


def _digest_header(resp: requests.Response) -> str | None:
    """The ``Docker-Content-Digest`` a registry sent, if it is a sha256 digest: another
    value (a proxy's) is as none, and the bytes' own sha256 decides, never a URL path."""
    value = resp.headers.get("Docker-Content-Digest")
    return value if value and DIGEST_RE.fullmatch(value) else None
