"""Checking a lock: its JSON text, its shape (the schema), and what refers to what.

Every failure is a line ``json.path: what is wrong`` that the caller joins into
one LockError (exit 2). Nothing here raises anything else for bad input: huge
numbers, duplicate keys and NaN are caught while decoding, with their path.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from lockpipe.errors import LockError
from lockpipe.lock.refs import ReferenceError, parse_ref
from lockpipe.lock.schema import LOCK_SCHEMA, PLACEHOLDER
from lockpipe.urls import clipped, shown

# Changes with what schema_errors checks beyond the schema's text (a "$" ending a pattern
# is the string's end; an "integer" is a JSON number without a fraction or exponent), so a
# lock a laxer check passed is checked again.
_CHECKS = 4
MAX_DIGITS = 19  # every integer in a lock fits in 64 bits; a longer one is an error
_PATTERN_HINTS = {
    "^sha256:[0-9a-f]{64}$": "must be 'sha256:' and 64 lowercase hex digits",
    "^[0-9a-f]{64}$": "must be 64 lowercase hex digits (a sha256)",
    "^[0-9a-f]{40}$": "must be a full 40-hex-digit commit",
}


class _Bad:
    """A value the decoder refused; found with its path after decoding."""

    def __init__(self, why: str) -> None:
        self.why = why


class _Object(dict[str, Any]):
    """A JSON object that remembers keys it saw twice."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    obj.duplicates = []
    for key, value in pairs:
        if key in obj:
            obj.duplicates.append(key)
        obj[key] = value
    return obj


def _int(text: str) -> int | _Bad:
    digits = text.lstrip("-")
    if len(digits) > MAX_DIGITS:
        return _Bad(f"a {len(digits)}-digit number; numbers in a lock fit in 64 bits")
    return int(text)


def _constant(name: str) -> _Bad:
    return _Bad(f"{name} is not a number JSON allows")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return _Bad(f"{text} is out of range") if value in (float("inf"), float("-inf")) else value


def _clean(value: Any, path: str, errors: list[str]) -> Any:
    """``value`` with plain dicts, and a line in ``errors`` for each refused value."""
    if isinstance(value, _Bad):
        errors.append(f"{path or '(top level)'}: {value.why}")
        return None
    if isinstance(value, _Object):
        for key in value.duplicates:
            errors.append(f"{_join(path, key)}: the key appears twice; keep one (JSON readers "
                          "disagree on which one wins)")  # fmt: skip
        return {k: _clean(v, _join(path, k), errors) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def decode(text: str, path: Path) -> Any:
    """The lock document in ``text``; LockError with the line, or the JSON path, on bad input."""
    try:
        raw = json.loads(text, object_pairs_hook=_pairs, parse_int=_int,
                         parse_float=_float, parse_constant=_constant)  # fmt: skip
    except json.JSONDecodeError as exc:
        raise LockError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); "
            "fix it by hand or restore it with git checkout"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise LockError(
            f"{path}: cannot be read as JSON ({exc}); restore it with git checkout"
        ) from None
    errors: list[str] = []
    doc = _clean(raw, "", errors)
    if errors:
        raise LockError(f"{path} is not a valid lock:\n  " + "\n  ".join(errors[:12]))
    return doc


def schema_key(text: str) -> str:
    """Names a (lock text, schema) pair that validated, for load_lock's marker."""
    schema = json.dumps(LOCK_SCHEMA, sort_keys=True)
    return hashlib.sha256(f"{schema}\0{_CHECKS}\0{text}".encode()).hexdigest()


def _json_path(parts: Any) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """JSON Schema's ``pattern``, with a ``$`` that ends it meaning the end of the
    string: Python's also matches before a last newline ("sha256:<hex>\\n")."""
    import jsonschema

    whole = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    if validator.is_type(instance, "string") and not re.search(whole, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _integer(checker: Any, instance: Any) -> bool:
    """JSON Schema's "integer" takes 8080.0; a lock's integers reach podman and buildah as
    text ("8080.0" is no port), so only a number written without a fraction is one."""
    return type(instance) is int


def schema_errors(doc: Any) -> list[str]:
    import jsonschema  # only when a lock is new to this checkout (see load_lock)

    extend: Any = jsonschema.validators.extend  # untyped in jsonschema's stubs
    base = jsonschema.Draft202012Validator
    types = base.TYPE_CHECKER.redefine("integer", _integer)
    validator = extend(base, {"pattern": _pattern}, type_checker=types)(LOCK_SCHEMA)
    out = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        msg = err.message
        if err.validator == "pattern":
            msg = f"{shown(err.instance, 120)} {_PATTERN_HINTS.get(str(err.validator_value), msg)}"
        elif err.validator == "additionalProperties" and err.path:
            msg = f"{msg} (check the spelling against README.md's lock fields)"
        elif err.validator == "type" and err.validator_value == "integer":
            if isinstance(err.instance, float):
                msg = f"must be a whole number, not {err.instance!r}"
                if err.instance.is_integer():
                    msg += f" (write {int(err.instance)})"
        elif err.validator in ("maximum", "minimum"):
            msg = f"{err.instance} is out of range ({err.validator} {err.validator_value})"
        out.append(f"{_json_path(err.absolute_path)}: {clipped(msg, 400)}")  # jsonschema
    return out + control_errors(doc)  # puts the whole value in its message: 100 KB lines


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def control_errors(value: Any, path: str = "") -> list[str]:
    """A line for each key or string in the lock holding a C0 control character or DEL.

    A lock's strings reach argv (build arguments, a serving command), a quadlet unit's
    lines and file names, where a NUL is "embedded null byte" and a newline a new line;
    no lock value needs one (a note is one line too).
    """
    if isinstance(value, str):
        found = _CONTROL.search(value)
        if found is None:
            return []
        shown = value if len(value) <= SHOWN_CHARS else f"{value[:SHOWN_CHARS]}…"
        return [f"{path or '(top level)'}: {shown!r} must not contain control characters "
                f"(found {found.group()!r}; C0 and DEL reach argv and unit files)"]  # fmt: skip
    out = []
    if isinstance(value, dict):
        for key, item in value.items():
            if _CONTROL.search(key):
                out.append(f"{_join(path, repr(key))}: the key {key!r} must not contain "
                           "control characters")  # fmt: skip
            else:
                out += control_errors(item, _join(path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += control_errors(item, f"{path}[{i}]")
    return out


def _filename_error(filename: str) -> str | None:
    """Why a payload filename could escape its snapshot folder, or None."""
    name = PurePosixPath(filename)
    if any(ord(c) < 0x20 or c == "\x7f" for c in filename):
        return "must not contain control characters"
    if name.is_absolute() or "\\" in filename:
        return "must be a relative path with forward slashes"
    if any(part in ("..", ".", "") for part in filename.split("/")):
        return "must not contain '..', '.' or empty parts"
    return None


def _nested_file_errors(name: str, files: Any) -> list[str]:
    """A line for each path of a snapshot payload under another path it lists as a file
    (``extra`` and ``extra/b``): no folder holds both, so its fetch could never finish."""
    listed = set(files)
    out = []
    for path in sorted(listed):
        for parent in PurePosixPath(path).parents:
            if str(parent) in listed:
                out.append(
                    f"payloads.{name}.files.{path}: {path!r} is under {str(parent)!r}, which "
                    f"payloads.{name}.files lists as a file too; a path is a file or a folder, "
                    "not both: remove one of them"
                )
                break
    return out


def _inside_error(
    key: str, value: str, path: Path, folder: Path, what: str, *, links: bool = True
) -> str | None:
    """The error for lock ``key`` when its ``value`` is absolute, or ``path`` (made of it)
    leads outside ``folder`` (``what`` names the folder for the user): its links followed,
    or with ``links`` False its '..' only (a file whose bytes the lock pins may be a link)."""
    if PurePosixPath(value).is_absolute():
        return f"{key}: {shown(value, SHOWN_CHARS)} must be a path relative to {what}, not an " \
            "absolute one; write it relative to that folder"  # fmt: skip
    try:
        if links:
            inside = path.resolve().is_relative_to(folder.resolve())
        else:
            inside = posixpath.normpath(value).split("/")[0] != ".."
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        return f"{key}: {shown(value, SHOWN_CHARS)} cannot be resolved ({exc})"
    if not inside:
        return f"{key}: {shown(value, SHOWN_CHARS)} leads outside {what} ('..' or a symbolic " \
            "link); move the file into that folder and name it from there"  # fmt: skip
    return None


def tag_error(tname: str, tag: str) -> str | None:
    """Why ``targets.<tname>.tag`` is no reference an engine would tag an image with, or None."""
    key = f"targets.{tname}.tag"
    try:
        ref = parse_ref(tag)
    except ReferenceError as exc:
        return f"{key}: {exc}; write [registry/]repository[:tag], the repository in lowercase " \
            "(e.g. localhost/name:1)"  # fmt: skip
    if ref.digest:
        return f"{key}: {shown(tag, SHOWN_CHARS)} holds a digest; an image is tagged by name " \
            "and tag only: remove the @sha256:…"  # fmt: skip
    return None


def target_name_error(tname: str) -> str | None:
    """Why ``tname`` cannot name an image repository, or None. A target's name is a path
    component of the images lockpipe makes of it (``localhost/lockpipe-check/NAME`` for
    verify --rebuild, ``REGISTRY/PREFIX/NAME`` for publish), so it follows their grammar."""
    try:
        parse_ref(f"localhost/{tname}")
    except ReferenceError:
        return (
            f"targets.{tname}: {tname!r} cannot be an image repository name, which lockpipe "
            "makes of it (verify --rebuild, publish); rename the target: lowercase letters "
            "and digits, separated by one '.', one or two '_', or '-'s (e.g. llama-cuda)"
        )
    return None


SHOWN_CHARS = 80  # of a lock value too long to be a path, in its error

# Names fingerprint.context_paths leaves out of a build context, at any depth: not hashed,
# not staged. Here rather than there, as the fingerprint imports the model, which imports this.
LEFT_OUT = frozenset({"__pycache__"})


def left_out(rel: str) -> bool:
    """Whether context_paths leaves out ``rel``, a path in a context: some part of it is a
    name in LEFT_OUT (``__pycache__/../x`` too: the staged copy has no such folder)."""
    return any(part in LEFT_OUT for part in rel.split("/"))


def _no_path(key: str, value: str, path: Path) -> str | None:
    """The error for lock ``key`` when ``path``, made of its ``value``, can be no path at all
    (a name past NAME_MAX or PATH_MAX: is_file() raises ENAMETOOLONG rather than say no)."""
    try:
        path.is_file()
    except OSError as exc:
        shown = value if len(value) <= SHOWN_CHARS else f"{value[:SHOWN_CHARS]}…"
        why = exc.strerror or type(exc).__name__
        return f"{key}: {shown!r} ({len(value)} characters) cannot be a path here ({why})"
    return None


def cross_errors(doc: dict[str, Any], root: Path) -> list[str]:
    out = []
    for name, base in doc["bases"].items():
        try:
            ref = parse_ref(base["ref"])
        except ReferenceError as exc:
            out.append(f"bases.{name}.ref: {exc}")
            continue
        if ref.digest:
            out.append(f"bases.{name}.ref: put the digest in bases.{name}.digest, not in the ref")
        if ref.tag in (None, "latest"):
            out.append(f"bases.{name}.ref: {base['ref']!r} needs a tag other than 'latest'")
    for name, pip in doc.get("pip", {}).items():
        key, file = f"pip.{name}.file", pip["file"]
        error = _no_path(key, file, root / file) or _inside_error(
            key, file, root / file, root, f"the checkout ({root})", links=False
        )  # its sha256 is pinned: images/ may be a link (a second checkout's)
        if error:
            out.append(error)
        elif not (root / pip["file"]).is_file():
            out.append(f"pip.{name}.file: {pip['file']} does not exist under {root}")
    for name, payload in doc.get("payloads", {}).items():
        for path in payload["files"] if "files" in payload else [payload["filename"]]:
            where = f"payloads.{name}." + (f"files.{path}" if "files" in payload else "filename")
            why = _filename_error(path)
            if why:
                out.append(f"{where}: {path!r} {why}")
        if "files" in payload:
            out += _nested_file_errors(name, payload["files"])
    tags: dict[str, str] = {}
    tables = {"bases": "bases", "source": "sources", "pip": "pip", "payloads": "payloads"}
    for tname, target in doc["targets"].items():
        error = target_name_error(tname)
        if error:
            out.append(error)
        out += _placeholder_errors(tname, target)
        if "external" in target:  # built elsewhere: no tag, context or entries to check
            continue
        if target["tag"] in tags:
            out.append(f"targets.{tname}.tag: {target['tag']!r} is also targets."
                       f"{tags[target['tag']]}'s tag; each target needs its own")  # fmt: skip
        tags.setdefault(target["tag"], tname)
        error = tag_error(tname, target["tag"])
        if error:
            out.append(error)
        context, dockerfile = root / target["context"], target.get("dockerfile", "Dockerfile")
        key = f"targets.{tname}.dockerfile"
        error = (
            _no_path(f"targets.{tname}.context", target["context"], context)
            or _no_path(key, dockerfile, context / dockerfile)
            or _inside_error(key, dockerfile, context / dockerfile, context,
                             f"the context folder {target['context']}")
        )  # fmt: skip
        if error:
            out.append(error)
        elif left_out(dockerfile):
            out.append(
                f"targets.{tname}.dockerfile: {shown(dockerfile, SHOWN_CHARS)} is in a folder "
                f"the build context leaves out ({', '.join(sorted(LEFT_OUT))}), so it would be "
                "neither fingerprinted nor staged; move it out of there and name it from the "
                "context"
            )
        elif not (context / dockerfile).is_file():
            out.append(
                f"targets.{tname}.context: no Dockerfile in {root / target['context']} (paths "
                "are relative to the nearest folder above the lock that holds images/)"
            )
        out += _build_arg_errors(tname, target)
        for key, table in tables.items():
            value = target.get(key)
            used = value.values() if isinstance(value, dict) else value
            used = [used] if isinstance(used, str) else used or []
            out += [
                f"targets.{tname}.{key}: {u!r} is not in {table}; add it or fix the name"
                for u in used
                if u not in doc.get(table, {})
            ]
    return out


# What a placeholder was meant to be: ``{payloads:m}``, ``{Payload:m}``, ``{payload_dir:m}``
_LIKE_PLACEHOLDER = re.compile(r"\{\s*payload[^{}]*\}", re.IGNORECASE)


def _placeholder_errors(tname: str, target: dict[str, Any]) -> list[str]:
    """A serve command's payload placeholders: each written as lockpipe fills it, and each
    naming one of the target's payloads (a typo went to the server as a literal path)."""
    key, out = f"targets.{tname}.serve.command", []
    listed = set(target.get("payloads", []))
    for arg in target["serve"].get("command", []):
        for like in _LIKE_PLACEHOLDER.finditer(arg):
            found = PLACEHOLDER.fullmatch(like.group())
            if found is None:
                out.append(f"{key}: {shown(like.group(), 60)} is not a placeholder lockpipe "
                           "fills; write {payload:NAME} (a file) or {payload-dir:NAME} "
                           "(a snapshot's folder)")  # fmt: skip
            elif found[2] not in listed:
                out.append(f"{key}: {like.group()} names no payload of targets.{tname}; add "
                           f"{found[2]!r} to targets.{tname}.payloads or fix the name")  # fmt: skip
    return out


# Build args lockpipe sets itself (imagebuild.plan: each base's ARG, the source's, the lock's
# epoch), which a target's build_args would replace: a base's ARG given a tag was pulled
# unpinned while lint and the base label said pinned. BUILDKIT_* args steer BuildKit's
# frontend, not the Dockerfile: BUILDKIT_SYNTAX names the frontend image it pulls, over
# any # syntax= line (dockerfile frontend, build-arg:BUILDKIT_SYNTAX).
_SET_BY_LOCKPIPE = ("SOURCE_SHA256", "SOURCE_ROOT", "SOURCE_DATE_EPOCH")


def _build_arg_errors(tname: str, target: dict[str, Any]) -> list[str]:
    out = []
    for arg in target.get("build_args", {}):
        where = f"targets.{tname}.build_args.{arg}"
        if arg in target.get("bases", {}):
            out.append(f"{where}: {arg} is the ARG of bases entry targets.{tname}.bases.{arg}, "
                       "which lockpipe sets to that base pinned by digest; remove it here, and "
                       "change the base in bases if another is meant")  # fmt: skip
        elif arg in _SET_BY_LOCKPIPE:
            out.append(f"{where}: lockpipe sets {arg} itself (from the lock's source and "
                       "source_date_epoch); remove it")  # fmt: skip
        elif arg.upper().startswith("BUILDKIT_"):
            out.append(f"{where}: a BUILDKIT_ argument steers BuildKit's frontend, not the "
                       "Dockerfile (BUILDKIT_SYNTAX pulls the frontend it names, unpinned by "
                       "the lock); remove it, and pin a frontend with # syntax=IMAGE@sha256:…"
                       )  # fmt: skip
    return out
