"""Targets whose image is built elsewhere: pinned by digest in the lock, never built here.

The fleet's frank-large is one: ``halogen-flash-server``, an image in the host's local
storage built outside this repository. Its lock entry (proposed; pipeline/lock does not
read it yet, so deploy reads the lock document directly)::

    "targets": {"frank-large": {
      "external": {"image": "localhost/halogen-flash-server", "digest": "sha256:…"},
      "serve": {"runtime": "halogen", "command": ["halogen-flash-server"], "port": 7770,
                "context": 200192, "parallel": 2,
                "env": {"HALOGEN_CTX": "200192", "HALOGEN_MAX_TOK": "24576"}}}}

The digest is known only on that host, so until it is pinned there deploy refuses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import LockError

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/:-]*")


@dataclass(frozen=True, kw_only=True)
class ExternalTarget:
    name: str
    image: str  # repository, without tag or digest
    digest: str | None
    runtime: str
    command: tuple[str, ...]
    port: int
    env: Mapping[str, str] = field(default_factory=dict)
    context: int | None = None
    parallel: int | None = None

    def pinned(self) -> str:
        """``image@digest``; a LockError saying where to read the digest if it is absent."""
        where = f"targets.{self.name}.external.digest"
        if self.digest is None:
            raise LockError(
                f"{where} is absent, and a deploy pins images by digest only: pin "
                f"{where} from `podman image inspect --format '{{{{.Digest}}}}' {self.image}` "
                "on the host whose local storage holds the image (it was built elsewhere; no "
                "reachable source knows its digest)"
            )
        return f"{self.image}@{self.digest}"


def _fail(name: str, what: str) -> LockError:
    return LockError(f"targets.{name}.{what}")


def external_target(doc: Mapping[str, Any], name: str) -> ExternalTarget | None:
    """The external target ``name`` of a lock document, or None if it is a built target."""
    entry = doc.get("targets", {}).get(name)
    if not isinstance(entry, Mapping) or "external" not in entry:
        return None
    ext, serve = entry["external"], entry.get("serve")
    if not isinstance(ext, Mapping) or not _IMAGE.fullmatch(str(ext.get("image", ""))):
        raise _fail(name, "external.image: give the image repository, e.g. localhost/NAME")
    image = str(ext["image"])
    if "@" in image or re.search(r":[^/]*$", image):
        raise _fail(name, f"external.image {image!r}: no tag or digest here; the digest goes "
                    "in external.digest")  # fmt: skip
    digest = ext.get("digest")
    if digest is not None and not _DIGEST.fullmatch(str(digest)):
        raise _fail(name, f"external.digest {digest!r} is not sha256:<64 hex>")
    if not isinstance(serve, Mapping) or not serve.get("command") or not serve.get("port"):
        raise _fail(name, "serve: an external target needs serve.command and serve.port")
    env = serve.get("env", {})
    if not all(isinstance(v, str) for v in env.values()):
        raise _fail(name, "serve.env: values are strings (quote numbers)")
    return ExternalTarget(
        name=name, image=image, digest=digest, runtime=str(serve.get("runtime", "external")),
        command=tuple(serve["command"]), port=int(serve["port"]), env=dict(env),
        context=serve.get("context"), parallel=serve.get("parallel"),
    )  # fmt: skip
