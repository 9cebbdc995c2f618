"""A Dockerfile read as BuildKit reads it, as far as the pinning rules need.

Each rule names the file of moby/buildkit it follows (frontend/dockerfile/…); none of its
code is copied. Where lint cannot tell what the engine does, it reads more, never less.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lockpipe.jsonshape import loads

# A parser directive (parser/directives.go, directiveRegexp; Go's \s is ASCII).
_DIRECTIVE = re.compile(r"([a-zA-Z][a-zA-Z0-9]*)[\t\n\f\r ]*=[\t\n\f\r ]*(.+?)[\t\n\f\r ]*")
_KNOWN_DIRECTIVES = ("syntax", "escape", "check")
# the words of an instruction, as BuildKit's splitCommand splits them (parser/parser.go)
WORDS = re.compile(r"[\t\v\f\r ]+")
# a heredoc word (parser/parser.go, reHeredoc): fd, chomp, the terminator
_HEREDOC = re.compile(r"(\d*)<<(-?)\s*([^<]*)")
# a shell word with its quotes and escapes kept, as heredocsFromLine lexes the line
_RAW_WORD = re.compile(r"""(?:[^\s'"\\]|\\.?|'[^']*'?|"(?:[^"\\]|\\.?)*"?)+""")
# What ends a flag: Go's unicode.IsSpace, but byte by byte, so no more than ASCII's
# spaces for certain; a word lint does not end where BuildKit does is only read further.
_FLAG_SPACE = "\t\n\v\f\r "
_HEREDOC_KEYWORDS = ("RUN", "COPY", "ADD")  # parser/parser.go, heredocDirectives


@dataclass(frozen=True, kw_only=True)
class Instruction:
    line: int
    keyword: str
    args: str
    body: str = ""  # the heredocs' contents, one after another, as the lines read
    unterminated: str = ""  # the heredoc word no line ends (BuildKit fails the build)


def source_lines(text: str) -> list[str]:
    """The lines as BuildKit's scanner cuts them: at ``\\n`` only, the ``\\r`` dropped;
    a byte order mark before the first is dropped too (parser.go and directives.go,
    discardBOM)."""
    return [line.rstrip("\r") for line in text.removeprefix("\ufeff").split("\n")]


def _directives(lines: list[str], prefix: str) -> Iterator[tuple[int, str, str]]:
    """(index, key, value) of the leading parser directives written after ``prefix``,
    as DirectiveParser reads them (parser/directives.go): they end at the first line
    that is not one of a known key, or at a key seen before. A leading space before the
    prefix, which DetectSyntax would not allow, is allowed here: lint reads more."""
    seen = set()
    for index, line in enumerate(lines):
        line = line.lstrip()
        if not line.startswith(prefix):
            return
        m = _DIRECTIVE.fullmatch(line.removeprefix(prefix).lstrip())
        key = m.group(1).lower() if m else ""
        if key not in _KNOWN_DIRECTIVES or key in seen:
            return
        seen.add(key)
        yield index, key, m.group(2) if m else ""


def escape_char(text: str) -> str:
    """The escape character a ``# escape=`` parser directive sets: ``\\`` or a backtick.

    Directives count only in the leading comments, until the first line that is not one
    of a known kind (syntax, escape, and check since Dockerfile 1.8); another value fails
    the build, so it is left at the default here.
    """
    for _, key, value in _directives(source_lines(text), "#"):
        if key == "escape":
            return value if value in ("\\", "`") else "\\"
    return "\\"


def syntax_directives(text: str) -> Iterator[tuple[int, str]]:
    """(line, image) of each frontend a ``syntax`` directive names, as BuildKit's
    DetectSyntax finds it (parser/directives.go): after a byte order mark and a ``#!``
    first line, in ``#`` comments, else in ``//`` comments, else as the ``"syntax"`` key
    of a file that is one JSON object. The image is the value's first word."""
    lines = source_lines(text)
    skip = 1 if lines[0].startswith("#!") else 0  # discardShebang
    found = False
    for prefix in ("#", "//"):
        for index, key, value in _directives(lines[skip:], prefix):
            if key == "syntax":
                found = True
                yield index + skip + 1, value.partition(" ")[0]
        if found:
            return
    try:
        document = loads("\n".join(lines[skip:]))
    except ValueError:  # not JSON, or nested past json's recursion (jsonshape.TooDeep)
        return
    if isinstance(document, dict) and isinstance(document.get("syntax"), str):
        yield skip + 1, document["syntax"].partition(" ")[0]


def _heredoc_names(line: str) -> Iterator[tuple[str, bool]]:
    """(terminator, chomp) of each heredoc a RUN, COPY or ADD line opens
    (parser/parser.go, heredocsFromLine and heredocFromMatch): a word ``[fd]<<[-]NAME``,
    NAME unquoted."""
    for word in _RAW_WORD.findall(line):
        m = _HEREDOC.fullmatch(word)
        if m is None or not m.group(3):
            continue
        name = re.sub(r"""\\(.)|['"]""", lambda e: e.group(1) or "", m.group(3))
        if name and not any(c.isspace() for c in name):
            yield name, m.group(2) == "-"


def instructions(text: str) -> Iterator[Instruction]:
    """Instructions with continuation lines joined; comments and blanks dropped.

    As BuildKit reads them (parser/parser.go, Parse): a line continues only when it ends
    in the escape character (``\\``, or what ``# escape=`` sets) and then nothing but
    spaces and tabs; a blank or comment line inside a continuation is skipped, not its
    end; a continuation still open at the end of the file is an instruction all the same.
    The heredocs a RUN, COPY or ADD opens are its ``body``, not instructions.
    """
    escape = escape_char(text)
    lines = source_lines(text)
    buf: list[str] = []
    start = 0

    def joined() -> tuple[str, str]:
        keyword, *rest = WORDS.split(" ".join(buf).strip(), maxsplit=1)
        return keyword.upper(), rest[0].strip() if rest else ""

    number = 0
    while number < len(lines):
        raw = lines[number]
        number += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not buf:
            start = number
        body = raw.rstrip(" \t")
        if body.endswith(escape):
            buf.append(body[:-1].strip())
            continue
        buf.append(stripped)
        keyword, args = joined()
        buf = []
        inner, cmd = keyword, args
        if keyword == "ONBUILD":  # parser.go, canContainHeredoc: the instruction it carries
            inner, *rest = WORDS.split(args, maxsplit=1)
            inner, cmd = inner.upper(), rest[0] if rest else ""
        docs: list[str] = []
        open_word = ""
        if inner in _HEREDOC_KEYWORDS and "<<" in cmd and not _is_json_form(cmd, escape):
            for name, chomp in _heredoc_names(cmd):
                open_word = name
                while number < len(lines):
                    line = lines[number]
                    number += 1
                    if (line.lstrip("\t") if chomp else line) == name:
                        open_word = ""
                        break
                    docs.append(line)
        yield Instruction(line=start, keyword=keyword, args=args, body="\n".join(docs),
                          unterminated=open_word)  # fmt: skip
    if buf:
        keyword, args = joined()
        yield Instruction(line=start, keyword=keyword, args=args)


def builder_flags(args: str, escape: str) -> tuple[list[str], str]:
    """The leading ``--flag`` words of an instruction's arguments, quotes and escapes
    taken out, and the rest, as BuildKit's extractBuilderFlags reads them
    (parser/split_command.go); a ``--`` word ends them."""
    flags: list[str] = []
    pos, n = 0, len(args)
    while True:
        while pos < n and args[pos] in _FLAG_SPACE:
            pos += 1
        if not args.startswith("--", pos):
            return flags, args[pos:]
        word: list[str] = []
        quote = ""
        while pos < n and (quote or args[pos] not in _FLAG_SPACE):
            ch = args[pos]
            pos += 1
            if not quote and ch in "'\"":
                quote = ch
                continue
            if quote and ch == quote:
                quote = ""
                continue
            if ch == escape:
                if pos == n:
                    break
                ch = args[pos]
                pos += 1
            word.append(ch)
        if "".join(word) == "--":
            return flags, args[pos:]
        flags.append("".join(word))


def _is_json_form(args: str, escape: str) -> bool:
    """Whether the command is the exec form, a JSON list of strings (parser's
    parseMaybeJSON), which takes no heredoc."""
    rest = builder_flags(args, escape)[1].strip()
    try:
        value = loads(rest) if rest.startswith("[") else None
    except ValueError:
        return False
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def mount_options(spec: str) -> Iterator[tuple[str, str]]:
    """(key, value) of each field of a ``--mount`` spec: BuildKit reads it as one CSV
    record and lower-cases each key (instructions/commands_runmount.go, parseMount).
    The key is stripped as well: a spaced key fails the build, lint reads it all the same."""
    try:
        fields = next(csv.reader([spec]), [])
    except csv.Error:  # BuildKit fails the build; lint falls back to the commas
        fields = spec.split(",")
    for field in fields:
        key, _, value = field.partition("=")
        yield key.strip().lower(), value
