"""A second host on this machine: a container storage of its own, and for podman a service.

``CONTAINERS_STORAGE_CONF`` points buildah, skopeo and podman at a storage
table with its own ``graphroot`` and ``runroot``; a podman API service started
with it serves that storage alone, on a socket of its own.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def storage_env(root: Path, driver: str = "vfs") -> dict[str, str]:
    """The environment of a host whose storage lives under ``root`` (made empty here)."""
    root.mkdir(parents=True, exist_ok=True)
    conf = root / "storage.conf"
    conf.write_text(
        f'[storage]\ndriver = "{driver}"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n'
    )
    return {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf)}


@contextlib.contextmanager
def podman_service(root: Path, env: dict[str, str]) -> Iterator[str]:
    """podman's API service on that storage; yields its URL (for LOCKPIPE_PODMAN_URL)."""
    sock = root / "podman.sock"
    log = root / "podman.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{sock}"],
            env=env, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        for _ in range(150):
            ping = ["curl", "-fsS", "--unix-socket", str(sock), "http://d/_ping"]
            if subprocess.run(ping, capture_output=True).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"podman's service on {sock} did not start; see {log}")
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def empty_storage(env: dict[str, str]) -> None:
    """Remove every container and image of that storage (vfs layers are plain folders)."""
    subprocess.run(["buildah", "rm", "--all"], env=env, capture_output=True)
    subprocess.run(["buildah", "rmi", "--all", "--force"], env=env, capture_output=True)
