"""Test base images, built FROM scratch with a fixed timestamp and pushed to a registry.

Nothing public can be pulled here, so tests and benchmarks make their own
bases and pin them by the digest the loopback registry returns. The fixed
timestamp keeps a base's digest, and the layer caches keyed on it, stable
across runs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

BUSYBOX = Path("/bin/busybox")


def push_scratch_image(context: Path, containerfile: str, ref: str) -> tuple[str, str]:
    """Build ``containerfile`` in ``context`` with buildah, push it as ``ref``; (ref, digest)."""
    (context / "Containerfile").write_text(containerfile)
    subprocess.run(
        ["buildah", "bud", "--isolation", "chroot", "--timestamp", "0", "-t", ref, str(context)],
        check=True, capture_output=True,
    )  # fmt: skip
    digestfile = context / "digest"
    subprocess.run(
        ["buildah", "push", "--tls-verify=false", "--digestfile", str(digestfile), ref,
         f"docker://{ref}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return ref, digestfile.read_text().strip()


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
