"""Values read out of JSON that comes from elsewhere: a server's answer, a registry's manifest.

Such a document may have any shape. :meth:`Reader.get` reads one value by its path and
checks its type, so a wrong shape is one line naming where the document came from and
the path that held what (``…/v1/models: data is an object, not a list``), raised as the
error class the caller gives: a failed check in smoke, a RegistryError for a registry.
Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from lockpipe.errors import LockpipeError

T = TypeVar("T")
Key = str | int  # an object's key, or a list's index
# Control characters (C0 but the tab, DEL, C1) and Unicode's line and paragraph separators:
# NUL and CR end a unit line for systemd, and none belongs in a line a person reads.
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")  # half of a UTF-16 pair, which UTF-8 cannot encode
_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "true/false"),  # before int: JSON's true is not a count
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


class TooDeep(ValueError):
    """JSON nested deeper than json's decoder can follow: it recurses per level, so some
    thousand ``[`` or ``{`` end it in a RecursionError."""


def loads(data: bytes | str) -> Any:
    """``data`` decoded as JSON, as :func:`json.loads`; a ValueError for anything it cannot
    read, :class:`TooDeep` where it is nested too deeply (never a RecursionError)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise TooDeep("nested too deeply to read") from None


def kind_of(value: object) -> str:
    """What JSON calls ``value``'s type: ``an object``, ``a list``, ``null``…"""
    if value is None:
        return "null"
    return next((name for t, name in _KINDS if isinstance(value, t)), type(value).__name__)


def _kind_name(want: type) -> str:
    return next((name for t, name in _KINDS if t is want), want.__name__)


def render(path: Sequence[Key]) -> str:
    """``data[0].id``: a path as JavaScript would write it."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else key
    return out


def _child(node: dict[Any, Any] | list[Any], key: Key) -> tuple[bool, object]:
    """(whether ``node`` has ``key``, the value there)."""
    if isinstance(node, dict):
        return key in node, node.get(key)
    if isinstance(key, int) and 0 <= key < len(node):
        return True, node[key]
    return False, None


@dataclass(frozen=True, kw_only=True)
class Reader:
    """Reads documents from one source. For the messages: ``where`` names the source (a
    URL, an image reference), ``root`` the document itself (``the answer``, ``the
    manifest``); ``error`` is raised, ending with ``fix`` when there is one."""

    where: str
    root: str
    error: type[LockpipeError]
    fix: str = ""

    def fail(self, what: str) -> LockpipeError:
        """The error to raise, saying ``what`` is wrong with the document."""
        return self.error(f"{self.where}: {what}" + (f"; {self.fix}" if self.fix else ""))

    def parse(self, data: bytes | str) -> dict[str, Any]:
        """``data`` as a JSON object."""
        try:
            doc = loads(data)
        except TooDeep:
            raise self.fail(f"{self.root} is nested too deeply to read") from None
        except ValueError:
            raise self.fail(f"{self.root} is not JSON") from None
        return self.get(doc, (), dict)

    def get(self, doc: object, path: Sequence[Key], want: type[T], default: T | None = None) -> T:
        """The value at ``path`` in ``doc``, a ``want``. Where the path ends early or holds
        null, ``default``, or an error when there is none; another type is always one."""
        node = doc
        for i, key in enumerate(path):
            inside = dict if isinstance(key, str) else list
            if node is None and default is not None:
                return default
            if not isinstance(node, inside):
                raise self._wrong(path[:i], node, inside)
            there, child = _child(node, key)
            if there:
                node = child
            elif default is not None:
                return default
            else:
                raise self.fail(f"{self.root} has no {render(path[: i + 1])}")
        if node is None and default is not None:
            return default
        if not isinstance(node, want) or (isinstance(node, bool) and want is not bool):
            raise self._wrong(path, node, want)
        lone = _SURROGATE.search(node) if isinstance(node, str) else None
        if lone is not None:  # JSON's "\ud800" escape: a str no file, log or terminal takes
            name = render(path) or self.root
            raise self.fail(f"{name} is not text: it holds the lone surrogate {lone[0]!a}")
        return node

    def _wrong(self, path: Sequence[Key], node: object, want: type) -> LockpipeError:
        name = render(path) or self.root
        return self.fail(f"{name} is {kind_of(node)}, not {_kind_name(want)}")
