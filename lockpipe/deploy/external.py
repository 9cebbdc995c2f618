"""Targets whose image is built elsewhere: pinned by digest in the lock, never built here.

The fleet's frank-large is one: ``halogen-flash-server``, an image in the host's local
storage built outside this repository. Its lock entry (``locks/digests.json``)::

    "targets": {"frank-large": {
      "external": {"image": "localhost/halogen-flash-server", "digest": "sha256:…"},
      "serve": {"runtime": "halogen", "port": 7770, "context": 200192, "parallel": 2,
                "env": {"HALOGEN_CTX": "200192", "HALOGEN_MAX_TOK": "24576"}}}}

No ``command``: the image's own entrypoint and command run. The digest is known only on
that host, so until it is pinned there deploy refuses, saying how to read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from lockpipe.errors import LockError
from lockpipe.lock.model import Lock, unpinned


@dataclass(frozen=True, kw_only=True)
class ExternalTarget:
    name: str
    image: str  # repository, without tag or digest
    digest: str | None
    runtime: str
    command: tuple[str, ...]  # empty: the image's own entrypoint and command
    port: int
    env: Mapping[str, str] = field(default_factory=dict)
    context: int | None = None
    parallel: int | None = None

    def pinned(self) -> str:
        """``image@digest``; a LockError saying where to read the digest if it is absent."""
        if self.digest is None:
            raise LockError(unpinned(f"targets.{self.name}", self.image))
        return f"{self.image}@{self.digest}"


def external_target(lock: Lock, name: str) -> ExternalTarget | None:
    """The external target ``name`` of the lock, or None if it is built here."""
    target = lock.target(name)
    ext, serve = target.external, target.serve
    if ext is None:
        return None
    return ExternalTarget(
        name=name, image=ext.image, digest=ext.digest, runtime=serve.runtime,
        command=serve.command, port=serve.port, env=dict(serve.env), context=serve.context,
        parallel=serve.parallel,
    )  # fmt: skip
