from __future__ import annotations

import base64

from lockpipe.engines.buildkit import Progress


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _status(*parts: bytes) -> str:
    return base64.b64encode(b"".join(parts)).decode()


STARTED = _field(5, _field(1, 1700000000))  # a Timestamp with seconds


def vertex(digest: bytes, name: bytes, *extra: bytes) -> bytes:
    return _field(1, _field(1, digest) + _field(3, name) + b"".join(extra))


def test_a_step_is_announced_once_and_its_logs_follow() -> None:
    p = Progress()
    run = vertex(b"sha256:a", b"[2/3] RUN make", STARTED)
    assert p.lines(_status(run)) == ["[2/3] RUN make"]
    assert p.lines(_status(run)) == []  # the same vertex again: already announced
    log = _field(3, _field(1, b"sha256:a") + _field(3, 1) + _field(4, b"cc -c x.c\nok\n"))
    assert p.lines(_status(log)) == ["cc -c x.c", "ok"]


def test_cached_and_failed_steps_say_so() -> None:
    p = Progress()
    assert p.lines(_status(vertex(b"d1", b"[1/3] FROM base", _field(4, 1)))) == [
        "[1/3] FROM base CACHED"
    ]
    failed = vertex(b"d2", b"[3/3] RUN false", STARTED, _field(7, b"exit code: 1"))
    assert p.lines(_status(failed)) == ["[3/3] RUN false", "[3/3] RUN false: ERROR exit code: 1"]


def test_a_vertex_not_yet_started_is_not_announced() -> None:
    assert Progress().lines(_status(vertex(b"d3", b"[4/4] LABEL x"))) == []
