"""A systemd unit as ordered sections of (key, value) lines, and systemd's quoting rules.

Values are kept as systemd reads them; :func:`quote_args` writes a command line the way
systemd (and quadlet, which splits ``Exec=`` with the same rules) splits it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Entry = tuple[str, str]
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./{}\[\]-]+")


@dataclass(frozen=True, kw_only=True)
class Section:
    name: str
    entries: tuple[Entry, ...]


@dataclass(frozen=True, kw_only=True)
class Unit:
    header: tuple[str, ...]  # comment lines, without the leading "# "
    sections: tuple[Section, ...]

    def section(self, name: str) -> tuple[Entry, ...]:
        return next((s.entries for s in self.sections if s.name == name), ())

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.section(section) if k == key]

    def render(self) -> str:
        lines = [f"# {h}" if h else "#" for h in self.header]
        for s in self.sections:
            if lines:
                lines.append("")
            lines.append(f"[{s.name}]")
            lines += [f"{k}={v}" for k, v in s.entries]
        return "\n".join(lines) + "\n"


def specifiers(text: str) -> str:
    """``text`` with systemd's specifier and variable characters escaped (``%`` and ``$``)."""
    return text.replace("%", "%%").replace("$", "$$")


def quote_arg(arg: str) -> str:
    """One word as systemd's command-line splitting reads it back (double quotes, C escapes)."""
    if _PLAIN.fullmatch(arg) and "%" not in arg:
        return arg
    body = arg.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{specifiers(body)}"'


def quote_args(args: Sequence[str]) -> str:
    return " ".join(quote_arg(a) for a in args)


def split_args(text: str) -> list[str]:
    """The inverse of :func:`quote_args` (double-quoted words, backslash escapes, ``%%``)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        if i >= n:
            break
        word, quoted = [], text[i] == '"'
        i += quoted
        while i < n and (quoted or text[i] != " "):
            c = text[i]
            if quoted and c == '"':
                i += 1
                break
            if c == "\\" and i + 1 < n:
                i += 1
                c = {"n": "\n"}.get(text[i], text[i])
            elif c in "%$" and text[i : i + 2] == c * 2:
                i += 1
            word.append(c)
            i += 1
        out.append("".join(word))
    return out


def sections(*pairs: tuple[str, Iterable[Entry]]) -> tuple[Section, ...]:
    return tuple(Section(name=name, entries=tuple(e)) for name, e in pairs)


def parse_unit(text: str) -> Unit:
    """Sections and (key, value) lines of a unit file this module rendered (no continuations)."""
    found: list[tuple[str, list[Entry]]] = []
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            found.append((line[1:-1], []))
        elif "=" in line and not line.startswith(("#", ";")) and found:
            key, value = line.split("=", 1)
            found[-1][1].append((key.strip(), value.strip()))
    return Unit(header=(), sections=sections(*found))
