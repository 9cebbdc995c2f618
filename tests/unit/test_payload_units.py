"""Pure parts of lockpipe.payloads: ranges, sources, hasher, selection, store layout."""

from __future__ import annotations

import hashlib
import itertools
import os
import random
from pathlib import Path

import pytest

from lockpipe.errors import LockError, UsageError
from lockpipe.lock.model import Payload, load_lock
from lockpipe.payloads.hasher import OrderedHasher
from lockpipe.payloads.ranges import RangeSet, split
from lockpipe.payloads.schedule import Scheduler
from lockpipe.payloads.selection import check_pinned, select
from lockpipe.payloads.sources import candidates, hf_token, hf_url
from lockpipe.payloads.store import VerifyCache, payload_path

LOCK = Path(__file__).parents[2] / "locks" / "digests.json"
MiB = 1 << 20


def test_rangeset_merges_and_finds_gaps() -> None:
    r = RangeSet([(10, 20), (0, 5), (5, 8), (19, 30)])
    assert r.as_list() == [[0, 8], [10, 30]] and r.total() == 28
    assert r.missing(40) == [(8, 10), (30, 40)] and r.end_of(12) == 30 and r.end_of(8) is None
    assert split([(0, 10), (20, 25)], 4) == [(0, 4), (4, 8), (8, 10), (20, 24), (24, 25)]


def test_hf_url_and_mirror_layout_and_token_only_upstream() -> None:
    url = hf_url("https://huggingface.co", "org/m", "a" * 40, "sub dir/x.gguf")
    assert url == f"https://huggingface.co/org/m/resolve/{'a' * 40}/sub%20dir/x.gguf"
    mirror, upstream = candidates(url, "http://mirror.local/m", "secret")
    assert (
        mirror.url
        == f"http://mirror.local/m/huggingface.co/org/m/resolve/{'a' * 40}/sub%20dir/x.gguf"
    )
    assert mirror.token is None and upstream.token == "secret"
    assert "secret" not in repr(upstream)


def test_token_from_env_then_file(tmp_path: Path) -> None:
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "token").write_text("from-file\n")
    assert hf_token({"HF_TOKEN": "from-env", "HF_HOME": str(tmp_path / "hf")}) == "from-env"
    assert hf_token({"HF_HOME": str(tmp_path / "hf")}) == "from-file"
    assert hf_token({"HOME": str(tmp_path)}) is None


def test_hasher_hashes_out_of_order_chunks_in_file_order(tmp_path: Path) -> None:
    data = os.urandom(3 << 20)
    path = tmp_path / "f"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    chunks = [(o, data[o : o + 65536]) for o in range(0, len(data), 65536)]
    random.Random(1).shuffle(chunks)
    # a small memory cap forces some chunks to be read back from the file instead
    h = OrderedHasher(fd, len(data), RangeSet([(0, 65536)]), memory_cap=256 * 1024)
    for offset, chunk in chunks:
        if offset:
            h.feed(offset, chunk)
    assert h.result(10) == (len(data), hashlib.sha256(data).hexdigest())
    os.close(fd)


def test_selection_of_the_real_lock() -> None:
    lock = load_lock(LOCK)
    payloads, targets = select(lock, ["llama-cuda-mtp"])
    assert targets == ["llama-cuda-mtp"]
    assert {p.name for p in payloads} == set(lock.targets["llama-cuda-mtp"].payloads)
    with pytest.raises(UsageError, match="neither a payload nor a target"):
        select(lock, ["nope"])
    with pytest.raises(LockError) as err:
        check_pinned(select(lock, [])[0])
    assert "payloads.gemma-4-12b-qat-w4a16" in str(err.value)
    assert "pin it from the publisher's release or file page" in str(err.value)
    check_pinned(select(lock, ["llama-cuda-mtp"])[0])  # all pinned: no error


def test_payload_path_is_the_hf_cache_layout(tmp_path: Path) -> None:
    p = Payload.one_file(
        name="x", repository="org/name", revision="b" * 40, filename="dir/f.gguf", size=1,
        sha256="c" * 64, role="model", format="gguf",
    )  # fmt: skip
    assert (
        payload_path(tmp_path, p)
        == tmp_path / "models--org--name/snapshots" / ("b" * 40) / "dir/f.gguf"
    )
    with pytest.raises(LockError, match=r"payloads\.x\.filename"):
        payload_path(
            tmp_path,
            Payload.one_file(
                name="x", repository="o/n", revision="b" * 40, filename="../etc", size=1,
                sha256=None, role="model", format="gguf",
            ),
        )  # fmt: skip


def test_verify_cache_notices_a_changed_file(tmp_path: Path) -> None:
    (tmp_path / ".lockpipe").mkdir()
    blob = tmp_path / "blob"
    blob.write_bytes(b"abc")
    cache = VerifyCache(tmp_path)
    cache.record(blob, "sha")
    cache.save()
    again = VerifyCache(tmp_path)
    assert again.lookup(blob, blob.stat()) == "sha"
    os.utime(blob, ns=(1, 1))
    assert again.lookup(blob, blob.stat()) is None


def test_scheduler_shrinks_pieces_then_splits_the_tail() -> None:
    sched = Scheduler(
        [(0, 64 * MiB)], connections=2, largest=8 * MiB, smallest=MiB, split_min=256 << 10
    )
    sizes = []
    while (p := sched.take()) is not None and p.end < 64 * MiB:
        sizes.append(p.end - p.pos)
        assert sched.claim(p, 1 << 40) == sizes[-1]  # finished at once
        sched.done(p)
    assert sizes[0] == 8 * MiB and sizes[-1] == MiB
    assert all(b <= a for a, b in itertools.pairwise(sizes))  # shrinking
    assert p is not None  # the last piece, in flight
    start = p.pos
    assert sched.claim(p, 100 << 10) == 100 << 10
    thief = sched.take()  # nothing left to cut: the second half of what p still has to do
    assert thief is not None and sched.splits == 1
    assert (p.end, thief.end) == (thief.pos, 64 * MiB) and thief.pos % (64 << 10) == 0
    assert sched.claim(p, 1 << 40) == p.end - (start + (100 << 10))  # up to its new end
    assert sched.claim(p, 1) == 0  # nothing is written twice


def test_scheduler_covers_every_byte_once() -> None:
    gaps = [(0, 5 * MiB + 3), (7 * MiB, 30 * MiB + 1)]
    sched = Scheduler(gaps, connections=3, largest=4 * MiB, smallest=1 * MiB, split_min=256 << 10)
    written = RangeSet()
    total = 0
    active = [sched.take() for _ in range(3)]
    while any(active):
        for i, p in enumerate(active):
            if p is None:
                continue
            start = p.pos
            n = sched.claim(p, 300 << 10)
            assert not any(s < start + n and start < e for s, e in written) or n == 0
            written.add(start, start + n)
            total += n
            if p.pos >= p.end:
                sched.done(p)
                active[i] = sched.take()
    assert written.as_list() == [[0, 5 * MiB + 3], [7 * MiB, 30 * MiB + 1]]
    assert total == written.total()
