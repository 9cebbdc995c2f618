"""Known causes of non-reproducible images, each with its fix, and the classifier.

Pure: it looks at two entries of one path (either may be missing) and names
the most specific known cause. Which fields differ comes first: equal bytes
with another mtime are timestamps whatever the path (a ``.pyc`` or an apt log
included). Then a path known to be noisy (apt logs, the ldconfig cache,
``.pyc``) is named by its path before its bytes are looked at. A build path
is blamed only when the two files embed different build paths: a constant
``/build/…`` string (or a URL's path) in both is not a cause.

A config or manifest field that differs is named by its place
(:func:`field_cause`): times, a history comment holding host state, a step,
the platform, the manifest; labels are the explainer's (it knows them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lockpipe.verify.tree import Entry


@dataclass(frozen=True)
class Cause:
    name: str
    why: str
    fix: str


TIMESTAMPS = Cause(
    "timestamps",
    "a build time is written into the image (file times, or a date in a file's bytes)",
    "clamp times to SOURCE_DATE_EPOCH (buildah/podman --timestamp, BuildKit rewrite-timestamp); "
    'write dates as `date -u -d "@$SOURCE_DATE_EPOCH"`, never the build clock',
)
PYC = Cause(
    "pyc",
    ".pyc files record their source's mtime (header bytes 8..12) or a temp build path",
    "set PYTHONDONTWRITEBYTECODE=1 during installs, or compile with "
    "`python -m compileall --invalidation-mode unchecked-hash`, with SOURCE_DATE_EPOCH set",
)
APT_LOG = Cause(
    "apt-log",
    "apt and dpkg logs and caches record when and how packages were installed",
    "delete /var/log/apt/*, /var/log/dpkg.log and /var/cache/apt/* in the same RUN as apt-get",
)
LDCONFIG = Cause(
    "ldconfig-cache",
    "/var/cache/ldconfig/aux-cache holds inode numbers and times of the build file system",
    "rm -f /var/cache/ldconfig/aux-cache in the same RUN that ran ldconfig",
)
BUILD_PATH = Cause(
    "build-path",
    "a build directory or temp path is embedded in the file's bytes",
    "build in a fixed directory and map it away: -ffile-prefix-map=$PWD=. (C/C++), "
    "--remap-path-prefix (Rust), -trimpath (Go)",
)
RANDOM = Cause(
    "random",
    "a random value (a UUID) is written into the image",
    "derive the value from the lock (a build arg) or create it when the container starts",
)
METADATA = Cause(
    "metadata",
    "the same bytes with another mode, owner or link target",
    "set them explicitly (COPY --chmod/--chown, chmod in the RUN), and build with the same "
    "engine: isolation and umask differ between engines",
)
XATTRS = Cause(
    "xattrs",
    "the same file with other extended attributes: file capabilities (security.capability), "
    "an SELinux label (security.selinux) or an ACL (system.posix_acl_*)",
    "set them in the RUN (setcap, setfacl) and build with the same engine and storage: "
    "engines and storage drivers differ in which extended attributes they keep",
)
CONTENT = Cause(
    "content",
    "a step writes different bytes or a different set of files each time",
    "find the step in the image history (created_by) and make it depend only on the lock: "
    "no network fetches without a hash, no dates, no random values",
)
FILE_ORDER = Cause(
    "file-order",
    "the same entries, written to the layer tar in another order",
    "build with the same engine and version: each engine sorts entries its own way",
)
ENCODING = Cause(
    "tar-encoding",
    "the same entries in the same order, encoded in other bytes (tar headers or compression)",
    "build and push with the same engine and version; compare file trees, not digests",
)
ENGINE = Cause(
    "engine",
    "the images were built by another engine or engine version",
    "rebuild with the engine and version in the build record (lockpipe build --engine)",
)
INPUTS = Cause(
    "lock-inputs",
    "the images were built from different lock inputs (their fingerprint labels differ)",
    "compare with an image built from the same lock commit (see its images.json entry)",
)
MOVED_BASE = Cause(
    "moved-base",
    "the base image differs: a refresh moved a base digest between the builds",
    "rebuild from the same lock commit, or publish again after the refresh",
)
CONFIG_TIMES = Cause(
    "timestamps",
    "the image config's creation times (created, each history entry's created) differ",
    "clamp times to SOURCE_DATE_EPOCH (buildah/podman --timestamp; BuildKit >= 0.11 reads "
    "the SOURCE_DATE_EPOCH build arg); dockerd < 23 cannot, build with buildah or podman",
)
HOST_HISTORY = Cause(
    "host-history",
    "the engine wrote this host's state into the image history: buildah and podman record "
    "the base by its first name in local storage and each later step by the ID of the "
    'previous intermediate image (history comment "FROM …")',
    "build with lockpipe on both sides: each build pulls a pinned base whose first local name "
    "is another one by its pinned reference, and marks each FROM so the layer cache cannot "
    "take another build's step (docs/reproducibility.md); compare with an image built that way",
)
STEP = Cause(
    "step",
    "the build steps differ: a history entry's instruction (created_by), or the number of steps",
    "build both from the same lock commit, Containerfile and build args; the created_by "
    "values show which instruction changed",
)
PLATFORM = Cause(
    "platform",
    "the images are for another os, architecture or variant",
    "build both for the target's platform (--platform os/arch[/variant]) on a host of it",
)
CONFIG = Cause(
    "config",
    "an image config field differs (set by the Containerfile, a build option or the engine)",
    "set it the same way in both builds (ENV, LABEL, VOLUME, STOPSIGNAL, USER, WORKDIR, "
    "CMD, build args), built from the same lock commit with the same engine and version",
)
CONFIG_BYTES = Cause(
    "config-encoding",
    "the config digests differ but none of their fields does: the bytes differ in key order "
    "or whitespace, or in docker-only keys that skopeo's OCI export drops",
    "build with the same engine and version; compare configs by field, not by digest",
)
MANIFEST = Cause(
    "manifest",
    "one config and its layers in two manifests: layer media types, compression or annotations "
    "differ, which the push or the export chose, not the build",
    "compare config digests (the image ID), as verify --rebuild does; push with the same "
    "engine, version and compression for equal manifests",
)
ALL = (TIMESTAMPS, PYC, APT_LOG, LDCONFIG, BUILD_PATH, RANDOM, METADATA, XATTRS, CONTENT,
       FILE_ORDER, ENCODING, ENGINE, INPUTS, MOVED_BASE, HOST_HISTORY, STEP, PLATFORM, CONFIG,
       CONFIG_BYTES, MANIFEST)  # fmt: skip
PLATFORM_KEYS = ("os", "architecture", "variant", "os.version", "os.features")
HEX_ID = re.compile(r"\b[0-9a-f]{12,64}\b")  # an image ID, short (12) or whole
BASE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}")

APT_PATHS = ("var/log/apt/", "var/cache/apt/", "var/lib/apt/lists/")
APT_FILES = ("var/log/dpkg.log", "var/log/alternatives.log", "var/cache/debconf/templates.dat-old")
LDCONFIG_PATH = "var/cache/ldconfig/aux-cache"


def differing_fields(a: Entry | None, b: Entry | None) -> tuple[str, ...]:
    """Which of content, kind, mode, owner (name), mtime, link differ, and each extended
    attribute that does (``xattr NAME``: set on one side only, or to another value);
    ``only in A/B``."""
    if a is None or b is None:
        return ("only in B",) if a is None else ("only in A",)
    out = []
    if a.kind != b.kind:
        out.append("kind")
    if a.sha256 != b.sha256 or a.size != b.size:
        out.append("content")
    if a.mode != b.mode:
        out.append("mode")
    if (a.uid, a.gid) != (b.uid, b.gid):
        out.append("owner")
    if (a.uname, a.gname) != (b.uname, b.gname):
        out.append("owner name")  # the same IDs, named or not in the tar header
    if a.mtime != b.mtime:
        out.append("mtime")
    if a.link != b.link:
        out.append("link")
    ax, bx = dict(a.xattrs), dict(b.xattrs)
    out += [f"xattr {n}" for n in sorted(set(ax) | set(bx)) if ax.get(n) != bx.get(n)]
    return tuple(out)


def classify(a: Entry | None, b: Entry | None) -> Cause:
    """The most specific known cause for one path whose entries differ."""
    some = a if a is not None else b
    if some is None:
        raise ValueError("classify needs at least one entry")
    path = some.path
    fields = set(differing_fields(a, b))
    if fields == {"owner name"}:
        return ENCODING
    if fields in ({"mtime"}, {"mtime", "owner name"}):
        return TIMESTAMPS
    if fields and all(f.startswith("xattr ") for f in fields):
        return XATTRS
    if path.startswith(APT_PATHS) or path in APT_FILES:
        return APT_LOG
    if path == LDCONFIG_PATH:
        return LDCONFIG
    if path.endswith(".pyc"):
        return PYC
    if a is None or b is None or "content" not in fields:
        return CONTENT if a is None or b is None else METADATA
    if set(a.build_paths) != set(b.build_paths):
        return BUILD_PATH
    if a.clock != b.clock and a.clock and b.clock:
        return TIMESTAMPS
    if a.uuid != b.uuid and a.uuid and b.uuid:
        return RANDOM
    return CONTENT


def pyc_detail(a: Entry | None, b: Entry | None) -> str:
    """For a .pyc: whether its header's source-mtime field (bytes 8..12) differs."""
    if a is None or b is None or len(a.head) < 12 or len(b.head) < 12:
        return ""
    if a.head[8:12] != b.head[8:12]:
        return "its header's source mtime (bytes 8..12) differs"
    return "its header is equal; the code object differs (a temp path or an unsorted set)"


def field_cause(path: tuple[str | int, ...], a: Any, b: Any) -> Cause:
    """The cause of one differing config field (``path`` as ``fields.changes`` gives it)."""
    head = path[0] if path else ""
    if head == "created" or (head == "history" and path[-1] == "created"):
        return CONFIG_TIMES
    if head == "history":
        if len(path) < 3:  # the number of entries, or an entry on one side only
            return STEP
        if path[2] == "comment" and isinstance(a, str) and isinstance(b, str):
            return comment_cause(a, b)
        return STEP if path[2] == "created_by" else CONFIG
    if head in PLATFORM_KEYS:
        return PLATFORM
    return CONTENT if head == "rootfs" else CONFIG


def comment_cause(a: str, b: str) -> Cause:
    """Two history comments: host state (a base's local name, an intermediate image's ID), or
    a moved base where both name the base by digest, or another comment."""
    if a.startswith("FROM ") and b.startswith("FROM "):
        da, db = BASE_DIGEST.findall(a), BASE_DIGEST.findall(b)
        return MOVED_BASE if da and db and da != db else HOST_HISTORY
    return HOST_HISTORY if HEX_ID.sub("ID", a) == HEX_ID.sub("ID", b) else CONFIG
