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
from lockpipe.errors import CheckFailed, EngineError, EngineMissing


def solid_png(rgb: tuple[int, int, int], size: int = 64) -> bytes:
    """A square PNG, ``size`` pixels a side, filled with ``rgb``."""
    row = b"\x00" + bytes(rgb) * size  # filter byte 0, then RGB pixels
    raw = zlib.compress(row * size, 9)

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


WAV_HEADER = 44  # bytes of a PCM WAV's RIFF, fmt and data headers: more holds samples


def speech_wav(text: str) -> bytes:
    """``text`` spoken by espeak-ng, as a WAV file's bytes; CheckFailed when none comes.

    The text goes in a file (``-f``), never on the command line: there a text starting
    with ``-`` (``--version``) is read as an option, and espeak-ng prints its version,
    writes no WAV and still exits 0. So the WAV is checked too: a missing, empty or
    non-WAV file (a folder it cannot write, a header with no samples) is the check's
    failure, as is espeak-ng failing (EngineMissing when it is not installed stays that).
    """
    with tempfile.TemporaryDirectory() as tmp:
        words, out = Path(tmp) / "speech.txt", Path(tmp) / "speech.wav"
        words.write_text(text, encoding="utf-8")
        try:
            cmd.call(["espeak-ng", "-b", "1", "-w", str(out), "-f", str(words)], quiet=True)
        except EngineMissing:
            raise
        except EngineError as exc:
            raise CheckFailed(f"espeak-ng could not speak {text!r}: {exc}") from None
        wav = out.read_bytes() if out.is_file() else b""
    if len(wav) <= WAV_HEADER or wav[:4] != b"RIFF" or wav[8:12] != b"WAVE":
        raise CheckFailed(
            f"espeak-ng wrote no speech for {text!r} "
            f"({'no WAV file' if not wav else f'{len(wav)} bytes, not a WAV with samples'}); "
            "check the audio check's 'say' in the smoke expectations"
        )
    return wav
