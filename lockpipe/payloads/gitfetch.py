"""Small files kept in git (not LFS): one whole-file GET each, verified by git blob id.

Config, tokenizer and template files are kilobytes to a few MB (the Hub keeps
files over 10 MB in LFS), so one request per file and no resume: a killed run
fetches them again. They share the run's connection gate, retry budget and
redirect handling with the big files (:mod:`lockpipe.payloads.http`,
:mod:`lockpipe.payloads.retry`), are streamed to ``<blob>.lockpipe-partial``
while hashed, and take the blob's name only once size and git blob id match.
That file is created when the first bytes arrive and removed on any failure.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from lockpipe.errors import FetchError, IntegrityError
from lockpipe.payloads.blobs import git_blob_hasher
from lockpipe.payloads.errors import HTTPFatal, RetryableHTTP, Stopped
from lockpipe.payloads.gate import Permit
from lockpipe.payloads.http import body, open_range
from lockpipe.payloads.retry import Budget, Streak, wait_to_retry
from lockpipe.payloads.settings import Context
from lockpipe.payloads.sources import Candidate
from lockpipe.payloads.store import place

LFS_HINT = (
    "if the Hub's tree lists this file with an `lfs` entry, pin its lfs.oid as sha256: "
    "a git_sha1 is for files kept in git, and an LFS file's `oid` is its pointer's"
)


def fetch_git_blob(
    label: str, cands: Sequence[Candidate], blob: Path, size: int, git_sha1: str, ctx: Context
) -> None:
    """Place at ``blob`` the ``size`` bytes whose git blob id is ``git_sha1``, or raise."""
    problems: list[str] = []
    last: FetchError | None = None
    for cand in cands:
        out = _Out(blob.with_name(blob.name + ".lockpipe-partial"))
        try:
            got, n = _get(label, cand, out, size, ctx)
            if n == size and got == git_sha1:
                place(out.path, out.fd(), blob)
                return
            last = IntegrityError(  # named with cand.kind below, as every problem is
                f"{cand.url}: git blob id mismatch: the lock pins {git_sha1}, "
                f"received {got} ({n:,} bytes)"
            )
        except (HTTPFatal, RetryableHTTP, IntegrityError) as exc:
            last = exc
        finally:
            out.close()  # placed: gone already; else nothing in it is worth keeping
        problems.append(f"{cand.kind} {last}")
    fix = f"\n{LFS_HINT}" if isinstance(last, IntegrityError) else ""
    message = f"{label}: no verified copy:\n  " + "\n  ".join(problems) + fix
    if isinstance(last, HTTPFatal):
        raise HTTPFatal(message, last.status)
    raise (IntegrityError if isinstance(last, IntegrityError) else FetchError)(message)


class _Out:
    """The partial file of one try, created at its first byte, removed when closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        return self._fd

    def restart(self) -> None:
        """The body comes again from byte 0."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self.path.unlink(missing_ok=True)


def _get(label: str, cand: Candidate, out: _Out, size: int, ctx: Context) -> tuple[str, int]:
    """Write the whole body to ``out``; (git blob id, bytes). Retries as the big files do."""
    budget = Budget(ctx.tuning)
    streak = Streak(budget)
    with Permit(ctx.gate, ctx.stop) as permit:
        while True:
            got = 0
            try:
                opened = open_range(ctx.transport(), cand, 0, None)
                ctx.gate.accepted()
                if opened.total is not None and opened.total != size:
                    opened.response.close()
                    raise IntegrityError(
                        f"{label}: {opened.url} serves {opened.total:,} bytes, the lock pins "
                        f"{size:,}; the file changed upstream or the revision is wrong"
                    )
                h = git_blob_hasher(size)
                out.restart()
                for data in body(opened, ctx.tuning):
                    if ctx.stop.is_set():
                        raise Stopped
                    if got + len(data) > size:
                        raise IntegrityError(
                            f"{label}: {opened.url} sends more than the {size:,} bytes the "
                            "lock pins; the file changed upstream or the mirror is wrong"
                        )
                    view = memoryview(data)
                    while view:
                        view = view[os.pwrite(out.fd(), view, got + len(data) - len(view)) :]
                    h.update(data)
                    got += len(data)
                    budget.progress()
                    ctx.advance(label, len(data))
                if got < size:  # no Content-Length to tell it, or a proxy that dropped it
                    raise RetryableHTTP(
                        f"{opened.url}: the body ended after {got:,} of the {size:,} bytes "
                        "the lock pins"
                    )
                return h.hexdigest(), got
            except RetryableHTTP as exc:
                ctx.advance(label, -got)  # counted again when the next try brings them
                wait_to_retry(ctx, budget, permit, exc, streak.failed(False))
