"""Pure parsing of image references, as a person writes them.

``nvidia/cuda:12.9.1-devel-ubuntu24.04@sha256:…`` → registry ``docker.io``,
repository ``nvidia/cuda``, tag and digest. Docker Hub's implicit
``library/`` prefix is added, as the engines do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_REGISTRY = "docker.io"
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")  # \Z: "$" also takes a last newline
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")


class ReferenceError(ValueError):
    """An image reference that no engine would accept."""


@dataclass(frozen=True, kw_only=True)
class ImageRef:
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """``registry/repository``, with no tag or digest."""
        return f"{self.registry}/{self.repository}"

    def pinned(self, digest: str | None = None) -> str:
        """The reference engines pull: ``name[:tag]@digest``."""
        use = digest or self.digest
        if use is None:
            raise ReferenceError(f"{self} has no digest")
        tag = f":{self.tag}" if self.tag else ""
        return f"{self.name}{tag}@{use}"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"


def _looks_like_registry(part: str) -> bool:
    return "." in part or ":" in part or part == "localhost"


def parse_ref(text: str) -> ImageRef:
    """Parse ``[registry/]repo[:tag][@sha256:…]``; raise ReferenceError if invalid."""
    if not text or text != text.strip():
        raise ReferenceError(f"{text!r} is not an image reference")
    rest, digest = text, None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not DIGEST_RE.match(digest):
            raise ReferenceError(f"{text!r}: digest must be sha256: and 64 lowercase hex digits")
    tag = None
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG_RE.match(tag):
            raise ReferenceError(f"{text!r}: {tag!r} is not a valid tag")
    first, _, remainder = rest.partition("/")
    if remainder and _looks_like_registry(first):
        registry, repository = first, remainder
    else:
        registry, repository = DEFAULT_REGISTRY, rest
    host, _, port = registry.partition(":")
    if not host or (port and not port.isdigit()):
        raise ReferenceError(f"{text!r}: {registry!r} is not a registry host[:port]")
    if registry in ("index.docker.io", "registry-1.docker.io"):
        registry = DEFAULT_REGISTRY
    if registry == DEFAULT_REGISTRY and "/" not in repository:
        repository = f"library/{repository}"
    for component in repository.split("/"):
        if not _COMPONENT_RE.match(component):
            raise ReferenceError(f"{text!r}: {component!r} is not a valid repository component")
    return ImageRef(registry=registry, repository=repository, tag=tag, digest=digest)
