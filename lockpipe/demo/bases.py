"""Base images FROM scratch: a Debian root filesystem made with mmdebstrap, pushed by digest.

No public registry is reachable on a bare machine, so the demo (and the tests) make
their own bases and pin them by the digest the registry returns. ``--timestamp 0``
keeps an image's digest, and the layer caches keyed on it, the same for the same
root filesystem, which is cached by name: the next run pushes the same digest.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from lockpipe import cmd
from lockpipe.demo.plan import CONTAINERFILE, BaseRecipe
from lockpipe.demo.registry import status
from lockpipe.errors import EngineError, FetchError
from lockpipe.http import NoAnswer
from lockpipe.log import Heartbeat, echo

ACCEPT = {"Accept": "application/vnd.oci.image.manifest.v1+json, "
          "application/vnd.docker.distribution.manifest.v2+json"}  # fmt: skip


def link_or_copy(src: Path, dest: Path) -> None:
    """``dest`` as a hard link to ``src``, or a copy on another file system."""
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy(src, dest)


def rootfs(recipe: BaseRecipe, cache: Path) -> Path:
    """The recipe's root filesystem tar in ``cache``, made with mmdebstrap if absent."""
    tar = cache / f"{recipe.name}.tar"
    if tar.is_file():
        return tar
    cache.mkdir(parents=True, exist_ok=True)
    tmp = tar.with_suffix(".partial.tar")  # mmdebstrap picks the format by extension
    try:
        with Heartbeat(f"mmdebstrap {recipe.name}") as beat:
            cmd.call(recipe.mmdebstrap(tmp), on_line=lambda line: beat.line(f"  {line}"))
    except EngineError as exc:
        tmp.unlink(missing_ok=True)
        raise FetchError(
            f"{recipe.name}: mmdebstrap could not make the {recipe.suite} root filesystem "
            f"from Debian's archive (is deb.debian.org or the host's apt mirror reachable?):"
            f"\n{exc}"
        ) from None
    tmp.rename(tar)
    return tar


def push_scratch_image(
    context: Path, containerfile: str, ref: str, env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """Build ``containerfile`` in ``context`` with buildah, push it as ``ref``; (ref, digest).

    Loopback registries are spoken to over plain HTTP (``--tls-verify=false``).
    """
    (context / "Containerfile").write_text(containerfile)
    cmd.call(["buildah", "bud", "--isolation", "chroot", "--timestamp", "0", "-t", ref,
              str(context)], env=env, quiet=True)  # fmt: skip
    digestfile = context / "digest"
    cmd.call(["buildah", "push", "--tls-verify=false", "--digestfile", str(digestfile), ref,
              f"docker://{ref}"], env=env, quiet=True)  # fmt: skip
    return ref, digestfile.read_text().strip()


def registry_digest(ref: str) -> str | None:
    """The digest a loopback registry (plain HTTP) serves for ``ref``; None if it has none."""
    host, _, rest = ref.partition("/")
    repo, _, tag = rest.rpartition(":")
    got = status("HEAD", f"http://{host}/v2/{repo}/manifests/{tag}", 10, ACCEPT)
    if isinstance(got, NoAnswer) or got[0] != 200:
        return None
    return got[1].get("Docker-Content-Digest")


def _stamp(tar: Path, ref: str) -> str:
    st = tar.stat()
    return f"{ref} {st.st_size} {st.st_mtime_ns}"


def push_base(recipe: BaseRecipe, ref: str, cache: Path, workdir: Path) -> str:
    """The recipe's cached root filesystem on scratch, pushed as ``ref``; its digest.

    A tar pushed before (a stamp beside it: ref, size, mtime and digest) whose digest the
    registry still serves for ``ref`` is not built and pushed again.
    """
    tar = rootfs(recipe, cache)
    stamp = tar.with_suffix(".pushed")
    if stamp.is_file():
        seen, _, digest = stamp.read_text().rpartition(" ")
        if seen == _stamp(tar, ref) and registry_digest(ref) == digest:
            echo(f"{recipe.name}: {ref} already holds this root filesystem ({digest[:19]}…)")
            return digest
    digest = _push(recipe, tar, ref, workdir)
    stamp.write_text(f"{_stamp(tar, ref)} {digest}")
    return digest


def _push(recipe: BaseRecipe, tar: Path, ref: str, workdir: Path) -> str:
    context = workdir / recipe.name
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    link_or_copy(tar, context / "rootfs.tar")
    try:
        return push_scratch_image(context, CONTAINERFILE, ref)[1]
    finally:
        shutil.rmtree(context, ignore_errors=True)
