"""Test base images, built FROM scratch with a fixed timestamp and pushed to a registry.

Nothing public can be pulled here, so tests and benchmarks make their own bases and pin
them by the digest the loopback registry returns (:func:`lockpipe.demo.bases.
push_scratch_image`, which the demo's Debian bases use too).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from lockpipe.demo.bases import push_scratch_image

BUSYBOX = Path("/bin/busybox")
__all__ = ["BUSYBOX", "push_busybox_base", "push_scratch_image"]


def push_busybox_base(
    registry: str, workdir: Path, name: str = "lockpipe-test/busybox:1"
) -> tuple[str, str]:
    """Debian's static busybox on scratch, with its applets installed."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUSYBOX, workdir / "busybox")
    return push_scratch_image(
        workdir,
        "FROM scratch\nCOPY busybox /bin/busybox\n"
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n',
        f"{registry}/{name}",
    )
