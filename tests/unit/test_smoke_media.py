from __future__ import annotations

import base64
import shutil
import struct
import zlib

import pytest

from pipeline.smoke.checks import audio_part, bad_log_lines, expect_words, image_part
from pipeline.smoke.media import solid_png, speech_wav
from tests.policy import unavailable


def test_solid_png_decodes_to_the_colour() -> None:
    png = solid_png((220, 20, 20), size=8)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height, depth, colour = struct.unpack(">IIBB", png[16:26])
    assert (width, height, depth, colour) == (8, 8, 8, 2)
    idat_len = struct.unpack(">I", png[33:37])[0]
    rows = zlib.decompress(png[41 : 41 + idat_len])
    assert rows == (b"\x00" + bytes((220, 20, 20)) * 8) * 8


def test_chat_parts_carry_the_media_as_the_api_expects() -> None:
    image = image_part(b"PNG")
    assert image == {"type": "image_url", "image_url": {"url": "data:image/png;base64,UE5H"}}
    audio = audio_part(b"RIFF")
    assert audio["type"] == "input_audio"
    assert audio["input_audio"] == {"data": base64.b64encode(b"RIFF").decode(), "format": "wav"}


def test_speech_is_a_wav() -> None:
    if shutil.which("espeak-ng") is None:
        unavailable("espeak-ng is not installed (apt-get install espeak-ng)")
    wav = speech_wav("The quick brown fox")
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and len(wav) > 10_000


def test_expected_words_are_case_insensitive_and_all_required() -> None:
    expect_words(" Paris, France.", ["paris"], "x")
    with pytest.raises(Exception, match=r"expected \['Berlin'\].*' Paris, France\.'"):
        expect_words(" Paris, France.", ["Paris", "Berlin"], "x")


def test_log_scan_finds_the_seeds_failures() -> None:
    log = "\n".join([
        "INFO model loaded",
        "ValueError: kv_cache_dtype not supported",
        "Traceback (most recent call last):",
        "WARNING falling back to a slower kernel",
        "CUDA error: out of memory",
    ])  # fmt: skip
    assert bad_log_lines(log) == log.splitlines()[1:]
