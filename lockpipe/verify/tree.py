"""Read an image into per-layer file entries without running it.

Every engine's image goes through one path: skopeo copies it into an OCI
layout in a temp dir (``containers-storage:`` for buildah and podman, which
share root's storage; ``docker-daemon:`` for docker; ``docker://`` for a
registry), and this module reads that layout with ``tarfile``. One layout
reader serves all three engines and the registry; ``docker save`` on dockerd
20.10 writes the legacy layout instead, which would need a second reader.

Each layer is streamed and each file hashed in pieces, so memory stays bounded
by the number of entries, not their size. Besides the sha256, a file keeps its
first 16 bytes (a ``.pyc`` header holds its source mtime at bytes 8..12) and a
few markers found anywhere in its bytes: up to MAX_MARKS build paths
(``/tmp/…``, not inside a URL), and the first wall-clock time and random UUID.
The cause classifier needs nothing more. Before an export, the free space of
TMPDIR is checked against the image's size (``space.py``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import math
import os
import re
import tarfile
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from lockpipe import cmd
from lockpipe.errors import EngineError
from lockpipe.jsonshape import Reader
from lockpipe.urls import shown
from lockpipe.verify.space import check_space, manifest_of, space_needed

CHUNK = 1 << 20
HEAD = 16
MAX_MARKS = 3
URL_LOOKBACK = 256  # bytes before a build path searched for the "scheme://" of a URL
TOKEN_END = re.compile(rb"[\s\"'<>()\x00]")
URL_HOST = re.compile(rb"://[^/]")  # a URL's host follows; file:///tmp/… is a build path
BUILD_PATH = re.compile(rb"/(?:tmp|var/tmp|build|builddir|workspace)/[\w.+-]{1,64}")
CLOCK = re.compile(rb"\b\d\d:\d\d:\d\d\b|\b(?:19|20)\d\d-\d\d-\d\dT\d\d:\d\d")
UUID = re.compile(rb"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
SCHILY_XATTR = "SCHILY.xattr."
LIBARCHIVE_XATTR = "LIBARCHIVE.xattr."
KINDS = {
    tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink",
    tarfile.CHRTYPE: "char", tarfile.BLKTYPE: "block", tarfile.FIFOTYPE: "fifo",
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One tar member of a layer: what a rebuild must reproduce, field by field."""

    path: str  # without a leading ./ or /
    kind: str
    mode: int  # permission bits only: some engines also write the type bits
    uid: int
    gid: int
    uname: str
    gname: str
    mtime: int
    size: int
    sha256: str = ""  # regular files only
    link: str = ""  # symlink or hardlink target
    head: bytes = b""  # a file's first bytes
    build_paths: tuple[str, ...] = ()
    clock: str = ""  # the first wall-clock time in its bytes
    uuid: str = ""  # the first random UUID in its bytes
    # extended attributes (name, value), sorted: file capabilities, SELinux labels, ACLs
    xattrs: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Layer:
    digest: str  # the blob's digest in the manifest (compressed or not)
    diff_id: str  # the uncompressed tar's digest, from the config
    media_type: str
    entries: tuple[Entry, ...]  # in tar order


@dataclass(frozen=True, kw_only=True)
class ImageTree:
    ref: str
    manifest_digest: str
    config_digest: str  # the image's own: for docker-daemon, its image ID (see exported)
    annotations: Mapping[str, str]
    config: Mapping[str, Any]
    layers: tuple[Layer, ...]
    manifest: Mapping[str, Any] = field(default_factory=dict)  # as the layout holds it


def source_for(engine: str, ref: str) -> str:
    """skopeo's source for a local image of ``engine`` (an ID or a name)."""
    ref = ref.removeprefix("sha256:") if engine != "docker" else ref
    if engine in ("buildah", "podman"):
        return f"containers-storage:{ref}"
    if engine == "docker":
        return f"docker-daemon:{ref}"
    raise EngineError(f"no image export for engine {engine!r}; use buildah, podman or docker")


def export(source: str, dest: Path, *, tls_verify: bool = True) -> None:
    """``skopeo copy SOURCE oci:DEST``; local layers stay uncompressed (no gzip cost)."""
    args = ["skopeo", "copy", "--quiet", "--dest-oci-accept-uncompressed-layers"]
    if source.startswith("docker://"):
        args.append(f"--src-tls-verify={str(tls_verify).lower()}")
    host = os.environ.get("DOCKER_HOST")
    if source.startswith("docker-daemon:") and host:
        args += ["--src-daemon-host", host]
    cmd.call([*args, source, f"oci:{dest}"], quiet=True)


@contextlib.contextmanager
def exported(source: str, *, tls_verify: bool = True) -> Iterator[ImageTree]:
    """The image at ``source`` (a skopeo transport:reference), read; its copy removed after."""
    manifest = manifest_of(source, tls_verify=tls_verify)
    if manifest is not None:
        check_space(space_needed(manifest, source), source)
    with tempfile.TemporaryDirectory(prefix="lockpipe-tree-") as tmp:
        layout = Path(tmp) / "oci"
        export(source, layout, tls_verify=tls_verify)
        tree = read_layout(layout, source)
        # skopeo re-encodes docker's config as an OCI one (another digest, docker-only keys
        # dropped): two images differ exactly when their IDs do, so the ID is the digest.
        image_id = source.removeprefix("docker-daemon:")
        if source.startswith("docker-daemon:") and DIGEST.fullmatch(image_id):
            tree = replace(tree, config_digest=image_id)
        yield tree


def _blob(layout: Path, digest: str, where: str) -> Path:
    """The blob file of ``digest`` (named in ``where``): a digest that is not sha256 and
    64 hex digits would name a file outside ``blobs/`` (``sha256:../../x``)."""
    if not DIGEST.fullmatch(digest):
        raise EngineError(f"{where}: the digest {shown(digest, 100)} is not sha256:<64 hex>; {FIX}")
    return layout / "blobs" / "sha256" / digest.removeprefix("sha256:")


FIX = "check the image at its source; run skopeo copy by hand to see it"
MTIMES = range(-(2**63), 2**63)  # a tar's mtime is a signed 64-bit count of seconds


def _json(path: Path, where: str | None = None) -> tuple[Reader, dict[str, Any]]:
    """A JSON object of the layout skopeo wrote from the registry's answers, and the Reader
    of its values: EngineError naming ``where`` (the file by default) when it is not one,
    is nested too deeply to read, or cannot be read."""
    reader = Reader(where=where or str(path), root="the file", error=EngineError, fix=FIX)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise reader.fail(f"the file cannot be read ({e.strerror or e})") from None
    return reader, reader.parse(data)


def read_layout(layout: Path, ref: str) -> ImageTree:
    """The single image of an OCI layout: its config and every layer's entries."""
    read, index = _json(layout / "index.json")
    manifests = read.get(index, ("manifests",), list, [])
    if len(manifests) != 1:
        raise EngineError(f"{layout}: expected one image in the OCI layout, found {len(manifests)}")
    mdigest = read.get(index, ("manifests", 0, "digest"), str)
    read, manifest = _json(_blob(layout, mdigest, f"{layout}/index.json"),
                           f"{ref}: manifest {mdigest}")  # fmt: skip
    cdigest = read.get(manifest, ("config", "digest"), str)
    descs = [
        (read.get(manifest, ("layers", i, "digest"), str),
         read.get(manifest, ("layers", i, "mediaType"), str, ""))
        for i in range(len(read.get(manifest, ("layers",), list, [])))
    ]  # fmt: skip
    notes = read.get(manifest, ("annotations",), dict, {})
    annotations = {key: read.get(manifest, ("annotations", key), str) for key in notes}
    read, config = _json(_blob(layout, cdigest, f"{ref}: manifest {mdigest}"),
                         f"{ref}: config {cdigest}")  # fmt: skip
    labels = read.get(config, ("config", "Labels"), dict, {})  # explain reads these two
    for key in labels:
        read.get(config, ("config", "Labels", key), str)
    for i in range(len(read.get(config, ("history",), list, []))):
        read.get(config, ("history", i, "comment"), str, "")
        read.get(config, ("history", i, "created_by"), str, "")
    listed = read.get(config, ("rootfs", "diff_ids"), list, [])
    diff_ids = [read.get(config, ("rootfs", "diff_ids", i), str) for i in range(len(listed))]
    if len(diff_ids) != len(descs):
        raise EngineError(f"{ref}: {len(descs)} layers but {len(diff_ids)} diff_ids in the config")
    layers = []
    for n, ((digest, media), diff_id) in enumerate(zip(descs, diff_ids, strict=True), 1):
        with _blob(layout, digest, f"{ref}: manifest {mdigest}").open("rb") as fh:
            entries = read_entries(fh, f"{ref}: layer {n} of {len(descs)} ({digest})")
        layers.append(Layer(digest=digest, diff_id=diff_id, media_type=media, entries=entries))
    return ImageTree(
        ref=ref, manifest_digest=mdigest, config_digest=cdigest, annotations=annotations,
        config=config, layers=tuple(layers), manifest=manifest,
    )  # fmt: skip


def read_entries(stream: IO[bytes], layer: str = "the layer") -> tuple[Entry, ...]:
    """Every member of a layer tar (gzip, zstd-free or plain), streamed in order; EngineError
    naming ``layer`` where it is no tar, or a member's mtime no time (a PAX header's 1e999)."""
    out = []
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for member in tar:
                out.append(_entry(member, tar.extractfile(member) if member.isreg() else None,
                                  layer))  # fmt: skip
    except tarfile.TarError as e:
        raise EngineError(f"{layer} is not a tar, plain or gzip ({e}); {FIX}") from None
    return tuple(out)


def _entry(m: tarfile.TarInfo, data: IO[bytes] | None, layer: str) -> Entry:
    # a PAX header's mtime is a float (1e999 is inf, and int() of it an OverflowError)
    if not (math.isfinite(m.mtime) and int(m.mtime) in MTIMES):
        raise EngineError(f"{layer}: {shown(m.name, 200)} has the mtime {m.mtime}, not a time "
                          f"(seconds within ±2**63); {FIX}")  # fmt: skip
    entry = Entry(
        path=m.name.removeprefix("./").strip("/") or ".",
        kind=KINDS.get(m.type, f"type-{m.type!r}"),
        mode=m.mode & 0o7777, uid=m.uid, gid=m.gid, uname=m.uname, gname=m.gname,
        mtime=int(m.mtime), size=m.size, link=m.linkname, xattrs=xattrs(m.pax_headers),
    )  # fmt: skip
    return entry if data is None else scan(data, entry)


def xattrs(pax: Mapping[str, str]) -> tuple[tuple[str, bytes], ...]:
    """A member's extended attributes from its PAX headers, by name: ``SCHILY.xattr.NAME``
    (GNU tar, buildah, BuildKit: the value's bytes, which tarfile reads as UTF-8 with
    surrogates) and ``LIBARCHIVE.xattr.NAME`` (bsdtar: the name URL-encoded, the value
    base64), the first where both name one."""
    out: dict[str, bytes] = {}
    for key, value in pax.items():
        if key.startswith(SCHILY_XATTR):
            out[key.removeprefix(SCHILY_XATTR)] = value.encode("utf-8", "surrogateescape")
    for key, value in pax.items():
        if key.startswith(LIBARCHIVE_XATTR):
            raw = value.encode("utf-8", "surrogateescape")
            with contextlib.suppress(ValueError):  # binascii.Error: not base64, kept as is
                raw = base64.b64decode(raw + b"=" * (-len(raw) % 4), validate=True)
            out.setdefault(unquote(key.removeprefix(LIBARCHIVE_XATTR)), raw)
    return tuple(sorted(out.items()))


def scan(data: IO[bytes], entry: Entry) -> Entry:
    """``entry`` with the sha256, head and markers of its bytes, read in CHUNK pieces."""
    sha, head, tail = hashlib.sha256(), b"", b""
    paths: list[str] = []
    clock = uuid = ""
    while chunk := data.read(CHUNK):
        sha.update(chunk)
        head = head or chunk[:HEAD]
        window = tail + chunk  # a marker split across two chunks is still found
        for text in build_paths(window):
            if text not in paths and len(paths) < MAX_MARKS:
                paths.append(text)
        if not clock and (found := CLOCK.search(window)):
            clock = found.group().decode()
        if not uuid and (found := UUID.search(window)):
            uuid = found.group().decode()
        tail = chunk[-80:]
    return replace(entry, sha256=sha.hexdigest(), head=head, build_paths=tuple(paths),
                   clock=clock, uuid=uuid)  # fmt: skip


def build_paths(data: bytes) -> list[str]:
    """The build paths in ``data``, leaving out those inside a URL (``https://host/build/…``)."""
    out = []
    for found in BUILD_PATH.finditer(data):
        before = data[max(0, found.start() - URL_LOOKBACK) : found.start()]
        if URL_HOST.search(TOKEN_END.split(before)[-1]):
            continue
        out.append(found.group().decode(errors="replace"))
    return out


def merged(tree: ImageTree) -> dict[str, Entry]:
    """The file system the layers make, by path: later layers win, whiteouts delete.

    A layer's whiteouts apply to the layers below it only (the OCI rule), so each
    layer's deletions run before its own entries are added.
    """
    files: dict[str, Entry] = {}
    for layer in tree.layers:
        for e in layer.entries:
            folder, _, name = e.path.rpartition("/")
            if name == ".wh..wh..opq":
                prefix = f"{folder}/" if folder else ""
                for p in [p for p in files if p.startswith(prefix)]:
                    del files[p]
            elif name.startswith(".wh."):
                gone = f"{folder}/{name[4:]}" if folder else name[4:]
                for p in [p for p in files if p == gone or p.startswith(f"{gone}/")]:
                    del files[p]
        for e in layer.entries:
            if not e.path.rpartition("/")[2].startswith(".wh."):
                files[e.path] = e
    return files
