"""A systemd unit as ordered sections of (key, value) lines, and systemd's quoting rules.

Values are kept as systemd reads them. Each free-text value goes through one of:

- :func:`label` (``Description=``): one line, ``%`` doubled (systemd expands specifiers).
- :func:`verbatim` (``HealthCmd=``, ``Volume=``, ``PublishPort=``, ``AddDevice=``): quadlet
  passes the value to podman as one argument without escaping it, and systemd then
  expands ``%`` specifiers and ``$`` variables in the ExecStart it makes: both are doubled,
  and what a unit line cannot hold (a line break, a trailing backslash: a continuation)
  is refused, naming the input.
- :func:`quote_args` (``Exec=``, ``Environment=``, ``ExecStartPre=``): a command line the
  way systemd (and quadlet, which splits ``Exec=`` with the same rules) splits it back.

:meth:`Unit.render` refuses any value that would spill onto another line, and writes each
header line through :func:`comment`, which shows a control character as its escape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lockpipe.errors import DeployError
from lockpipe.jsonshape import CONTROL

Entry = tuple[str, str]
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./{}\[\]-]+")
# The characters podman's quadlet quotes a word for (pkg/systemd/parser/split.go,
# charNeedEscape): whitespace, control characters, quotes and the backslash.
_QUADLET_QUOTES = re.compile(r"[\s\x00-\x1f\x7f\"'\\]", re.ASCII)
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _spills(value: str) -> str | None:
    """Why ``value`` cannot be one unit line as it is, and the fix; None when it can."""
    if any(c in value for c in "\n\r\x00"):
        return ("holds a line break (or NUL), which ends a unit line; put it on one line "
                "(join shell commands with ';' or '&&')")  # fmt: skip
    if value.endswith("\\"):
        return ("ends with a backslash, which systemd reads as a line continuation; drop "
                "the trailing backslash")  # fmt: skip
    return None


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def comment(text: str) -> str:
    """``text`` as one comment line of a unit: its control characters shown as escapes
    (``\\x00``; a NUL or CR ends a line for systemd, so a NUL in a header line read from a
    file added ``[Service]`` and ``ExecStartPost=`` lines), and a trailing backslash too
    (a continuation, to a reader that joins comment lines)."""
    shown = CONTROL.sub(_escape, text)
    if shown.endswith("\\"):
        shown = shown[:-1] + "\\x5c"
    return f"# {shown}" if shown else "#"


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
        """The unit file; DeployError for a value that would not stay on its own line."""
        lines = [comment(c) for h in self.header for c in h.split("\n")]
        for s in self.sections:
            if lines:
                lines.append("")
            lines.append(f"[{s.name}]")
            for k, v in s.entries:
                why = _spills(v)
                if why is not None:
                    raise DeployError(f"[{s.name}] {k}={v!r} {why} (lockpipe should have "
                                      "refused it earlier: please report it)")  # fmt: skip
                lines.append(f"{k}={v}")
        return "\n".join(lines) + "\n"


def specifiers(text: str) -> str:
    """``text`` with systemd's specifier and variable characters escaped (``%`` and ``$``)."""
    return text.replace("%", "%%").replace("$", "$$")


def label(text: str) -> str:
    """Free text for a setting systemd shows (``Description=``): whitespace runs and line
    breaks become one space, trailing backslashes go, ``%`` is doubled (specifiers)."""
    return " ".join(text.split()).rstrip("\\").rstrip().replace("%", "%%")


def verbatim(value: str, what: str) -> str:
    """A value quadlet hands podman as one argument, unescaped, into the ExecStart systemd
    expands: ``%`` and ``$`` doubled. DeployError naming ``what`` (the option or input it
    came from) and the fix when no unit line can carry it as it is."""
    why = _spills(value)
    if why is None and value != value.strip():
        why = "starts or ends with whitespace, which quadlet drops; drop the whitespace"
    if why is None and (value.startswith('"') or value.endswith('"')):
        # quadlet's Lookup trims every '"' at either end (strings.Trim), not one pair
        why = ("starts or ends with a double quote, which quadlet strips; quote inside the "
               "command instead, e.g. sh -c 'curl …'")  # fmt: skip
    if why is not None:
        raise DeployError(f"{what} {value!r} {why}")
    return specifiers(value)


def _c_escape(word: str) -> str:
    return "".join(_C_ESCAPES.get(c, c) for c in word)


def quote_word(word: str) -> str:
    """One word as podman's quadlet writes it into the ExecStart it makes (escapeWords):
    double-quoted with C escapes when it holds whitespace, a quote, a backslash or a
    control character; ``%`` and ``$`` are left as they are."""
    return f'"{_c_escape(word)}"' if _QUADLET_QUOTES.search(word) else word


def quote_arg(arg: str) -> str:
    """One word as systemd's command-line splitting reads it back (double quotes, C escapes)."""
    if _PLAIN.fullmatch(arg) and "%" not in arg:
        return arg
    return f'"{specifiers(_c_escape(arg))}"'


def quote_args(args: Sequence[str], what: str = "the command") -> str:
    """``args`` as one command line; DeployError naming ``what`` for an empty argument,
    which quadlet reads as the end of the line (extractFirstWord: an empty word is "no
    more words"), dropping every argument after it from the ExecStart it makes."""
    if "" in args:
        raise DeployError(
            f"{what}: argument {list(args).index('') + 1} is empty, and quadlet reads an empty "
            "argument as the end of the command line, dropping every one after it; drop it, "
            "or give it a value"
        )
    return " ".join(quote_arg(a) for a in args)


def split_words(text: str) -> list[str]:
    """A command line split as quadlet splits ``Exec=`` (double-quoted words, backslash
    escapes), ``%%`` and ``$$`` left for systemd."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        if i >= n:
            break
        word, quoted = [], text[i] == '"'
        i += quoted
        if quoted and i < n and text[i] == '"':  # "": quadlet's last word (extractFirstWord)
            break
        while i < n and (quoted or text[i] != " "):
            c = text[i]
            if quoted and c == '"':
                i += 1
                break
            if c == "\\" and i + 1 < n:
                i += 1
                c = {"n": "\n", "r": "\r", "t": "\t"}.get(text[i], text[i])
            word.append(c)
            i += 1
        out.append("".join(word))
    return out


def split_args(text: str) -> list[str]:
    """The inverse of :func:`quote_args`: the words systemd runs (``%%``, ``$$`` undone)."""
    return [w.replace("%%", "%").replace("$$", "$") for w in split_words(text)]


def sections(*pairs: tuple[str, Iterable[Entry]]) -> tuple[Section, ...]:
    return tuple(Section(name=name, entries=tuple(e)) for name, e in pairs)


_LINE_END = re.compile("\r\n|[\n\r\0]")


def unit_lines(text: str) -> list[str]:
    """``text``'s lines where systemd ends them (fileio.c categorize_eol: \\n, \\r, NUL).
    str.splitlines() also splits at \\x1c, \\x85, \\u2028 and 5 more, which a value may
    hold: a reader using it sees lines the unit does not have."""
    return _LINE_END.split(text)


def parse_unit(text: str) -> Unit:
    """Sections and (key, value) lines of a unit file this module rendered (no continuations)."""
    found: list[tuple[str, list[Entry]]] = []
    # at systemd's line ends: splitlines() read a serve argument 'x\x1cy' back as 'x',
    # and verify then passed a command other than the one the unit runs
    for line in unit_lines(text):
        if line.startswith("[") and line.endswith("]"):
            found.append((line[1:-1], []))
        elif "=" in line and not line.startswith(("#", ";")) and found:
            key, value = line.split("=", 1)
            found[-1][1].append((key.strip(), value.strip()))
    return Unit(header=(), sections=sections(*found))
