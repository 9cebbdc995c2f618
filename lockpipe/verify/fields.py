"""Two JSON documents (image configs, manifests) compared key by key, recursively.

Pure. Every key counts, known or not, at any depth; a key on one side only
reads ``(none)`` on the other. Lists of objects (history entries, manifest
layers) and ``rootfs.diff_ids`` are compared element by element, numbered from
1 as layers are, after their lengths; other lists (``Cmd``, ``Entrypoint``)
as whole values. ``config.Env`` is compared by variable and ``config.Labels``
by label, so one added variable is one difference, not a shifted list. The
caller names each difference's cause (``classify``): causes are not this
module's business.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lockpipe.verify.causes import Cause

Path = tuple[str | int, ...]
Classify = Callable[[Path, Any, Any], Cause]
NONE: Final = "(none)"
SHORT = 120
ELEMENTWISE: Final = frozenset({("rootfs", "diff_ids")})  # scalar lists compared per element
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Missing:
    def __repr__(self) -> str:
        return NONE


MISSING: Final = _Missing()  # a key or list element one side lacks


@dataclass(frozen=True, kw_only=True)
class FieldDiff:
    field: str  # created, history[3].comment, label NAME, env NAME, config.StopSignal, ...
    a: str  # the values, shortened; (none) where that side lacks the field
    b: str
    cause: Cause


def render(path: Path) -> str:
    """``history[3].comment``, ``label NAME``, ``env PATH``, ``config.Volumes["/data"]``."""
    if len(path) == 3 and path[:2] == ("config", "Labels"):
        return f"label {path[2]}"
    if len(path) == 3 and path[:2] == ("config", "Env"):
        return f"env {path[2]}"
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not out:
            out = part  # a top-level key as the spec writes it: os.version, not ["os.version"]
        elif IDENT.fullmatch(part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _text(value: Any) -> str:
    if value is MISSING:
        return NONE
    return value if isinstance(value, str) and value else json.dumps(value, sort_keys=True)


def shorten(a: Any, b: Any) -> tuple[str, str]:
    """Two values as the report shows them: strings bare (an empty one as ""), the rest as
    JSON; a long pair cut to where it differs, so what differs is what shows."""
    x, y = _text(a), _text(b)
    if max(len(x), len(y)) <= SHORT:
        return x, y
    common = min(len(x), len(y))
    first = next((i for i in range(common) if x[i] != y[i]), common)
    start = max(0, first - 20)
    return _cut(x, start), _cut(y, start)


def _cut(text: str, start: int) -> str:
    lead = "..." if start else ""
    body = text[start:]
    return lead + (body if len(body) <= SHORT else body[: SHORT - 3] + "...")


def _env(value: Any) -> Any:
    """``["K=V", ...]`` as ``{K: V}``; anything else unchanged."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return value
    out: dict[str, str] = {}
    for v in value:
        name, _, val = v.partition("=")
        out[name] = val
    return out


def _entries(n: int) -> str:
    return "1 entry" if n == 1 else f"{n} entries"


def _elementwise(path: Path, a: Sequence[Any], b: Sequence[Any]) -> bool:
    return path in ELEMENTWISE or any(isinstance(v, dict | list) for v in (*a, *b))


def changes(a: Any, b: Any, path: Path = ()) -> Iterator[tuple[Path, Any, Any]]:
    """Each leaf that differs, as (path, value in A, value in B), in A's key order."""
    if a == b:
        return
    if path == ("config", "Env"):
        a, b = _env(a), _env(b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in [*a, *(k for k in b if k not in a)]:
            yield from changes(a.get(key, MISSING), b.get(key, MISSING), (*path, key))
    elif isinstance(a, list) and isinstance(b, list) and _elementwise(path, a, b):
        if len(a) != len(b):
            yield path, _entries(len(a)), _entries(len(b))
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else MISSING
            y = b[i] if i < len(b) else MISSING
            yield from changes(x, y, (*path, i + 1))
    else:
        yield path, a, b


def diff(
    a: Mapping[str, Any], b: Mapping[str, Any], classify: Classify,
    *, first: Sequence[str] = (), last: Sequence[str] = (),
) -> tuple[FieldDiff, ...]:  # fmt: skip
    """Every differing field of two documents, with its cause; top-level keys in ``first``
    come first and those in ``last`` last, the rest in document order between them."""

    def rank(found: tuple[Path, Any, Any]) -> int:
        head = found[0][0] if found[0] else ""
        if head in first:
            return first.index(str(head))
        return len(first) + 1 if head in last else len(first)

    found = sorted(changes(a, b), key=rank)  # stable: document order within a rank
    out = []
    for p, x, y in found:
        sa, sb = shorten(x, y)
        out.append(FieldDiff(field=render(p), a=sa, b=sb, cause=classify(p, x, y)))
    return tuple(out)
