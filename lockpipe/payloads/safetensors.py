"""A safetensors header reader and the layout rule: offsets cover the data exactly.

Format: an 8-byte little-endian header length N, N bytes of JSON mapping each
tensor name to ``{dtype, shape, data_offsets: [begin, end]}`` (plus an optional
``__metadata__``), then the data. Only the first 8 + N bytes are read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import FormatError
from lockpipe.jsonshape import loads

MAX_HEADER = 100_000_000  # the reference implementation's own limit
# dtype -> bits per element
DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class STensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class SafetensorsHeader:
    header_size: int
    tensors: list[STensor]
    metadata: dict[str, str]

    @property
    def data_start(self) -> int:
        return 8 + self.header_size

    def dtypes(self) -> set[str]:
        return {t.dtype for t in self.tensors}


def _fail(path: Path, what: str) -> FormatError:
    return FormatError(
        f"{path}: not a valid safetensors file: {what}; the file is damaged or not "
        "safetensors: check the lock's filename and format"
    )


def read_header(path: Path) -> SafetensorsHeader:
    """Parse the header of ``path`` and check every tensor's own extent."""
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise _fail(path, "shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise _fail(path, f"header length {n:,} exceeds {MAX_HEADER:,}")
        raw = fh.read(n)
    if len(raw) != n:
        raise _fail(path, f"header of {n:,} bytes is cut off at {len(raw):,}")
    try:
        doc = loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(path, f"the header is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _fail(path, "the header is not a JSON object")
    meta = doc.pop("__metadata__", {}) or {}
    tensors = [_tensor(path, name, spec) for name, spec in doc.items()]
    return SafetensorsHeader(n, tensors, {str(k): str(v) for k, v in meta.items()})


def _tensor(path: Path, name: str, spec: Any) -> STensor:
    try:
        dtype, shape, (begin, end) = spec["dtype"], tuple(spec["shape"]), spec["data_offsets"]
    except (TypeError, KeyError, ValueError):
        raise _fail(path, f"tensor {name!r} lacks dtype, shape or data_offsets") from None
    if dtype not in DTYPE_BITS:
        raise _fail(path, f"tensor {name!r} has unknown dtype {dtype!r}")
    if not all(isinstance(d, int) and d >= 0 for d in (*shape, begin, end)) or end < begin:
        raise _fail(path, f"tensor {name!r} has a bad shape or offsets")
    count = 1
    for d in shape:
        count *= d
    if (end - begin) * 8 != count * DTYPE_BITS[dtype]:
        raise _fail(
            path, f"tensor {name!r}: {dtype}{list(shape)} needs "
            f"{count * DTYPE_BITS[dtype] // 8:,} bytes, its offsets span {end - begin:,}"
        )  # fmt: skip
    return STensor(name=name, dtype=dtype, shape=shape, begin=begin, end=end)


def layout_problems(header: SafetensorsHeader, file_size: int) -> list[str]:
    """The tensors must tile the data section with no gap, overlap or trailing bytes."""
    problems = []
    pos = 0
    for t in sorted(header.tensors, key=lambda t: (t.begin, t.end)):
        if t.begin != pos:
            kind = "a gap" if t.begin > pos else "an overlap"
            problems.append(f"{kind} before tensor {t.name!r} (byte {t.begin:,}, expected {pos:,})")
        pos = max(pos, t.end)
    data = file_size - header.data_start
    if pos != data:
        problems.append(f"the tensors cover {pos:,} data bytes, the file holds {data:,}")
    return problems
