"""Every error a user can see, and its exit code: one table, defined here and nowhere else.

``lockpipe.cli.main`` catches :class:`LockpipeError` once and exits with its
``return_code``; nothing below it prints a traceback. Modules elsewhere may
subclass these to carry more detail, but never set a code of their own
(a unit test holds them to it, and another checks the README's table).
"""

from __future__ import annotations

from collections.abc import Sequence


class LockpipeError(Exception):
    """An unexpected failure the pipeline still reports in one line."""

    return_code = 1


class LockError(LockpipeError):
    """The lock file is missing, malformed, inconsistent or incomplete."""

    return_code = 2


class DriftError(LockError):
    """A build input changed without a relock, or a pin moved (``--check``)."""

    return_code = 3


class LintError(LockpipeError):
    """A Dockerfile or requirements file breaks a pinning rule."""

    return_code = 4


class EngineError(LockpipeError):
    """A container engine operation failed."""

    return_code = 5


class EngineMissing(EngineError):
    """No usable engine, or the requested one is not installed or not running."""

    return_code = 6


class BuildError(EngineError):
    """The engine ran the build and it failed."""

    return_code = 7


class FetchError(LockpipeError):
    """A file could not be fetched (network, HTTP status, mirror)."""

    return_code = 8


class IntegrityError(FetchError):
    """The bytes do not match the size or sha256 the lock pins."""

    return_code = 9


class FormatError(FetchError):
    """A file matches its checksum, but its contents break the lock's expectations."""

    return_code = 10


class DiskSpaceError(FetchError):
    """The store's file system has too little room for what is still to fetch."""

    return_code = 11


class GpuAttachError(LockpipeError):
    """The GPU cannot be attached in the requested mode on this engine or host."""

    return_code = 12


class PortError(LockpipeError):
    """A port stayed in use past the wait."""

    return_code = 13


class SmokeConfigError(LockpipeError):
    """The smoke expectations file is invalid."""

    return_code = 15


class CheckFailed(LockpipeError):
    """A check got an answer other than the one it needs (smoke, preflight, verify, reproduce)."""

    return_code = 16


class MetricsError(CheckFailed):
    """A /metrics text or a counter pair cannot be used: a failed smoke check (16), as any.

    Once 14 of its own; but every path that raised it to the command line is another kind
    now (a baselines file is smoke.json: SmokeConfigError), so no command exited 14, and a
    code no command can exit is not in the table (issue 19)."""


class SmokeError(LockpipeError):
    """A smoke run could not be set up (payloads, stale image, container start)."""

    return_code = 17


class RegistryError(LockpipeError):
    """A registry could not be reached, or did not know the reference."""

    return_code = 18


class DeployError(LockpipeError):
    """A quadlet unit cannot be rendered, validated or installed."""

    return_code = 19


class UsageError(LockpipeError):
    """A command-line option or argument is wrong."""

    return_code = 64


INTERRUPTED = 130  # Ctrl-C or SIGTERM; work in progress was cleaned up or kept to resume
BROKEN_PIPE = 141  # the reader of stdout went away (`lockpipe plan | head`), as a shell says


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM on its way out, with what the cleanup on the way did.

    Not an error of the table: the command line prints it as ``interrupted`` and
    exits with INTERRUPTED. ``removed``: what a cleanup removed or stopped, one
    phrase each (a build's working containers, its temporary context). ``resumable``:
    a download kept what it wrote, so running again resumes it.
    """

    def __init__(self, removed: Sequence[str] = (), *, resumable: bool = False) -> None:
        super().__init__(*removed)
        self.removed = list(removed)
        self.resumable = resumable


def interrupted(exc: BaseException, *removed: str, resumable: bool = False) -> Interrupted:
    """The interrupt ``exc`` as an Interrupted that also names ``removed``."""
    before = exc if isinstance(exc, Interrupted) else Interrupted()
    return Interrupted([*before.removed, *removed], resumable=before.resumable or resumable)


def table() -> list[tuple[int, str, str]]:
    """(code, class name, meaning) for every error class here with a code of its own, in
    code order (one that shares its parent's, MetricsError, is that kind's)."""
    rows = [
        (cls.return_code, cls.__name__, (cls.__doc__ or "").strip())
        for cls in globals().values()
        if isinstance(cls, type) and issubclass(cls, LockpipeError) and "return_code" in vars(cls)
    ]
    return sorted(rows)
