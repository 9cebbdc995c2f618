"""``run_payloads``: make every selected payload present, verified and checked in the store.

Order of work: select and check pins (no network), take the store lock, vouch
for files already there (verification cache, else re-hash), check free space
for the rest, download them in parallel, then run the format checks and link
each file at its stable path. Failures are collected and raised together, so
one bad file does not stop the others.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import FetchError, FormatError, IntegrityError, LockError, UsageError
from pipeline.fs import sha256_file
from pipeline.lock.model import Lock, Payload
from pipeline.log import echo
from pipeline.payloads import store as st
from pipeline.payloads.checks import Facts, check_file, check_index, check_targets
from pipeline.payloads.download import fetch_into
from pipeline.payloads.errors import HTTPFatal
from pipeline.payloads.partial import Partial
from pipeline.payloads.progress import Reporter, reporter
from pipeline.payloads.selection import check_pinned, select
from pipeline.payloads.settings import DEFAULT_CONNECTIONS, Context, Tuning
from pipeline.payloads.sources import payload_candidates


@dataclass(frozen=True)
class Options:
    store: Path
    mirror: str | None = None
    connections: int = DEFAULT_CONNECTIONS  # across all files at once
    verify: bool = False  # re-hash files the verification cache vouches for
    output: str = "rich"  # rich | quiet | jsonl
    files_at_once: int = 3
    tuning: Tuning | None = None  # tests shorten timeouts and backoff
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass(frozen=True)
class Result:
    name: str
    path: Path
    status: str  # "cached", "re-hashed" or "downloaded"
    fetched: int  # bytes that came over the network in this run


def run_payloads(lock: Lock, names: Sequence[str], options: Options) -> list[Result]:
    """Fetch, verify, check and link the payloads ``names`` select (every one if empty)."""
    payloads, targets = select(lock, names)
    check_pinned(payloads)
    if options.connections < 1 or options.files_at_once < 1:
        raise UsageError("--connections must be at least 1")
    store = options.store.expanduser()
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"{store}: cannot create the store ({exc.strerror}); set --store"
        ) from None
    with st.store_lock(store, echo):
        return _Run(lock, payloads, targets, store, options).go()


def _pinned(p: Payload) -> tuple[str, int]:
    """The sha256 and size of ``p``; check_pinned refused unpinned entries before any work."""
    if p.sha256 is None or p.size is None:
        raise LockError(f"payloads.{p.name}: no sha256 or size pinned; pin it before fetching")
    return p.sha256, p.size


class _Run:
    def __init__(
        self, lock: Lock, payloads: list[Payload], targets: list[str], store: Path, o: Options
    ) -> None:
        self.lock, self.payloads, self.targets, self.store, self.o = (
            lock,
            payloads,
            targets,
            store,
            o,
        )
        self.cache = st.VerifyCache(store)
        self.errors: dict[str, str] = {}  # key -> message
        self.raised: list[FetchError] = []
        self.facts: dict[str, Facts] = {}
        self.results: dict[str, Result] = {}
        self.out: Reporter = reporter(o.output, sum(p.size or 0 for p in payloads))

    def go(self) -> list[Result]:
        started = time.monotonic()
        try:
            todo = [p for p in self.payloads if not self._present(p)]
            st.check_space(
                self.store,
                [
                    (p.name, (p.size or 0) - st.allocated(self._partial_path(p), p.size or 0))
                    for p in todo
                ],
            )
            self._download(todo)
            self._cross_checks()
        finally:
            self.cache.save()
            fetched = sum(r.fetched for r in self.results.values())
            self.out.close(
                {
                    "files": len(self.results),
                    "failed": len(self.errors),
                    "fetched": fetched,
                    "seconds": time.monotonic() - started,
                }
            )
        if self.errors:
            raise self._combined()
        return [self.results[p.name] for p in self.payloads]

    def _combined(self) -> FetchError:
        """One error for the run; it keeps the class (and exit code) when all failures agree."""
        message = "\n".join(self.errors[n] for n in sorted(self.errors))
        first, kinds = self.raised[0], {type(e) for e in self.raised}
        if len(kinds) > 1:
            return FetchError(message)
        if isinstance(first, HTTPFatal):
            return HTTPFatal(message, first.status)
        return type(first)(message)

    def _fail(self, p: Payload, exc: FetchError) -> None:
        self.raised.append(exc)
        self.errors[p.name] = (
            str(exc) if str(exc).startswith("payloads.") else f"payloads.{p.name}: {exc}"
        )
        self.out.error(p.name, self.errors[p.name])

    def _partial_path(self, p: Payload) -> Path:
        blob = st.blob_path(self.store, p)
        return blob.with_name(blob.name + ".lockpipe-partial")

    def _present(self, p: Payload) -> bool:
        """True if the blob is already the pinned bytes (the cache vouches, or a re-hash does)."""
        blob = st.blob_path(self.store, p)
        try:
            stat = blob.stat()
        except FileNotFoundError:
            return False
        status = "cached"
        if self.o.verify or self.cache.lookup(blob, stat) != p.sha256:
            status = "re-hashed"
            got = sha256_file(blob) if stat.st_size == p.size else f"{stat.st_size:,} bytes"
            if got != p.sha256:
                self.out.note(
                    f"payloads.{p.name}: {blob} changed on disk (the lock pins "
                    f"{p.sha256}, found {got}); fetching it again"
                )
                self.cache.forget(blob)
                st.unlink(st.payload_path(self.store, p))
                blob.unlink()
                return False
            self.cache.record(blob, got)
        self._finish(p, blob, status, 0)
        return True

    def _finish(self, p: Payload, blob: Path, status: str, fetched: int) -> None:
        """Format checks, then the stable link; a file that fails them is not linked."""
        path = st.payload_path(self.store, p)
        try:
            facts = check_file(p, blob, _pinned(p)[1])
        except FormatError as exc:
            facts = Facts([f"payloads.{p.name}: {exc}"])
        self.facts[p.name] = facts
        if facts.problems:
            st.unlink(path)
            self._fail(
                p,
                FormatError(
                    "\n".join(facts.problems)
                    + (
                        f"\n(the bytes match the lock's sha256: the lock's expect or pin is wrong; "
                        f"the file stays at {blob} and is not linked)"
                    )
                ),
            )
            return
        if not blob.is_file():  # removed behind this run's back (the store lock is advisory)
            self._fail(
                p,
                FetchError(
                    f"{blob} vanished while the run checked it; something else is deleting "
                    "files in the store: stop it and run again"
                ),
            )
            return
        st.link(blob, path)
        self.results[p.name] = Result(p.name, path, status, fetched)
        self.out.done(p.name, status, fetched)

    def _download(self, todo: list[Payload]) -> None:
        ctx = Context(
            self.o.tuning or Tuning(connections=self.o.connections),
            advance=lambda label, n: self.out.advance(label.removeprefix("payloads."), n),
            connections=self.o.connections,
        )
        queue = list(reversed(self._unique(todo)))
        lock = threading.Lock()
        crashed: list[BaseException] = []

        def worker(finished: threading.Event) -> None:
            try:
                while True:
                    with lock:
                        if not queue or ctx.stop.is_set():
                            return
                        p = queue.pop()
                    try:
                        self._fetch(p, ctx)
                    except BaseException as exc:  # a bug, or Stopped: re-raised below
                        crashed.append(exc)
                        ctx.stop.set()
            finally:
                finished.set()

        # Events, not Thread.join: a Ctrl-C inside join() can leave the thread looking
        # finished (CPython), and then the journals would not be flushed before exit.
        done = [threading.Event() for _ in range(min(self.o.files_at_once, len(queue)))]
        for finished in done:
            threading.Thread(target=worker, args=(finished,), daemon=True).start()
        try:
            for finished in done:
                while not finished.wait(0.2):  # short waits keep Ctrl-C responsive here
                    pass
        except KeyboardInterrupt:
            ctx.stop.set()  # workers stop at their next chunk and flush their journals
            for finished in done:
                finished.wait(5)
            raise
        if crashed:
            raise crashed[0]
        fetched = {str(st.blob_path(self.store, q)) for q in todo if q.name in self.results}
        for p in todo:  # payloads that share a blob with one fetched above
            blob = st.blob_path(self.store, p)
            if p.name not in self.results and p.name not in self.errors and str(blob) in fetched:
                self._finish(p, blob, "downloaded", 0)

    def _unique(self, todo: list[Payload]) -> list[Payload]:
        seen: dict[str, Payload] = {}
        for p in todo:
            seen.setdefault(str(st.blob_path(self.store, p)), p)
        return list(seen.values())

    def _fetch(self, p: Payload, ctx: Context) -> None:
        sha256, size = _pinned(p)
        blob = st.blob_path(self.store, p)
        blob.parent.mkdir(parents=True, exist_ok=True)
        partial = Partial(self._partial_path(p), sha256, size, ctx.tuning.journal_every)
        already = partial.done.total()
        self.out.start(p.name, size, already)
        try:
            cands = payload_candidates(p, self.o.mirror, self.o.env)
            fetch_into(f"payloads.{p.name}", cands, partial, sha256, ctx)
            st.place(partial.path, partial.fd, blob)
            partial.journal.unlink(missing_ok=True)
        except FetchError as exc:
            partial.close()
            if isinstance(exc, IntegrityError):
                partial.discard()  # nothing in it is worth resuming from
            self._fail(p, exc)
            return
        finally:
            partial.close()
        self.cache.record(blob, sha256)
        self._finish(p, blob, "downloaded", size - already)

    def _cross_checks(self) -> None:
        for p in self.payloads:
            if p.filename.endswith(".safetensors.index.json") and p.name in self.results:
                shards = {
                    q.filename: self.facts[q.name]
                    for q in self.payloads
                    if (q.repository, q.revision) == (p.repository, p.revision)
                    and q.name in self.facts
                }
                for problem in check_index(p, st.blob_path(self.store, p), shards):
                    self._fail(p, FormatError(problem))
        targets = [
            t for t in self.targets if all(n in self.facts for n in self.lock.targets[t].payloads)
        ]
        for problem in check_targets(self.lock, targets, self.facts):
            self.errors[problem] = problem
            self.raised.append(FormatError(problem))
