"""A small GGUF header reader: metadata and tensor table, never the tensor data.

It reads sequentially through a buffered file until the end of the tensor
table (a few MB for a 256k-token vocabulary), skipping big numeric arrays with
a seek, so checking a 12 GB file touches only its first megabytes. Malformed
input raises :class:`FormatError` naming the file and the byte offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lockpipe.errors import FormatError

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_STRING = 1 << 26  # a key or string longer than 64 MiB means a corrupt header
MAX_COUNT = 1 << 32
MAX_DIMS = 8
KEEP_ARRAY = 64  # arrays up to this length are kept; longer ones are recorded as (type, count)

# ggml type -> (name, elements per block, bytes per block); cross-checked against gguf-py in tests
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}  # fmt: skip
# GGUF metadata value types: fixed-size ones as struct formats
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
WINDOW = 1 << 20  # read-ahead of skip_strings


@dataclass(frozen=True, kw_only=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    type: int
    offset: int  # relative to the data section

    def nbytes(self) -> int:
        _, block, size = GGML_TYPES[self.type]
        count = 1
        for d in self.shape:
            count *= d
        return count // block * size


@dataclass(frozen=True, kw_only=True)
class GGUFHeader:
    version: int
    metadata: dict[str, Any]
    tensors: list[Tensor]
    data_start: int
    alignment: int = DEFAULT_ALIGNMENT
    arrays: dict[str, tuple[int, int]] = field(default_factory=dict)  # long arrays: (type, n)

    @property
    def arch(self) -> str | None:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else None

    def data_end(self) -> int:
        """The end of the furthest tensor: the smallest file size that holds every tensor."""
        ends = [self.data_start + t.offset + t.nbytes() for t in self.tensors]
        return max(ends, default=self.data_start)


class _Reader:
    def __init__(self, fh: IO[bytes], path: Path) -> None:
        self.fh, self.path, self.pos = fh, path, 0

    def fail(self, what: str) -> FormatError:
        return FormatError(
            f"{self.path}: not a readable GGUF file: {what} at byte {self.pos}; the file is "
            "damaged or not GGUF: check the lock's filename and format"
        )

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise self.fail(f"the header ends early (wanted {n} bytes)")
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        self.fh.seek(n, 1)
        self.pos += n

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def count(self, what: str) -> int:
        n: int = self.scalar("<Q")
        if n > MAX_COUNT:
            raise self.fail(f"implausible {what} {n}")
        return n

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > MAX_STRING:
            raise self.fail(f"implausible string length {n}")
        return self.take(n).decode("utf-8", errors="replace")

    def skip_strings(self, n: int, key: str) -> None:
        """Jump over ``n`` strings (a vocabulary) without decoding them: walk a read-ahead
        window with ``unpack_from``, then hand back what was read past the last one."""
        window, at = b"", 0
        for _ in range(n):
            if len(window) - at < 8:
                window, at = window[at:] + self.fh.read(WINDOW), 0
                if len(window) < 8:
                    raise self.fail(f"the header ends early (in the array {key!r})")
            (size,) = _U64.unpack_from(window, at)
            if size > MAX_STRING:
                raise self.fail(f"implausible string length {size} in the array {key!r}")
            at += 8 + size
            self.pos += 8 + size
            if at > len(window):  # the string runs past the window: seek over its rest
                self.fh.seek(at - len(window), 1)
                window, at = b"", 0
        self.fh.seek(at - len(window), 1)

    def value(self, vtype: int, key: str, arrays: dict[str, tuple[int, int]]) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype != _ARRAY:
            raise self.fail(f"unknown value type {vtype} for {key!r}")
        itype = self.scalar("<I")
        if itype == _ARRAY:
            # llama.cpp's gguf_init_from_file_impl (ggml/src/gguf.cpp) reads one array level
            # and refuses an array of arrays ("key '%s' has invalid GGUF type"): so does this,
            # instead of recursing once per level of a crafted header
            raise self.fail(f"the array {key!r} holds arrays, which llama.cpp refuses")
        n = self.count(f"array length of {key!r}")
        if n > KEEP_ARRAY:
            arrays[key] = (itype, n)
            if itype in _SCALARS:  # fixed size: jump over it
                self.skip(n * struct.calcsize(_SCALARS[itype]))
                return None
            if itype == _STRING:
                self.skip_strings(n, key)
                return None
        items = [self.value(itype, key, arrays) for _ in range(n)]
        return items if n <= KEEP_ARRAY else None


def read_header(path: Path) -> GGUFHeader:
    """Parse the GGUF header of ``path`` (versions 2 and 3)."""
    with path.open("rb", buffering=1 << 20) as fh:
        r = _Reader(fh, path)
        if r.take(4) != MAGIC:
            r.pos = 0
            raise r.fail("no GGUF magic")
        version = r.scalar("<I")
        if version not in (2, 3):
            raise r.fail(f"unsupported GGUF version {version}")
        n_tensors, n_kv = r.count("tensor count"), r.count("metadata count")
        metadata: dict[str, Any] = {}
        arrays: dict[str, tuple[int, int]] = {}
        for _ in range(n_kv):
            key = r.string()
            metadata[key] = r.value(r.scalar("<I"), key, arrays)
        tensors = [_tensor(r) for _ in range(n_tensors)]
        alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise r.fail(f"general.alignment {alignment!r} is not a power of two")
        data_start = -(-r.pos // alignment) * alignment
    return GGUFHeader(
        version=version, metadata=metadata, tensors=tensors, data_start=data_start,
        alignment=alignment, arrays=arrays,
    )  # fmt: skip


def _tensor(r: _Reader) -> Tensor:
    name = r.string()
    n_dims = r.scalar("<I")
    if n_dims > MAX_DIMS:
        raise r.fail(f"tensor {name!r} has {n_dims} dimensions")
    shape = tuple(r.scalar("<Q") for _ in range(n_dims))
    ttype, offset = r.scalar("<I"), r.scalar("<Q")
    if ttype not in GGML_TYPES:
        raise r.fail(f"tensor {name!r} has unknown ggml type {ttype}")
    if shape and shape[0] % GGML_TYPES[ttype][1]:
        raise r.fail(
            f"tensor {name!r}: row of {shape[0]} is not whole {GGML_TYPES[ttype][0]} blocks"
        )
    return Tensor(name=name, shape=shape, type=ttype, offset=offset)
