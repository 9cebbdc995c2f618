"""The audio check's spoken text is never an espeak-ng option, and no WAV is a failed check.

Before, ``audio.say`` went on espeak-ng's command line: ``--version`` printed the version,
wrote no WAV and exited 0, so reading the WAV raised FileNotFoundError out of the runner
(a traceback, no smoke.json).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from lockpipe import cmd
from lockpipe.errors import CheckFailed, EngineError
from lockpipe.smoke import checks, runner
from lockpipe.smoke.config import Generation, MediaCheck, SmokeSpec
from lockpipe.smoke.media import speech_wav
from lockpipe.smoke.report import CheckResult
from tests.policy import unavailable


def _espeak() -> None:
    if shutil.which("espeak-ng") is None:
        unavailable("espeak-ng is not installed (apt-get install espeak-ng)")


def _is_speech(wav: bytes) -> bool:
    return wav[:4] == b"RIFF" and wav[8:12] == b"WAVE" and len(wav) > 10_000


@pytest.mark.parametrize("text", ["--version", "-q six", "-h six", "--stdin seven"])
def test_a_text_starting_with_a_dash_is_spoken_not_read_as_an_option(text: str) -> None:
    _espeak()
    assert _is_speech(speech_wav(text))


def test_non_ascii_text_is_spoken() -> None:
    _espeak()
    assert _is_speech(speech_wav("café naïve"))


def _spec(say: str) -> SmokeSpec:
    return SmokeSpec(
        target="x", ready_seconds=1.0, generations=(Generation("p", ("a",)),), image=None,
        audio=MediaCheck(prompt="transcribe", expect=("six",), say=say), baselines={},
    )  # fmt: skip


def _audio(say: str) -> CheckResult:
    c = runner._Checks("http://127.0.0.1:9", "m", "llama.cpp", "shape")
    runner._media_checks(c, _spec(say))
    [result] = c.results
    assert result.name == "audio"
    return result


def test_the_runner_speaks_a_dashed_text_and_asks_the_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _espeak()
    heard: list[object] = []

    def chat(base: str, model: str, parts: list[dict[str, object]], max_tokens: int = 48) -> str:
        heard.append(parts[0]["type"])
        return " six, seven"

    monkeypatch.setattr(checks, "chat", chat)
    result = _audio("--version six")
    assert result.ok, result.detail
    assert heard == ["input_audio"]


def test_espeak_writing_no_wav_is_the_checks_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def silent(args: Sequence[str], **kw: object) -> str:  # exit 0, no file (as with --version)
        return "eSpeak NG text-to-speech: 1.51"

    monkeypatch.setattr(cmd, "call", silent)
    with pytest.raises(CheckFailed, match=r"espeak-ng wrote no speech for 'six'.*no WAV file"):
        speech_wav("six")
    result = _audio("six")
    assert not result.ok and "espeak-ng wrote no speech" in result.detail


def test_a_wav_without_samples_is_the_checks_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def header_only(args: Sequence[str], **kw: object) -> str:
        Path(args[args.index("-w") + 1]).write_bytes(b"RIFF\x24\0\0\0WAVE" + b"\0" * 32)
        return ""

    monkeypatch.setattr(cmd, "call", header_only)
    with pytest.raises(CheckFailed, match="44 bytes, not a WAV with samples"):
        speech_wav("six")


def test_espeak_failing_is_the_checks_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    def fails(args: Sequence[str], **kw: object) -> str:
        raise EngineError("espeak-ng exited 1: bad voice")

    monkeypatch.setattr(cmd, "call", fails)
    with pytest.raises(CheckFailed, match=r"espeak-ng could not speak 'six': .*bad voice"):
        speech_wav("six")
