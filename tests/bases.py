"""Test base images: FROM scratch plus Debian's static busybox, pushed to a registry.

Nothing public can be pulled here, so tests and benchmarks make their own
base and pin it by the digest the loopback registry returns.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

BUSYBOX = Path("/bin/busybox")


def push_busybox_base(
    registry: str, workdir: Path, name: str = "lockpipe-test/busybox:1"
) -> tuple[str, str]:
    """Build the base with buildah, push it to ``registry``; return (ref, digest)."""
    workdir.mkdir(parents=True, exist_ok=True)
    shutil.copy(BUSYBOX, workdir / "busybox")
    (workdir / "Containerfile").write_text(
        'FROM scratch\nCOPY busybox /bin/busybox\nRUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
    )
    ref = f"{registry}/{name}"
    subprocess.run(
        ["buildah", "bud", "--isolation", "chroot", "--timestamp", "0", "-t", ref, str(workdir)],
        check=True, capture_output=True,
    )  # fmt: skip
    digestfile = workdir / "digest"
    subprocess.run(
        ["buildah", "push", "--tls-verify=false", "--digestfile", str(digestfile), ref,
         f"docker://{ref}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return ref, digestfile.read_text().strip()
