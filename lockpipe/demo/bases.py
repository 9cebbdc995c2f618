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
from lockpipe.errors import EngineError, FetchError
from lockpipe.log import echo


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
        cmd.call(recipe.mmdebstrap(tmp), on_line=lambda line: echo(f"  {line}", style="dim"))
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


def push_base(recipe: BaseRecipe, ref: str, cache: Path, workdir: Path) -> str:
    """The recipe's cached root filesystem on scratch, pushed as ``ref``; its digest."""
    tar = rootfs(recipe, cache)
    context = workdir / recipe.name
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    link_or_copy(tar, context / "rootfs.tar")
    try:
        return push_scratch_image(context, CONTAINERFILE, ref)[1]
    finally:
        shutil.rmtree(context, ignore_errors=True)
