"""Build the environment vLLM's own argument parser runs in (``nox -s vllm-parser``).

``python -m lockpipe.preflight.vllm_parser_env [--lock LOCK] [--cache DIR] [VERSION ...]``
builds, for each VERSION named (default: each ``VLLM_VERSION`` the lock's targets name;
name another, e.g. a refresh proposal's, to judge it with its own parser),
``CACHE/vllm-parser/VERSION``:

- ``venv/``: a venv of this Python with the constraints set resolved for it installed
  (``--require-hashes``): ``constraints/vllm-parser-VERSION.txt`` (Python 3.11) or
  ``vllm-parser-VERSION-pyX.Y.txt`` (3.13), each ``.in``'s header names its Python: torch
  and the packages the parser imports; vLLM itself is not installed;
- the wheel the preflight rules were extracted from (``data/vllm-VERSION.json``: its file
  name and sha256), fetched by pip with that hash, and ``tree/``, its ``.py`` files;
- ``env.json``, written last, after a trial parse: what was built from what, and the torch
  installed beside the wheel's own torch pin (they can differ: 0.29.0's on 3.11 is the CPU
  build of its pin, the others the CUDA build PyPI has, since no CPU build of it is
  reachable; the constraints' headers say why).

A complete environment whose inputs have not changed is kept (a trial parse first
proves it still runs); otherwise it is built again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from lockpipe import cmd
from lockpipe.errors import FetchError, LockpipeError
from lockpipe.fs import cache_home, read_utf8, write_atomic
from lockpipe.lock.model import Lock, load_lock
from lockpipe.log import Heartbeat, echo
from lockpipe.preflight import vllm_release, vllm_rules
from lockpipe.preflight.vllm_parser import (
    MARKER,
    Accepted,
    ParserEnv,
    Unavailable,
    env_dir,
    find_env,
    parse,
)

SET = re.compile(r"vllm-parser-(\d[^-]*)(-py\d+\.\d+)?\.in")  # a constraints set's .in
TRIAL = ("vllm", "serve", "trial-model", "--max-model-len", "1024")


def versions(lock: Lock) -> list[str]:
    """The vLLM versions the lock's vLLM targets build with (``VLLM_VERSION``)."""
    return vllm_release.pinned(lock)


def _resolved_for(source: Path) -> str | None:
    """The Python a constraints set was resolved for: ``--python-version X.Y`` in the
    re-resolve command of its ``.in`` (torch's file is cpXY); LockpipeError naming an
    ``.in`` that is not UTF-8."""
    try:
        found = re.search(r"--python-version\s+(\d+\.\d+)", read_utf8(source, LockpipeError))
    except OSError:
        return None
    return found.group(1) if found else None


def constraint_sets(root: Path, version: str) -> dict[str, Path]:
    """Python (``"3.11"``) -> the constraints file resolved for it, for vLLM ``version``:
    ``constraints/vllm-parser-VERSION.txt`` and each ``vllm-parser-VERSION-pyX.Y.txt``,
    each for the Python its ``.in`` names."""
    here = root / "constraints"
    sources = [here / f"vllm-parser-{version}.in",
               *sorted(here.glob(f"vllm-parser-{version}-py*.in"))]  # fmt: skip
    sets: dict[str, Path] = {}
    for source in sources:
        python = _resolved_for(source)
        if python is not None:
            sets.setdefault(python, source.with_suffix(".txt"))
    return sets


def _running() -> tuple[int, int]:
    return sys.version_info.major, sys.version_info.minor


def constraints_for(root: Path, version: str, python: tuple[int, int] | None = None) -> Path:
    """The constraints file vLLM ``version``'s parser environment installs on ``python``
    (default: this one). Where none is resolved for it, the name one would have:
    ``vllm-parser-VERSION.txt`` for a version with no set, else ``-pyX.Y`` beside the others
    (:func:`check_python` says which Pythons have one)."""
    major, minor = python or _running()
    have = f"{major}.{minor}"
    sets = constraint_sets(root, version)
    if have in sets:
        return sets[have]
    suffix = f"-py{have}" if sets else ""
    return root / "constraints" / f"vllm-parser-{version}{suffix}.txt"


def with_sets(root: Path, python: tuple[int, int] | None = None) -> list[str]:
    """The vLLM versions whose parser environment ``python`` (default: this one) can build:
    a constraints set resolved for it and lockpipe's rules (``data/vllm-VERSION.json``).
    Every version a refresh proposal can be judged by its own code (``--all``)."""
    have = "{}.{}".format(*(python or _running()))
    named = (SET.fullmatch(f.name) for f in (root / "constraints").glob("vllm-parser-*.in"))
    found = {m[1] for m in named if m}
    ok = [
        v
        for v in found
        if have in constraint_sets(root, v) and vllm_release.rules_path(v).is_file()
    ]
    return sorted(ok, key=lambda v: [int(x) if x.isdigit() else -1 for x in v.split(".")])


def check_python(root: Path, version: str, running: tuple[int, int]) -> None:
    """LockpipeError naming the interpreter, the Pythons that have a constraints set and how
    to add one, when vLLM ``version`` has sets but none for ``running``."""
    sets = constraint_sets(root, version)
    have = f"{running[0]}.{running[1]}"
    if not sets or have in sets:
        return
    pinned = ", ".join(f"{py} ({path.relative_to(root)})" for py, path in sorted(sets.items()))
    model = max(sets, key=lambda py: tuple(map(int, py.split("."))))
    source = sets[model].with_suffix(".in").relative_to(root)
    raise LockpipeError(
        f"vLLM {version}'s parser environment is pinned for Python {pinned}, but this is "
        f"Python {have} ({sys.executable}): run it with one of those, e.g. python{model} -m "
        f"lockpipe.preflight.vllm_parser_env, or `nox -s vllm-parser` where nox itself runs on "
        f"one; or add a set for {have}: copy {source} to "
        f"constraints/vllm-parser-{version}-py{have}.in and resolve it with its header's "
        f"command, for --python-version {have}"
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wanted(version: str, wheel: Mapping[str, Any], constraints: Path) -> dict[str, Any]:
    return {
        "vllm": version,
        "wheel": wheel["file"],
        "sha256": wheel["sha256"],
        "constraints": constraints.name,
        "constraints_sha256": _sha256(constraints),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }


def _trial(env: ParserEnv) -> str | None:
    """None when the parser accepts a plain serve command; else why not."""
    result = parse(env, [TRIAL])[0]
    if isinstance(result, Accepted):
        return None
    return result.reason if isinstance(result, Unavailable) else result.message


def _fetch_wheel(python: Path, dest: Path, version: str, wheel: Mapping[str, Any]) -> Path:
    path = dest / str(wheel["file"])
    if path.is_file() and _sha256(path) == wheel["sha256"]:
        return path
    with tempfile.TemporaryDirectory(prefix="lockpipe-vllm-wheel-") as tmp:
        req = Path(tmp) / "vllm.txt"
        req.write_text(f"vllm=={version} --hash=sha256:{wheel['sha256']}\n", encoding="utf-8")
        cmd.call([str(python), "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                  "--require-hashes", "-r", str(req), "-d", str(dest)])  # fmt: skip
    if not path.is_file():
        raise FetchError(f"pip fetched no {wheel['file']} (vllm=={version}) into {dest}")
    return path


def torch_pin(wheel: Path) -> str | None:
    """The wheel's own torch requirement (``Requires-Dist: torch==X`` in its METADATA)."""
    with zipfile.ZipFile(wheel) as z:
        name = next((m for m in z.namelist() if m.endswith(".dist-info/METADATA")), None)
        text = z.read(name).decode("utf-8") if name else ""
    found = re.search(r"^Requires-Dist: torch\s*([<>=!~][^;\s]*)", text, re.MULTILINE)
    return found.group(1) if found else None


# torch/version.py alone, loaded by path: its __version__ names the build (2.13.0+cpu,
# 2.14.0+cu130), which the distribution's metadata does not, and torch is not imported
_TORCH_VERSION = (
    "import importlib.util as u, os\n"
    "d = u.find_spec('torch').submodule_search_locations[0]\n"
    "s = u.spec_from_file_location('v', os.path.join(d, 'version.py'))\n"
    "m = u.module_from_spec(s); s.loader.exec_module(m); print(m.__version__)\n"
)


def installed_torch(python: Path) -> str:
    """The torch installed in the venv of ``python``, with its build (``2.14.0+cu130``)."""
    out = cmd.call([str(python), "-c", _TORCH_VERSION], quiet=True, stdout_only=True)
    return out.strip().splitlines()[-1]


def _extract(wheel: Path, tree: Path) -> int:
    """The wheel's ``.py`` files into ``tree`` (replaced whole); how many."""
    partial = tree.with_name(tree.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        members = [m for m in z.namelist() if m.endswith(".py") and ".dist-info/" not in m]
        z.extractall(partial, members)
    shutil.rmtree(tree, ignore_errors=True)
    partial.rename(tree)
    return len(members)


def build(root: Path, cache: Path, version: str, where: Path | None = None) -> ParserEnv:
    """The parser environment for vLLM ``version`` at ``where`` (default under ``cache``),
    built or kept; LockpipeError when it cannot be built or does not parse."""
    wheel = vllm_rules.release(version)["wheel"]
    check_python(root, version, _running())
    constraints = constraints_for(root, version)
    if not constraints.is_file():
        raise LockpipeError(
            f"no {constraints}: pin what vLLM {version}'s parser imports (its header says how)"
        )
    dest = where or env_dir(cache, version)
    want = _wanted(version, wheel, constraints)
    found = find_env(dest, version, wheel)
    if isinstance(found, ParserEnv):
        have = json.loads((dest / MARKER).read_text(encoding="utf-8"))
        if {k: have.get(k) for k in want} == want and _trial(found) is None:
            # the torch that is there now (an env.json written before it said, or by an
            # older lockpipe, is brought up to date: no rebuild for that)
            found = replace(found, torch=installed_torch(found.python),
                            torch_pin=torch_pin(found.wheel_path))  # fmt: skip
            torch = {"torch": found.torch, "torch_pin": found.torch_pin}
            if {k: have.get(k) for k in torch} != torch:
                write_atomic(dest / MARKER, json.dumps({**have, **torch}, indent=1) + "\n")
            echo(f"vllm-parser: {dest} is up to date (vLLM {version}, {wheel['file']}; "
                 f"{found.torch_note})")  # fmt: skip
            return found
    start = time.monotonic()
    (dest / MARKER).unlink(missing_ok=True)
    dest.mkdir(parents=True, exist_ok=True)
    venv = dest / "venv"
    with Heartbeat(f"vllm-parser {version}"):  # pip is quiet for minutes over torch
        cmd.call([sys.executable, "-m", "venv", "--clear", str(venv)])
        python = venv / "bin" / "python"
        cmd.call([str(python), "-m", "pip", "install", "--quiet", "--require-hashes",
                  "--only-binary=:all:", "-r", str(constraints)])  # fmt: skip
        fetched = _fetch_wheel(python, dest, version, wheel)
        files = _extract(fetched, dest / "tree")
    env = ParserEnv(version=version, python=python, tree=dest / "tree",
                    wheel=str(wheel["file"]), sha256=str(wheel["sha256"]),
                    torch=installed_torch(python), torch_pin=torch_pin(fetched))  # fmt: skip
    torch = {"torch": env.torch, "torch_pin": env.torch_pin}
    problem = _trial(env)
    if problem is not None:
        raise LockpipeError(f"vLLM {version}'s parser built in {dest} does not run: {problem}")
    seconds = round(time.monotonic() - start, 1)
    marker = {**want, **torch, "tree_files": files, "built_seconds": seconds}
    write_atomic(dest / MARKER, json.dumps(marker, indent=1) + "\n")  # whole, or none
    echo(f"vllm-parser: built {dest} in {seconds:.0f} s ({files} files of {wheel['file']}; "
         f"{env.torch_note})")  # fmt: skip
    return env


def main(argv: list[str] | None = None) -> int:  # nox -s vllm-parser
    """One line on stderr and the error's exit code when it fails (a missing or garbled
    --lock, a --cache that is a file were tracebacks)."""
    p = vllm_release.OneLineParser(prog="python -m lockpipe.preflight.vllm_parser_env")
    p.add_argument("--lock", type=Path, default=Path("locks/digests.json"))
    p.add_argument("--cache", type=Path,
                   default=Path(os.environ.get("LOCKPIPE_CACHE") or cache_home(os.environ)
                                / "lockpipe"))  # fmt: skip
    p.add_argument("--all", action="store_true",
                   help="every version with a constraints set for this Python and lockpipe's "
                   "rules (what a refresh proposal can be judged with)")  # fmt: skip
    p.add_argument("versions", nargs="*", metavar="VERSION",
                   help="vLLM versions to build (default: those the lock pins); each needs "
                   "constraints/vllm-parser-VERSION[-pyX.Y].txt for this Python and "
                   "lockpipe's rules for it")  # fmt: skip
    args = p.parse_args(argv)
    try:
        lock = load_lock(args.lock)
        chosen = args.versions or (with_sets(lock.root) if args.all else versions(lock))
        for version in chosen:
            build(lock.root, args.cache, version)
    except LockpipeError as exc:
        echo(f"vllm-parser: {exc}", style="red")
        return exc.return_code
    except OSError as exc:  # the cache a file, or not writable
        echo(f"vllm-parser: {exc.filename}: {exc.strerror}; pass --cache a writable folder",
             style="red")  # fmt: skip
        return LockpipeError.return_code
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
