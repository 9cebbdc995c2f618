"""Smoke of an external image (frank-large): run by its pinned digest, nothing built here.

The image was built elsewhere and lives in one host's local storage, so smoke runs it
only where it is: the lock must pin its digest, and the engine must hold that exact
image. Its own entrypoint and command run, with the lock's ``serve.env``; there are no
payloads to mount.
"""

from __future__ import annotations

import os

from lockpipe.engines.base import Engine, RunSpec
from lockpipe.errors import LockError, SmokeError
from lockpipe.lock.model import Target


def external_image(target: Target, engine: Engine) -> tuple[str, str]:
    """(``image@digest``, its local image ID); SmokeError saying what to do otherwise."""
    ext = target.external
    assert ext is not None, target.name
    try:
        ref = ext.pinned(f"targets.{target.name}")
    except LockError as exc:
        raise SmokeError(f"{target.name}: {exc}") from None
    image_id = engine.image_id(ref)
    if image_id is None:
        raise SmokeError(
            f"{target.name}: {ref} is not in {engine.name}'s local storage; it is built "
            "elsewhere: run smoke on the host that holds it, or copy it here first "
            f"(podman save {ref} | podman load), then rerun"
        )
    return ref, image_id


def external_spec(target: Target, image: str, port: int) -> RunSpec:
    """The image's own entrypoint and command (or the lock's), its env, its port published."""
    cmd = target.serve.command
    return RunSpec(
        image=image,
        entrypoint=cmd[:1] if cmd else None,
        command=cmd[1:],
        name=f"lockpipe-smoke-{target.name}-{os.getpid()}",
        ports={target.serve.port: port},
        env=dict(target.serve.env),
    )
