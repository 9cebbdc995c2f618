"""Decode BuildKit's progress, as dockerd streams it from ``/build?version=2``.

Each ``moby.buildkit.trace`` line carries a base64 protobuf ``StatusResponse``
(moby/buildkit ``api/services/control``): vertexes (build steps: field 1, with
name 3, cached 4, started 5, completed 6, error 7) and logs (field 3: vertex 1,
msg 4). Only those fields are read; a small wire-format reader is enough, so no
protobuf dependency.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Progress:
    """Turns trace messages into lines a person reads, each step announced once."""

    announced: set[bytes] = field(default_factory=set)
    finished: set[bytes] = field(default_factory=set)

    def lines(self, aux: str) -> list[str]:
        """The lines of one trace message; one that cannot be decoded is a line saying so
        (it only shows progress: the build goes on, and its end is read elsewhere)."""
        try:
            return self._lines(base64.b64decode(aux))
        except (ValueError, IndexError):  # not base64; a varint cut short
            return ["(a BuildKit progress message lockpipe cannot decode; the build goes on)"]

    def _lines(self, message: bytes) -> list[str]:
        out = []
        for number, value in _fields(message):
            if number == 1 and isinstance(value, bytes):
                out += self._vertex(dict(_fields(value)))
            elif number == 3 and isinstance(value, bytes):
                log = dict(_fields(value))
                msg = log.get(4, b"")
                if isinstance(msg, bytes) and msg:
                    out += msg.decode(errors="replace").rstrip("\n").splitlines()
        return out

    def _vertex(self, v: dict[int, bytes | int]) -> list[str]:
        digest, name = v.get(1, b""), v.get(3, b"")
        if not isinstance(digest, bytes) or not isinstance(name, bytes):
            return []
        label = name.decode(errors="replace")
        out = []
        if digest not in self.announced and (5 in v or v.get(4)):
            self.announced.add(digest)
            out.append(f"{label}{' CACHED' if v.get(4) else ''}")
        error = v.get(7)
        if isinstance(error, bytes) and error and digest not in self.finished:
            self.finished.add(digest)
            out.append(f"{label}: ERROR {error.decode(errors='replace')}")
        return out


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, bytes | int]]:
    """(field number, value) pairs: bytes for length-delimited fields, int for varints."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(buf, i)
            yield number, buf[i : i + size]
            i += size
        elif wire in (1, 5):  # fixed64 / fixed32: skipped
            i += 8 if wire == 1 else 4
        else:
            return  # groups are not used by this message; stop rather than misread
