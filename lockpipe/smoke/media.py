"""Inputs for the multimodal checks, made here rather than downloaded.

A PNG of one solid colour (the model should name the colour) and a spoken
sentence from espeak-ng (the model should transcribe its words).
"""

from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

from lockpipe import cmd


def solid_png(rgb: tuple[int, int, int], size: int = 64) -> bytes:
    """A square PNG, ``size`` pixels a side, filled with ``rgb``."""
    row = b"\x00" + bytes(rgb) * size  # filter byte 0, then RGB pixels
    raw = zlib.compress(row * size, 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def speech_wav(text: str) -> bytes:
    """``text`` spoken by espeak-ng, as a WAV file's bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "speech.wav"
        cmd.call(["espeak-ng", "-w", str(out), text], quiet=True)
        return out.read_bytes()
