"""``run_payloads``: make every selected payload present, verified and checked in the store.

Order of work: select and check pins (no network), check that each snapshot
lists the files its runtime reads, vouch for blobs already there (verification
cache, else re-hash), check free space for the rest, download them in parallel
(a snapshot's files too, each by its own pin), then run the format checks and
link each payload at its stable path; a snapshot folder is then pruned to what
the lock lists (:mod:`lockpipe.payloads.prune`). Runs sharing a store lock only
what they touch (:mod:`lockpipe.payloads.locks`): a blob while it is re-hashed,
fetched or replaced, a snapshot folder while it is linked and pruned. Failures are
collected and raised together, so one bad file does not stop the others.
With ``HF_HUB_OFFLINE`` set nothing is downloaded (not from a mirror either):
what the store holds is checked and linked, and each payload it lacks fails.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lockpipe.errors import FetchError, FormatError, UsageError
from lockpipe.lock.model import Lock, Payload
from lockpipe.payloads import store as st
from lockpipe.payloads.blobs import Blob, blobs_of, digest_file
from lockpipe.payloads.checks import Facts, check_file, check_index, check_targets
from lockpipe.payloads.download import fetch_and_place
from lockpipe.payloads.errors import HTTPFatal
from lockpipe.payloads.gitfetch import fetch_git_blob
from lockpipe.payloads.locks import blob_lock_path, file_lock, snapshot_lock_path
from lockpipe.payloads.mirrors import BlobMirror
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.pool import run_parallel
from lockpipe.payloads.progress import Reporter, reporter
from lockpipe.payloads.prune import remove, strays
from lockpipe.payloads.selection import check_complete, check_pinned, select
from lockpipe.payloads.settings import DEFAULT_CONNECTIONS, Context, Tuning
from lockpipe.payloads.snapshot import check_snapshot
from lockpipe.payloads.sources import file_candidates, hub_offline


@dataclass(frozen=True, kw_only=True)
class Options:
    store: Path
    mirror: str | None = None
    connections: int = DEFAULT_CONNECTIONS  # across all files at once
    verify: bool = False  # re-hash files the verification cache vouches for
    output: str = "rich"  # rich | quiet | jsonl
    files_at_once: int = 3
    tuning: Tuning | None = None  # tests shorten timeouts and backoff
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    blob_mirror: BlobMirror | None = None  # an OCI registry (--mirror oci://…), before the Hub


@dataclass(frozen=True, kw_only=True)
class Result:
    name: str
    path: Path  # the file, or a snapshot's folder
    status: str  # "cached", "re-hashed" or "downloaded" (a snapshot: the most work any file had)
    fetched: int  # bytes that came over the network in this run


def run_payloads(lock: Lock, names: Sequence[str], options: Options) -> list[Result]:
    """Fetch, verify, check and link the payloads ``names`` select (every one if empty)."""
    payloads, targets = select(lock, names)
    check_pinned(payloads)
    check_complete(lock, payloads)
    if options.connections < 1 or options.files_at_once < 1:
        raise UsageError("--connections must be at least 1")
    store = options.store.expanduser()
    with st.store_errors(store):
        store.mkdir(parents=True, exist_ok=True)
        return _Run(lock, payloads, targets, store, options).go()


STATUS_ORDER = ("cached", "re-hashed", "downloaded")


class _Run:
    def __init__(
        self, lock: Lock, payloads: list[Payload], targets: list[str], store: Path, o: Options
    ) -> None:
        self.lock, self.payloads, self.targets, self.store, self.o = (
            lock, payloads, targets, store, o,
        )  # fmt: skip
        self.cache = st.VerifyCache(store)
        self.errors: dict[str, str] = {}  # payload name (or target problem) -> message
        self.raised: list[FetchError] = []
        self.facts: dict[str, Facts] = {}
        self.results: dict[str, Result] = {}
        self.blobs = {p.name: blobs_of(store, p) for p in payloads}
        self.got: dict[Path, tuple[str, int]] = {}  # blob -> (status, bytes fetched)
        self.counted: set[Path] = set()  # blobs whose fetched bytes a result already counts
        self.owner: dict[str, str] = {}  # blob label -> the payload name progress shows
        self.out: Reporter = reporter(o.output, sum(b.size for b in self._unique(payloads)))

    def go(self) -> list[Result]:
        started = time.monotonic()
        try:
            todo = [b for b in self._unique(self.payloads) if not self._present(b)]
            if todo and hub_offline(self.o.env):
                self._offline(todo)
                todo = []
            st.check_space(
                self.store, [(b.label, b.size - st.allocated(b.partial, b.size)) for b in todo]
            )
            self._download(todo)
            for p in self.payloads:
                if p.name not in self.errors:
                    self._finish(p)
            self._cross_checks()
        finally:
            self.cache.save()
            fetched = sum(r.fetched for r in self.results.values())
            summary = {"files": len(self.results), "failed": len(self.errors), "fetched": fetched}
            self.out.close({**summary, "seconds": time.monotonic() - started})
        if self.errors:
            raise self._combined()
        return [self.results[p.name] for p in self.payloads]

    def _unique(self, payloads: list[Payload]) -> list[Blob]:
        """The blobs of ``payloads``, each once (payloads and files may share bytes)."""
        seen: dict[Path, Blob] = {}
        for p in payloads:
            for b in self.blobs[p.name]:
                seen.setdefault(b.path, b)
        return list(seen.values())

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
        text = str(exc) if str(exc).startswith("payloads.") else f"payloads.{p.name}: {exc}"
        self.errors[p.name] = f"{self.errors[p.name]}\n{text}" if p.name in self.errors else text
        self.out.error(p.name, text)

    def _present(self, b: Blob) -> bool:
        """True if the blob is already the pinned bytes (the cache vouches, or a re-hash does)."""
        try:
            stat = b.path.stat()
        except FileNotFoundError:
            return False
        if not self.o.verify and self.cache.lookup(b.path, stat, b.kind) == b.digest:
            self.got[b.path] = ("cached", 0)
            return True
        with self._locked(b):  # another run may be placing or replacing it meanwhile
            return self._vouch(b)

    @contextlib.contextmanager
    def _locked(self, b: Blob) -> Iterator[None]:
        def waiting(pid: str) -> None:
            self.out.note(f"{b.label}: waiting for pid {pid}, which is fetching or checking "
                          f"the same blob in {self.store}")  # fmt: skip

        with file_lock(blob_lock_path(self.store, b.path), waiting):
            yield

    def _vouch(self, b: Blob) -> bool:
        """:meth:`_present` under the blob's lock: a blob that changed on disk is removed."""
        try:
            stat = b.path.stat()
        except FileNotFoundError:
            return False
        status = "cached"
        if self.o.verify or self.cache.lookup(b.path, stat, b.kind) != b.digest:
            status = "re-hashed"
            got = (
                digest_file(b.path, b.kind) if stat.st_size == b.size else f"{stat.st_size:,} bytes"
            )
            if got != b.digest:
                self.out.note(
                    f"{b.label}: {b.path} changed on disk (the lock pins {b.kind} "
                    f"{b.digest}, found {got}); fetching it again"
                )
                self.cache.forget(b.path)
                st.unlink(b.link)
                b.path.unlink()
                return False
            self.cache.record(b.path, got, b.kind)
        self.got[b.path] = (status, 0)
        return True

    def _offline(self, missing: list[Blob]) -> None:
        """HF_HUB_OFFLINE: fail each payload with blobs the store lacks, naming them."""
        for p in self.payloads:
            lacks = [b for b in missing if any(b.path == x.path for x in self.blobs[p.name])]
            if not lacks:
                continue
            files = ", ".join(f"{b.file.path} ({b.size:,} bytes)" for b in lacks)
            self._fail(p, FetchError(
                f"payloads.{p.name}: not in the store {self.store}: {files} missing, and "
                "HF_HUB_OFFLINE is set, so nothing is downloaded; run again without "
                "HF_HUB_OFFLINE to fetch it, or fill the store on a host with network "
                "(lockpipe payloads --store) and copy it here"))  # fmt: skip

    def _finish(self, p: Payload) -> None:
        """Format checks, then the stable links; a payload that fails them is not linked."""
        blobs = self.blobs[p.name]
        if any(b.path not in self.got for b in blobs):
            return  # a shared blob failed to download: its payload reported that
        try:
            if p.snapshot:
                facts = check_snapshot(p, {b.file.path: b.path for b in blobs})
            else:
                facts = check_file(p, blobs[0].path, blobs[0].size)
        except FormatError as exc:
            facts = Facts([f"payloads.{p.name}: {exc}"])
        self.facts[p.name] = facts
        if facts.problems:
            for b in blobs:
                st.unlink(b.link)
            kept = (
                f"the files stay in {blobs[0].path.parent}, the snapshot is not linked"
                if p.snapshot
                else f"the file stays at {blobs[0].path} and is not linked"
            )
            self._fail(p, FormatError("\n".join(facts.problems) + (
                f"\n(the bytes match the lock's pins: the lock's expect or pin is wrong; "
                f"{kept})")))  # fmt: skip
            return
        if gone := [b for b in blobs if not b.path.is_file()]:  # locks are advisory
            self._fail(p, FetchError(
                f"{gone[0].path} vanished while the run checked it; something else is "
                "deleting files in the store: stop it and run again"))  # fmt: skip
            return
        try:
            self._link(p, blobs)
        except FetchError as exc:
            self._fail(p, exc)
            return
        status = max((self.got[b.path][0] for b in blobs), key=STATUS_ORDER.index)
        fresh = {b.path for b in blobs} - self.counted  # a blob payloads share counts once
        fetched = sum(self.got[path][1] for path in fresh)
        self.counted |= fresh
        path = st.payload_path(self.store, p)
        self.results[p.name] = Result(name=p.name, path=path, status=status, fetched=fetched)
        self.out.done(p.name, status, fetched)

    def _link(self, p: Payload, blobs: list[Blob]) -> None:
        """Link the payload's blobs, under the folder's lock; a snapshot's folder then holds
        only what the lock lists at its repository and revision (other payloads of the lock,
        single files too, may share the folder).

        A snapshot's folder is pruned before the links are made: a link to a folder elsewhere
        (``sub -> /elsewhere``) or a real folder where the lock lists a file goes first, so
        no link lands outside the store, or fails on a folder. Then each path must be its
        blob's link, or the payload is not done."""
        folder = st.snapshot_dir(self.store, p)
        pairs = [(b.path, b.link) for b in blobs]
        with file_lock(snapshot_lock_path(self.store, folder), lambda pid: None):
            if p.snapshot:
                st.real_folder(self.store, p)
                same = [q for q in self.lock.payloads.values() if q.repository == p.repository]
                keep = {f.path for q in same if q.revision == p.revision for f in q.files}
                if extra := strays(folder, keep):
                    remove(extra)
                    shown = ", ".join(str(x.relative_to(folder)) for x in extra)
                    self.out.note(f"payloads.{p.name}: removed from {folder} what the lock "
                                  f"does not list there: {shown}")  # fmt: skip
            st.link_all(pairs)
            if wrong := st.misplaced(pairs):
                shown = ", ".join(str(x) for x in wrong)
                raise FetchError(
                    f"{shown}: not the link to its blob after linking; something else "
                    "writes in the snapshot folder: stop it, then run again"
                )

    def _download(self, todo: list[Blob]) -> None:
        ctx = Context(
            tuning=self.o.tuning or Tuning(connections=self.o.connections),
            advance=lambda label, n: self.out.advance(self.owner[label], n),
            connections=self.o.connections,
        )
        started: set[str] = set()
        left = {p.name: sum(b.size for b in todo if b.payload is p) for p in self.payloads}

        def fetch(b: Blob) -> None:
            with self._locked(b):
                if not self._vouch(b):  # else another run placed it while this one waited
                    fetch_unlocked(b)

        def fetch_unlocked(b: Blob) -> None:
            p = b.payload
            self.owner[b.label] = p.name
            b.path.parent.mkdir(parents=True, exist_ok=True)
            partial = None if b.kind == "git_sha1" else Partial(
                b.partial, b.digest, b.size, ctx.tuning.journal_every
            )  # fmt: skip
            already = partial.done.total() if partial else 0
            if p.name not in started:  # one progress line per payload, a snapshot's too
                started.add(p.name)
                self.out.start(p.name, left[p.name], already)
            elif already:
                self.out.advance(p.name, already)
            try:
                self._fetch(b, partial, ctx)
            except FetchError as exc:
                for q in self.payloads:  # every payload that holds these bytes fails
                    if any(x.path == b.path for x in self.blobs[q.name]):
                        self._fail(q, exc)
                return
            self.cache.record(b.path, b.digest, b.kind)
            self.cache.save()  # before the lock goes: a run waiting for it finds it vouched for
            self.got[b.path] = ("downloaded", b.size - already)

        # Largest first: the big files take the connections early, small ones fill the gaps.
        order = sorted(todo, key=lambda b: -b.size)
        run_parallel(order, fetch, self.o.files_at_once, ctx.stop)

    def _fetch(self, b: Blob, partial: Partial | None, ctx: Context) -> None:
        cands = file_candidates(b.payload, b.file.path, self.o.mirror, self.o.env)
        if self.o.blob_mirror is not None:
            cands = [*self.o.blob_mirror.candidates(b.payload, b.file), *cands]
        if partial is None:
            fetch_git_blob(b.label, cands, b.path, b.size, b.digest, ctx)
            return
        fetch_and_place(b.label, cands, partial, b.digest, b.path, ctx)

    def _cross_checks(self) -> None:
        singles = [p for p in self.payloads if not p.snapshot]
        for p in singles:
            if p.filename.endswith(".safetensors.index.json") and p.name in self.results:
                shards = {
                    q.filename: self.facts[q.name]
                    for q in singles
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
