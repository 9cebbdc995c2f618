"""The error hierarchy. Every message names the input at fault and the fix.

``__main__`` catches :class:`PipelineError` once and exits with its
``return_code``; nothing below it prints a traceback for bad input.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Root of every error the pipeline reports to a user."""

    return_code = 1


class LockError(PipelineError):
    """The lock file is missing, malformed, inconsistent or stale."""

    return_code = 2


class DriftError(LockError):
    """A build input changed without a relock."""

    return_code = 3


class LintError(PipelineError):
    """A Dockerfile breaks a pinning rule."""

    return_code = 4


class EngineError(PipelineError):
    """A container engine is missing, or one of its operations failed."""

    return_code = 5


class EngineMissing(EngineError):
    """No usable engine, or the requested one is not installed."""

    return_code = 6


class BuildError(EngineError):
    """The engine ran the build and it failed."""

    return_code = 7


class UsageError(PipelineError):
    """A command-line option or argument is wrong."""

    return_code = 64
