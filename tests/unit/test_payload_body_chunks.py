"""A body arriving in small reads is handed on in chunks of ``Tuning.chunk``.

Over TLS one read of the socket is one 16 KiB record: handed on alone, each paid the
scheduler's claim, a pwrite and a hash feed (twice the CPU per byte of 1 MiB chunks).
The reads here are a stand-in for the socket (a FAKE raw response: read1 only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lockpipe.payloads.http import Opened, body
from lockpipe.payloads.settings import MiB, Tuning

RECORD = 16 * 1024


@dataclass
class _Raw:
    """FAKE: a urllib3 response whose reads give one TLS record each."""

    left: int
    reads: list[int] = field(default_factory=list)
    released: bool = False

    def read1(self, amt: int) -> bytes:
        n = min(RECORD, amt, self.left)
        self.left -= n
        self.reads.append(amt)
        return b"x" * n

    def release_conn(self) -> None:
        self.released = True


@dataclass
class _Response:
    raw: _Raw

    def close(self) -> None:
        raise AssertionError("a body read to its end keeps its connection")


def _opened(raw: _Raw) -> Any:
    return Opened(response=_Response(raw), start=0, total=raw.left, ranged=False,  # type: ignore[arg-type]
                  url="http://h/f")  # fmt: skip


def test_small_reads_are_gathered_into_whole_chunks() -> None:
    raw = _Raw(left=4 * MiB + 100)
    chunks = [len(c) for c in body(_opened(raw), Tuning())]
    assert chunks == [MiB, MiB, MiB, MiB, 100]
    assert raw.released
    assert max(raw.reads) <= MiB  # never asks for more than a chunk's room
