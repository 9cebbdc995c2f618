"""What a llama.cpp tree offers ``llama-server``: its flags and its /metrics names; pure text.

- Flags: every ``add_opt(common_arg(...))`` of ``common/arg.cpp``. Its first brace lists are
  the spellings (``{"-kvu", "--kv-unified"}, {"-no-kvu", "--no-kv-unified"}``); a chained
  ``.set_examples({...})`` names the tools it is for, ``.set_excludes({...})`` the ones it is
  not. llama-server gets an option when its examples hold ``LLAMA_EXAMPLE_SERVER`` or
  ``LLAMA_EXAMPLE_COMMON`` (the default, ``common/arg.h``) and it is not excluded from the
  server (arg.cpp's ``add_opt`` lambda: "all examples inherit options from COMMON").
- /metrics: the string literals of ``tools/server/*.cpp`` shaped like a metric name (a
  pattern such as ``spec_decode_[a-z_]+_total``), with ``file:line``; the server prefixes
  them with ``llamacpp:``.

:func:`read_archive` takes just those files out of a source archive (GitHub's, or an sdist
that carries the tree under ``…/llama.cpp/``), wherever its top folder is.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lockpipe.errors import FetchError, FormatError
from lockpipe.refresh.archive import check_unpacked

# the most bytes one file read_archive keeps (arg.cpp, a server .cpp) may have, and all of them
# together; llama.cpp's largest of these have a few hundred KB, a few MB in all
MAX_SOURCE = 16 << 20
MAX_KEPT = 64 << 20

ARG = "common/arg.cpp"
SERVER = "tools/server/"
_OPT = re.compile(r"add_opt\(common_arg\(")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_EXAMPLES = re.compile(r"\.set_(examples|excludes)\(\{([^}]*)\}\)")


@dataclass(frozen=True, kw_only=True)
class Tree:
    """The files of one llama.cpp tree that say what llama-server takes and exports."""

    origin: str  # the archive (or folder) it was read from
    files: Mapping[str, str]  # path under the tree's root -> text

    @property
    def server_files(self) -> dict[str, str]:
        return {p: t for p, t in sorted(self.files.items()) if p.startswith(SERVER)}


def _call_end(text: str, start: int) -> int:
    """The index after the ``)`` that closes the call opened just before ``start``."""
    depth, i, quote = 1, start, False
    while i < len(text) and depth:
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return i


def server_flags(arg_cpp: str) -> frozenset[str]:
    """Every spelling llama-server accepts, from ``common/arg.cpp``'s text."""
    flags: set[str] = set()
    for m in _OPT.finditer(arg_cpp):
        end = _call_end(arg_cpp, m.end())  # closes common_arg(
        body = arg_cpp[m.end() : end]
        chain_end = _call_end(arg_cpp, end)  # closes add_opt(
        chain = arg_cpp[end:chain_end]
        spellings: list[str] = []
        rest = body.lstrip()
        while rest.startswith("{"):  # the leading brace lists: the option's spellings
            close = rest.index("}")
            spellings += _STRING.findall(rest[:close])
            rest = rest[close + 1 :].lstrip().removeprefix(",").lstrip()
        sets = {k: v for k, v in _EXAMPLES.findall(chain)}
        examples = sets.get("examples", "LLAMA_EXAMPLE_COMMON")
        server = "LLAMA_EXAMPLE_SERVER" in examples or "LLAMA_EXAMPLE_COMMON" in examples
        if server and "LLAMA_EXAMPLE_SERVER" not in sets.get("excludes", ""):
            flags.update(s for s in spellings if s.startswith("-"))
    if not flags:
        raise FormatError(f"{ARG}: no add_opt(common_arg(...)) found; is this llama.cpp's arg.cpp?")
    return frozenset(flags)


def flags_of(command: Sequence[str]) -> list[str]:
    """The options a ``llama-server`` command line passes (``--flag=value`` read as ``--flag``)."""
    return [a.split("=", 1)[0] for a in command[1:] if a.startswith("-") and not _number(a)]


def _number(text: str) -> bool:
    return re.fullmatch(r"-\d+(\.\d+)?", text) is not None


def metric_names(tree: Tree, pattern: str) -> dict[str, str]:
    """``name -> file:line`` of every string literal of the tree's server code that is
    wholly ``pattern`` (a metric name, without the ``llamacpp:`` the server adds)."""
    whole = re.compile(pattern)
    out: dict[str, str] = {}
    for path, text in tree.server_files.items():
        for n, line in enumerate(text.splitlines(), 1):
            for literal in _STRING.findall(line):
                if whole.fullmatch(literal) and literal not in out:
                    out[literal] = f"{path}:{n}"
    return out


def read_archive(archive: Path) -> Tree:
    """``common/arg.cpp`` and ``tools/server/*.cpp`` of the llama.cpp tree in ``archive``.

    One pass that keeps no member list: the archive's bounds are tree_hash's (MAX_MEMBERS,
    MAX_UNPACKED), a file it keeps may have MAX_SOURCE bytes and all of them MAX_KEPT; past
    any, a FormatError naming the archive and the member."""
    candidates: dict[str, str] = {}  # member name -> text, before the root is known
    arg: str | None = None
    kept = count = 0
    try:
        with tarfile.open(archive) as tar:
            while (m := tar.next()) is not None:
                tar.members = []  # type: ignore[attr-defined]  # else every TarInfo is kept
                count += 1
                check_unpacked(archive, m, count, tar.offset)
                if not m.isfile():
                    continue
                if m.name.endswith("/" + ARG):
                    arg = arg or m.name
                elif not ("/" + SERVER in m.name and m.name.endswith(".cpp")):
                    continue
                if m.size > MAX_SOURCE or kept + m.size > MAX_KEPT:
                    raise FormatError(
                        f"{archive}: {m.name} has {m.size} bytes, more than the {MAX_SOURCE} a "
                        f"source file may have (or than {MAX_KEPT} all of them); is it a "
                        "llama.cpp source archive?"
                    )
                f = tar.extractfile(m)
                if f is not None:
                    kept += m.size
                    candidates[m.name] = f.read(MAX_SOURCE).decode("utf-8", errors="replace")
    except FetchError as exc:
        raise FormatError(str(exc)) from None
    except (OSError, tarfile.TarError) as exc:
        raise FormatError(f"{archive}: cannot read it as a tar archive ({exc})") from None
    if arg is None:
        raise FormatError(f"{archive}: no {ARG} in it; is it a llama.cpp source archive?")
    root = arg[: -len(ARG)]
    files = {}
    for name, text in candidates.items():
        rel = name[len(root) :] if name.startswith(root) else None
        if rel == ARG or (rel and rel.startswith(SERVER) and rel.endswith(".cpp")):
            files[rel] = text
    return Tree(origin=str(archive), files=files)
