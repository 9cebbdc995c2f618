"""An expected word that is empty or blank proves nothing: every answer holds it.

smoke.json's ``expect`` lists (generation and media checks) refuse one at load, naming
the file and the key; expect_words fails on one too, whatever the answer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.errors import CheckFailed, SmokeConfigError
from lockpipe.smoke.checks import expect_words
from lockpipe.smoke.config import load_smoke

GEN = {"prompt": "p", "expect": ["a"]}


def _load(tmp_path: Path, target: dict[str, object]) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"x": {"probes": {}, **target}}}))
    load_smoke(path)


@pytest.mark.parametrize("word", ["", " ", "\t\n"])
@pytest.mark.parametrize(
    ("target", "key"),
    [
        ({"generation": [{"prompt": "p", "expect": ["{w}"]}]}, "generation[0].expect[0]"),
        ({"generation": [GEN, {"prompt": "q", "expect": ["ok", "{w}"]}]},
         "generation[1].expect[1]"),
        ({"generation": [GEN], "image": {"prompt": "p", "expect": ["{w}"], "rgb": [1, 2, 3]}},
         "image.expect[0]"),
        ({"generation": [GEN], "audio": {"prompt": "p", "expect": ["six", "{w}"], "say": "six"}},
         "audio.expect[1]"),
    ],
)  # fmt: skip
def test_a_blank_expected_word_is_refused_naming_file_and_key(
    tmp_path: Path, target: dict[str, object], key: str, word: str
) -> None:
    raw = json.loads(json.dumps(target).replace("{w}", json.dumps(word)[1:-1]))
    with pytest.raises(SmokeConfigError) as err:
        _load(tmp_path, raw)
    message = str(err.value)
    assert str(tmp_path / "smoke.json") in message
    assert f"targets.x.{key}: " in message


def test_real_words_still_load(tmp_path: Path) -> None:
    _load(tmp_path, {"generation": [{"prompt": "p", "expect": [" Paris "]}]})


@pytest.mark.parametrize("answer", ["", "anything at all"])
def test_expect_words_fails_on_a_blank_word_whatever_the_answer(answer: str) -> None:
    with pytest.raises(CheckFailed, match="blank"):
        expect_words(answer, ["", "a"], "completion")
    with pytest.raises(CheckFailed, match="blank"):
        expect_words(answer, [" "], "completion")
