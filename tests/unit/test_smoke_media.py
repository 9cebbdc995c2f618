from __future__ import annotations

import base64
import shutil
import struct
import zlib

import pytest

from lockpipe.smoke.checks import audio_part, expect_words, image_part
from lockpipe.smoke.media import solid_png, speech_wav
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


def test_the_smoke_log_scan_fails_on_fatal_lines_and_passes_benign_ones() -> None:
    from lockpipe.errors import CheckFailed
    from lockpipe.smoke.runner import _scan

    healthy = "INFO model loaded\nWARNING falling back to a slower kernel"
    assert "none fatal for vllm" in _scan(healthy, "vllm")[0]
    with pytest.raises(CheckFailed, match=r"line 2 \[.*\]: 'Traceback"):
        _scan("INFO model loaded\nTraceback (most recent call last):", "vllm")
