"""Nox sessions: the pipeline's interface. Each one installs the package and calls it.

Every verb of ``python -m pipeline`` is a session here with the same name;
arguments after ``--`` are passed through (``nox -s build-llama-cuda -- llama-cuda-mtp``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

PYTHON = None  # the interpreter nox runs on; the pipeline needs >= 3.10

VERBS = [
    "plan",
    "build",
    "build-frank-small",
    "build-llama-cuda",
    "build-llama-cpu",
    "lock",
    "refresh-digests",
    "reproduce",
    "payloads",
    "smoke",
]


def _install(session: nox.Session, *args: str) -> None:
    """pip install into the reused venv, unless pyproject.toml and args are unchanged.

    nox's reuse keeps the venv but still runs pip (about 3 s); the marker makes
    a no-op build as fast through nox as without it.
    """
    key = hashlib.sha256(Path("pyproject.toml").read_bytes() + repr(args).encode()).hexdigest()
    location = getattr(session.virtualenv, "location", None)
    marker = Path(location) / ".lockpipe-installed" if location else None
    if marker and marker.is_file() and marker.read_text() == key:
        return
    session.install(*args)
    if marker:
        marker.write_text(key)


def _pipeline(session: nox.Session, verb: str) -> None:
    _install(session, "-e", ".")
    session.run("python", "-m", "pipeline", verb, *session.posargs)


def _verb_session(verb: str) -> None:
    @nox.session(name=verb, python=PYTHON)
    def _session(session: nox.Session) -> None:
        _pipeline(session, verb)

    _session.__doc__ = f"python -m pipeline {verb} [-- ARGS]"


for _verb in VERBS:
    _verb_session(_verb)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, mypy and the Dockerfile pinning rules."""
    _install(session, "-e", ".[dev]")
    session.run("ruff", "check", "pipeline", "tests", "noxfile.py", "benchmarks")
    session.run("ruff", "format", "--check", "pipeline", "tests", "noxfile.py", "benchmarks")
    session.run("mypy")
    session.run("python", "-m", "pipeline", "lint")
    session.run("python", "-m", "pipeline", "lock", "--check")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit, integration and end-to-end tests (pytest args after --)."""
    _install(session, "-e", ".[dev]")
    session.run("pytest", *(session.posargs or ["tests"]))
