"""Nox sessions: the pipeline's interface. Each one installs the package and calls it.

Every verb of ``python -m pipeline`` is a session here with the same name;
arguments after ``--`` are passed through (``nox -s build-llama-cuda -- llama-cuda-mtp``).
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "tests"]

PYTHON = None  # the interpreter nox runs on; the pipeline needs >= 3.10

VERBS = ["plan", "build", "build-frank-small", "build-llama-cuda", "build-llama-cpu", "lock"]


def _pipeline(session: nox.Session, verb: str) -> None:
    session.install("-e", ".")
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
    session.install("-e", ".[dev]")
    session.run("ruff", "check", "pipeline", "tests", "noxfile.py", "benchmarks")
    session.run("ruff", "format", "--check", "pipeline", "tests", "noxfile.py", "benchmarks")
    session.run("mypy")
    session.run("python", "-m", "pipeline", "lint")
    session.run("python", "-m", "pipeline", "lock", "--check")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit, integration and end-to-end tests (pytest args after --)."""
    session.install("-e", ".[dev]")
    session.run("pytest", *(session.posargs or ["tests"]))
