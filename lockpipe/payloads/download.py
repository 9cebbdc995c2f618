"""Fetch a file into a verified partial file, trying the mirror, then upstream.

Resumed bytes are kept across candidates because they are judged by the
pinned sha256, not by where they came from. :func:`download_url` is the entry
for anything outside the payload store (llama.cpp source archives).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from lockpipe.errors import FetchError, IntegrityError
from lockpipe.payloads.errors import HTTPFatal, RangeIgnored, RetryableHTTP
from lockpipe.payloads.locks import STATE, file_lock
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.settings import DEFAULT_CONNECTIONS, Context, Tuning
from lockpipe.payloads.sources import Candidate, candidates
from lockpipe.payloads.store import place
from lockpipe.payloads.transfer import Transfer

# The most bytes a file whose size is not pinned may have (a source archive: pinned by
# sha256 only, or not at all while refresh-digests pins it). A server's 206 total or 200
# Content-Length claiming more is refused before its bytes, and a body that goes past it
# is cut off there. GitHub's source archives are megabytes (llama.cpp's: 25 MB); without a
# bound, a claim of 10**19 bytes or an endless body wrote zeros until the disk was full.
MAX_ARCHIVE = 4 << 30


def fetch_into(
    label: str,
    cands: Sequence[Candidate],
    partial: Partial,
    sha256: str,
    ctx: Context,
    most: int | None = None,
) -> None:
    """Fill ``partial`` with the bytes whose sha256 is ``sha256``, or raise naming each try.

    A candidate that fails moves on to the next one and keeps the bytes written
    so far. A mismatch after a resume retries that candidate once from scratch,
    because the resumed bytes may be the wrong ones. A file whose size is not pinned may
    have ``most`` bytes at most (None: no bound).
    """
    problems: list[str] = []
    last: FetchError | None = None
    for cand in cands:
        for _ in range(2):
            resumed = partial.done.total() > 0
            try:
                size, digest = Transfer(label, cand, partial, ctx, most).run()
            except (HTTPFatal, RetryableHTTP, RangeIgnored, IntegrityError) as exc:
                problems.append(f"{cand.kind} {exc}")
                last = exc
                break
            if digest == sha256 and size == partial.size:
                return
            partial.reset()
            problem = (
                f"{cand.kind} {cand.url}: sha256 mismatch: the lock pins {sha256}, "
                f"received {digest} ({size:,} bytes)"
            )
            last = IntegrityError(problem)
            if not resumed:
                problems.append(problem)
                break
            problems.append(problem + "; retrying from scratch without the resumed bytes")
    kind = type(last) if isinstance(last, IntegrityError | HTTPFatal) else FetchError
    fix = (
        "\nthe lock may pin the wrong file: check its entry against the publisher's page"
        if kind is IntegrityError
        else ""
    )
    message = f"{label}: no verified copy:\n  " + "\n  ".join(problems) + fix
    if isinstance(last, HTTPFatal):
        raise HTTPFatal(message, last.status)
    raise kind(message)


def fetch_and_place(
    label: str,
    cands: Sequence[Candidate],
    partial: Partial,
    sha256: str,
    dest: Path,
    ctx: Context,
    most: int | None = None,
) -> None:
    """Fill ``partial`` as :func:`fetch_into` does, then move its verified bytes to ``dest``.

    The partial file is closed in every case, and discarded when its bytes did
    not match the pin; any other failure keeps it for the next run to resume.
    """
    try:
        fetch_into(label, cands, partial, sha256, ctx, most)
        place(partial.path, partial.fd, dest)
        partial.journal.unlink(missing_ok=True)
    except IntegrityError:
        partial.close()
        partial.discard()  # nothing in it is worth resuming from
        raise
    finally:
        partial.close()


def download_url(
    url: str,
    sha256: str,
    dest: Path,
    *,
    mirror: str | None = None,
    size: int | None = None,
    most: int = MAX_ARCHIVE,
    connections: int = DEFAULT_CONNECTIONS,
    say: Callable[[str], None] = lambda text: None,
) -> Path:
    """Make ``dest`` hold the bytes of ``url`` whose sha256 is ``sha256``; return ``dest``.

    The mirror (``{mirror}/{host}/{path}``) is tried first. Parallel ranged
    connections where the server allows them, one stream where it does not
    (GitHub's generated archives); an interrupted call resumes on the next one.
    Without ``size``, more than ``most`` bytes (claimed or sent) is an IntegrityError.
    A lock of ``dest``'s own (in its folder's ``.lockpipe/locks/``) keeps two processes
    from fetching it at once; other files of the folder are not held up.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = dest.parent / STATE / "locks" / f"{dest.name}.lock"
    with file_lock(lock, lambda pid: say(f"waiting for {dest.name}: pid {pid} is fetching it")):
        if dest.is_file():
            return dest
        cands = candidates(url, mirror)
        ctx = Context(tuning=Tuning(connections=connections), stop=threading.Event())
        partial = Partial(dest.with_name(dest.name + ".lockpipe-partial"), sha256, size)
        fetch_and_place(url, cands, partial, sha256, dest, ctx, most)
    return dest
