"""The base's first local name: host state that buildah and podman write into images.

buildah (and podman, which builds with buildah's code) records each stage's base
in the image history as ``"comment": "FROM <name>"``, where ``<name>`` is the
first of the names local storage holds for that image, whatever the Dockerfile
said. A host where the pinned base was once copied in as ``mirror/busybox:1``
records that name, an empty host the pinned reference, so one lock gave two
image IDs. A pull by the pinned reference puts that reference first. Each build
therefore checks the first name of every pinned base it uses and pulls the base
by its reference when the first name is another one (the blobs are already
local, so only the manifest moves). Later history entries name the previous
intermediate image by ID, which is the same on every host once this one is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lockpipe.errors import BuildError
from lockpipe.lock.refs import ReferenceError, parse_ref


class BaseNameUnsettled(BuildError):
    """A pinned base that local storage holds first under another name could not be pulled."""


def is_pinned_name(first: str, pinned: str) -> bool:
    """Whether storage's first name for an image is ``pinned`` as engines store it.

    A pull of ``name:tag@digest`` is stored as given or as ``name@digest``; a
    short Docker Hub name is stored qualified (``docker.io/library/…``).
    """
    try:
        a, b = parse_ref(first), parse_ref(pinned)
    except ReferenceError:
        return False
    return a.name == b.name and a.digest is not None and a.digest == b.digest


def settle_first_names(
    engine: str,
    pinned: Sequence[str],
    first_name: Callable[[str], str | None],
    pull: Callable[[str], None],
) -> list[str]:
    """Make each pinned base's first local name its pinned reference; the bases pulled.

    ``first_name(ref)`` is storage's first name for the image ``ref`` resolves
    to, or None when the image is not local (the build pulls it by that
    reference, which puts it first). A failed pull of a base whose first name is
    another one is a BuildError naming the base, the name and the fix: building
    on would record a name that only this host holds.
    """
    pulled = []
    for ref in pinned:
        first = first_name(ref)
        if first is None or is_pinned_name(first, ref):
            continue
        try:
            pull(ref)
        except BuildError as exc:
            by_digest = f"{parse_ref(ref).name}@{parse_ref(ref).digest}"
            raise BaseNameUnsettled(
                f"{ref}: this host's {engine} storage holds the base first as {first!r}, and "
                f"{engine} would record that name in the image history, so the image ID would "
                f"be this host's alone. Pulling it by its pinned reference failed: make the "
                f"registry (or a mirror in registries.conf) reachable and build again, or, "
                f"offline, load the base from an archive by its pinned reference (skopeo copy "
                f"oci-archive:FILE containers-storage:{by_digest}); the digest stays as "
                f"locked.\n{exc}"
            ) from None
        pulled.append(ref)
    return pulled
