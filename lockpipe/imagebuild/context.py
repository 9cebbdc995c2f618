"""Build contexts: the target's folder staged into a fresh one, with its labels and sources.

The engines pack the staged folder (``lockpipe.engines.context``).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath

from lockpipe.errors import LockError
from lockpipe.fs import hash_file, read_utf8
from lockpipe.imagebuild.dockerfile import (
    builder_flags,
    escape_char,
    instructions,
    mount_options,
    source_lines,
)
from lockpipe.lock.fingerprint import context_paths
from lockpipe.urls import shown

FROM_LABEL = "io.github.lockpipe.from"
MOUNT_LABEL = "io.github.lockpipe.mount"
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", re.IGNORECASE)
_ARG = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::?[-+][^}]*)?\}?$")
_BY_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_HEREDOC = re.compile(r"<<-?[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")


def label_instruction(labels: Mapping[str, str]) -> str:
    """One ``LABEL`` line, keys sorted, values JSON-quoted (valid Dockerfile strings)."""
    return "LABEL " + " ".join(
        f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted(labels.items())
    )


def mark_bases(text: str, base_args: Mapping[str, str]) -> tuple[str, list[str]]:
    """``text`` with ``LABEL io.github.lockpipe.from=REF`` after each FROM of a pinned base,
    and the references marked.

    buildah's layer cache takes an image for a stage's first step when its
    parent and command match, whatever base name its history comment recorded
    (engines/basenames.py). Only lockpipe's builds, which settle that name
    first, make this step, so no image another build left behind (the same
    Dockerfile built under another name for the base) can be taken from the cache.
    ``base_args`` maps each ARG that holds a pinned base to its reference; a
    FROM that names an image by digest literally is marked (and settled) too.
    Continuation lines, comments inside them and heredoc bodies are read as
    Docker reads them; a ``# escape=`` other than the backslash is not.
    """
    out: list[str] = []
    marked: list[str] = []
    joined: list[str] = []  # the FROM instruction so far, continuation lines joined
    heredoc: str | None = None  # the word that ends the heredoc body being skipped
    for line in source_lines(text):  # at \n only, as BuildKit: str.splitlines also cut at
        out.append(line)  # \u2028 and \x85, and a FROM lint never saw became a stage
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if joined and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        if not joined:
            doc = _HEREDOC.search(line)
            if doc and not _FROM.match(line):
                heredoc = doc.group(1)
                continue
            if not _FROM.match(line):
                continue
        joined.append(line.rstrip().removesuffix("\\"))
        if line.rstrip().endswith("\\"):
            continue
        m = _FROM.match(" ".join(joined))
        joined = []
        word = m.group(1) if m else ""
        arg = _ARG.match(word)
        ref = base_args.get(arg.group(1)) if arg else (word if _BY_DIGEST.search(word) else None)
        if ref is not None:
            out.append(label_instruction({FROM_LABEL: ref}))
            marked.append(ref)
    return _joined(out), marked


def _joined(lines: list[str]) -> str:
    """``lines`` (source_lines': a last "" when the text ended with a line end) as text that
    ends with one line end."""
    text = "\n".join(lines)
    return text if text.endswith("\n") else text + "\n"


def _context_binds(args: str, escape: str) -> Iterator[str]:
    """The context paths a RUN bind-mounts (``--mount=[type=bind,]source=P``, no ``from=``),
    its flags and mount spec read as BuildKit reads them (dockerfile.builder_flags,
    mount_options: quotes, escapes, CSV, keys in any case)."""
    for flag in builder_flags(args, escape)[0]:
        name, eq, spec = flag.partition("=")
        if name != "--mount" or not eq:
            continue
        opts = dict(mount_options(spec))
        if opts.get("type", "bind") == "bind" and "from" not in opts:
            yield opts.get("source") or opts.get("src") or "."


def _tree_sha256(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's sorted (relative path, bytes) pairs."""
    sha = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        sha.update(f.relative_to(path).as_posix().encode() + b"\0" if f != path else b"")
        hash_file(sha, f)  # in pieces: a 600 MB wheel was read whole
    return sha.hexdigest()


def mark_mounts(text: str, context: Path, where: str = "Dockerfile") -> str:
    """``text`` with ``LABEL io.github.lockpipe.mount.SOURCE=sha256:…`` before each RUN that
    bind-mounts a context file or folder.

    buildah 1.28 keys a RUN's layer cache on its parent and command text alone, not on
    the files it bind-mounts (upstream buildah PR #5691 added them), so an edited
    requirements file under an unchanged command was taken from the cache: a cached
    build and a clean one differed. The label's step carries the bytes' digest, so the
    RUN's parent moves with them on every engine. A source is a path in the context as
    BuildKit and buildah read it: ``/req.txt`` and ``../req.txt`` are the context's
    ``req.txt`` (buildah's GetBindMount: "buildkit parity: support absolute path for
    sources from current build context"); one a link takes outside it is left to the
    engine, which refuses it. A source that can be no path at all (a NUL,
    a name past NAME_MAX) or a file that cannot be read is a LockError naming ``where``
    (the Dockerfile) and the line.
    """
    lines, escape = source_lines(text), escape_char(text)  # as instructions() counts lines
    for ins in reversed(list(instructions(text))):
        if ins.keyword != "RUN":
            continue
        labels = {}
        for source in _context_binds(ins.args, escape):
            try:
                inside = posixpath.normpath("/" + source).lstrip("/") or "."
                path, root = (context / inside).resolve(), context.resolve()
                if path.is_relative_to(root) and path.exists():  # the whole context: no suffix
                    rel = path.relative_to(root).as_posix()
                    key = MOUNT_LABEL if rel == "." else f"{MOUNT_LABEL}.{rel}"
                    labels[key] = f"sha256:{_tree_sha256(path)}"
            except (ValueError, OSError) as exc:  # ValueError: "embedded null byte"
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise LockError(
                    f"{where}:{ins.line}: RUN --mount source {shown(source, 80)} cannot be read "
                    f"as a path in the build context ({why}); name a file or folder of the context"
                ) from None
        if labels:
            lines.insert(ins.line - 1, label_instruction(labels))
    return _joined(lines)


def _copy(context: Path, dest: Path) -> None:
    """Copy the files :func:`context_paths` lists (and only those) from ``context`` to
    ``dest``, links followed, folders with their modes: what the fingerprint and the build
    key count is what the engine gets."""
    keep: set[PurePosixPath] = set()
    for rel in context_paths(context):
        keep.update(PurePosixPath(rel).parents)
        keep.add(PurePosixPath(rel))

    def skip(folder: str, names: list[str]) -> set[str]:
        rel = PurePosixPath(Path(folder).relative_to(context).as_posix())
        return {n for n in names if rel / n not in keep}

    shutil.copytree(context, dest, ignore=skip)


def _staged(dest: Path, name: str, what: str) -> Path:
    """``dest / name``, or a LockError when that leads outside ``dest`` (an absolute name,
    '..', a symbolic link): staging writes nowhere but its own folder (the lock's checks
    refuse such a dockerfile first)."""
    path = dest / name
    if PurePosixPath(name).is_absolute() or not path.resolve().is_relative_to(dest.resolve()):
        raise LockError(
            f"{what} {shown(name, 80)} leads outside the build context {dest}; name a file "
            "inside the target's context folder (targets.*.dockerfile)"
        )
    return path


def stage(
    context: Path,
    dockerfile: str,
    labels: Mapping[str, str],
    extra: Mapping[str, Path],
    dest: Path,
    base_args: Mapping[str, str] | None = None,
) -> tuple[Path, list[str]]:
    """Copy ``context`` to ``dest`` with ``extra`` files (name → path) and return dest.

    The labels are appended to the staged Dockerfile as one LABEL line rather
    than passed through each engine's API: the libpod API takes them as a Go
    map, whose random order changed the image history (and digest) per build.
    Each FROM of a pinned base gets its marker (:func:`mark_bases`); the references
    marked are returned with ``dest``, for the engine to settle. Each RUN that
    bind-mounts context files gets their digest before it (:func:`mark_mounts`).
    """
    target = _staged(dest, dockerfile, "the lock's dockerfile")
    names = {name: _staged(dest, name, "an extra file's name") for name in extra}
    _copy(context, dest)
    for name, path in extra.items():
        shutil.copyfile(path, names[name])
    where = str(context / dockerfile)  # the file the user edits, not its staged copy
    text, marked = mark_bases(
        mark_mounts(read_utf8(target, LockError), dest, where), base_args or {}
    )
    target.write_text(text.rstrip("\n") + "\n" + label_instruction(labels) + "\n")
    return dest, marked
