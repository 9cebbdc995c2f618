"""Nox sessions: the pipeline's interface. Each one installs the package and calls it.

Every verb of ``lockpipe`` (``python -m lockpipe``) is a session here with the
same name; arguments after ``--`` are passed through
(``nox -s build-llama-cuda -- llama-cuda-mtp``). Sessions install lockpipe's own
dependencies from the hash-pinned files in ``constraints/`` (``nox -s constraints``
re-resolves them).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

PYTHON = None  # the interpreter nox runs on; the pipeline needs >= 3.10
RUNTIME = "constraints/runtime.txt"
DEV = "constraints/dev.txt"

VERBS = [
    "demo",
    "plan",
    "doctor",
    "build",
    "build-frank-small",
    "build-llama-cuda",
    "build-llama-cpu",
    "lock",
    "refresh-digests",
    "upgrade",
    "reproduce",
    "payloads",
    "smoke",
    "preflight",
    "deploy",
    "publish",
    "verify",
    "completion",
]


def _install(session: nox.Session, pins: str) -> None:
    """The pinned dependencies (hashes required), then lockpipe itself without deps.

    Skipped when pyproject.toml and the pins are unchanged since the last install
    into this reused venv: nox's reuse keeps the venv but still runs pip (about 3 s).
    """
    key = hashlib.sha256(Path("pyproject.toml").read_bytes() + Path(pins).read_bytes()).hexdigest()
    location = getattr(session.virtualenv, "location", None)
    marker = Path(location) / ".lockpipe-installed" if location else None
    if marker and marker.is_file() and marker.read_text() == key:
        return
    session.install("--require-hashes", "-r", pins)
    session.install("--no-deps", "-e", ".")
    if marker:
        marker.write_text(key)


# One venv for every runtime verb: nox gives each session its own (about 48 MB and a pip
# install each, 24 s for a first `nox -s plan`), so the verbs run without one of nox's and
# share this, installed once per pyproject.toml and pins (the same marker as _install).
SHARED = Path(".nox/runtime")


def _shared_runtime(session: nox.Session) -> Path:
    """The shared runtime venv's bin folder, created and installed when missing or stale."""
    python = SHARED / "bin" / "python"
    key = hashlib.sha256(Path("pyproject.toml").read_bytes() + Path(RUNTIME).read_bytes())
    marker = SHARED / ".lockpipe-installed"
    if python.is_file() and marker.is_file() and marker.read_text() == key.hexdigest():
        return python.parent
    if not python.is_file():
        session.run(sys.executable, "-m", "venv", str(SHARED), external=True)
    pip = (str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    session.run(*pip, "--require-hashes", "-r", RUNTIME, external=True)
    session.run(*pip, "--no-deps", "-e", ".", external=True)
    marker.write_text(key.hexdigest())
    return python.parent


def _verb_session(verb: str) -> None:
    @nox.session(name=verb, venv_backend="none")
    def _session(session: nox.Session) -> None:
        bin_dir = _shared_runtime(session)
        session.run(str(bin_dir / "lockpipe"), verb, *session.posargs, external=True)

    _session.__doc__ = f"lockpipe {verb} [-- ARGS]"


for _verb in VERBS:
    _verb_session(_verb)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, mypy, the import layers, the Dockerfile pinning rules and the lock's drift."""
    _install(session, DEV)
    paths = ["lockpipe", "tests", "noxfile.py", "benchmarks"]
    session.run("ruff", "check", *paths)
    session.run("ruff", "format", "--check", *paths)
    session.run("mypy")
    session.run("lint-imports")
    session.run("lockpipe", "lint")
    session.run("lockpipe", "lock", "--check")
    session.run("lockpipe", "lock", "--check", "--lock", "locks/demo/digests.json")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit, integration and end-to-end tests (pytest args after --)."""
    _install(session, DEV)
    session.run("pytest", *(session.posargs or ["tests"]))


@nox.session(python=PYTHON)
def unit(session: nox.Session) -> None:
    """The unit tests alone: no network, no engine, seconds."""
    _install(session, DEV)
    session.run("pytest", "tests/unit", *session.posargs)


@nox.session(name="vllm-parser", venv_backend="none")
def vllm_parser(session: nox.Session) -> None:
    """vLLM's own serve-argument parser for preflight: a venv with torch and what the parser
    imports (constraints/vllm-parser-VERSION[-pyX.Y].txt, the set of nox's Python), the
    wheel's .py tree; for each version the lock pins, or those named (`nox -s vllm-parser
    -- 0.33.0`, a refresh proposal's)."""
    python = _shared_runtime(session) / "python"
    session.run(str(python), "-m", "lockpipe.preflight.vllm_parser_env", *session.posargs,
                external=True)  # fmt: skip


@nox.session(python=PYTHON)
def constraints(session: nox.Session) -> None:
    """Re-resolve constraints/*.txt from pyproject.toml, with hashes, for Python 3.10+."""
    _install(session, DEV)
    common = ["uv", "pip", "compile", "pyproject.toml", "--generate-hashes", "--universal",
              "--python-version", "3.10", "--no-header", "--quiet"]  # fmt: skip
    session.run(*common, "-o", RUNTIME)
    session.run(*common, "--extra", "dev", "-o", DEV)
