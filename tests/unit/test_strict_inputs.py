"""Strict by default: a typo in smoke.json or preflight.json is an error with a hint (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import LockError, SmokeConfigError, UsageError
from lockpipe.preflight import config, host, llama
from lockpipe.smoke.config import load_smoke
from lockpipe.spelling import hint, nearest

REPO = Path(__file__).resolve().parents[2]


def _smoke(tmp_path: Path, target: dict[str, Any]) -> Path:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"t": target}}))
    return path


GEN = [{"prompt": "The Eiffel Tower is in", "expect": ["Paris"]}]


def test_the_repository_files_pass() -> None:
    assert load_smoke(REPO / "locks/smoke.json")
    assert config.load(REPO / "locks/preflight.json").targets


def test_a_misspelt_smoke_key_is_refused_with_a_hint(tmp_path: Path) -> None:
    path = _smoke(tmp_path, {"ready_secs": 5, "generation": GEN, "probes": {}})
    with pytest.raises(SmokeConfigError) as err:
        load_smoke(path)
    assert err.value.return_code == 15
    assert "targets.t.ready_secs: unknown key (did you mean ready_seconds?)" in str(err.value)


def test_a_misspelt_generation_key_is_refused(tmp_path: Path) -> None:
    path = _smoke(tmp_path, {"generation": [{**GEN[0], "max_token": 3}], "probes": {}})
    with pytest.raises(SmokeConfigError, match=r"generation\[0\]\.max_token: .*max_tokens"):
        load_smoke(path)


def test_smoke_json_missing_or_without_probes_is_a_smoke_config_error(tmp_path: Path) -> None:
    with pytest.raises(SmokeConfigError) as err:
        load_smoke(tmp_path / "absent.json")
    assert err.value.return_code == 15
    with pytest.raises(SmokeConfigError, match='needs a "probes" object'):
        load_smoke(_smoke(tmp_path, {"generation": GEN}))


IMAGE = {"prompt": "Which colour?", "expect": ["red"]}
TOKENS = "targets.t.generation[0].max_tokens"


@pytest.mark.parametrize(
    ("change", "key", "shown"),
    [
        ({"ready_seconds": "5m"}, "targets.t.ready_seconds", '"5m"'),
        ({"ready_seconds": [1]}, "targets.t.ready_seconds", "[1]"),
        ({"ready_seconds": float("nan")}, "targets.t.ready_seconds", "NaN"),
        ({"ready_seconds": float("inf")}, "targets.t.ready_seconds", "Infinity"),
        ({"ready_seconds": -5}, "targets.t.ready_seconds", "-5"),
        ({"ready_seconds": 0}, "targets.t.ready_seconds", "0"),
        ({"ready_seconds": True}, "targets.t.ready_seconds", "true"),
        ({"generation": [{**GEN[0], "max_tokens": "many"}]}, TOKENS, '"many"'),
        ({"generation": [{**GEN[0], "max_tokens": -3}]}, TOKENS, "-3"),
        ({"generation": [{**GEN[0], "max_tokens": 1.9}]}, TOKENS, "1.9"),
        ({"image": {**IMAGE, "rgb": 255}}, "targets.t.image.rgb", "255"),
        ({"image": {**IMAGE, "rgb": "red"}}, "targets.t.image.rgb", '"red"'),
        ({"image": {**IMAGE, "rgb": [255, 0, 999]}}, "targets.t.image.rgb", "[255, 0, 999]"),
        ({"image": {**IMAGE, "rgb": {"r": 1, "g": 2, "b": 3}}}, "targets.t.image.rgb", '{"r": 1'),
        ({"audio": {**IMAGE, "say": ["hello"]}}, "targets.t.audio.say", '["hello"]'),
        ({"audio": {**IMAGE, "say": ""}}, "targets.t.audio.say", '""'),
    ],
)  # fmt: skip
def test_a_smoke_value_of_the_wrong_kind_is_one_line_naming_it(
    tmp_path: Path, change: dict[str, Any], key: str, shown: str
) -> None:
    """ "5m" or [1] was a traceback from float(); NaN, -5 or 1e999 seconds were taken
    (a deadline already past, or never); 1.9 tokens became 1; an rgb of 255 was a
    TypeError and one of "red" a wrong error."""
    path = _smoke(tmp_path, {"generation": GEN, "probes": {}, **change})
    with pytest.raises(SmokeConfigError) as err:
        load_smoke(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {key}: must be "), message
    assert f"not {shown}" in message and "\n" not in message, message


def test_smoke_values_within_their_bounds_are_kept(tmp_path: Path) -> None:
    spec = load_smoke(_smoke(tmp_path, {
        "ready_seconds": 0.5, "generation": [{**GEN[0], "max_tokens": 1}], "probes": {},
        "image": {**IMAGE, "rgb": [255, 0, 0]}, "audio": {**IMAGE, "say": "red"},
    }))["t"]  # fmt: skip
    assert spec.ready_seconds == 0.5 and spec.generations[0].max_tokens == 1
    assert spec.image and spec.image.rgb == (255, 0, 0)
    assert spec.audio and spec.audio.say == "red"


def test_a_misspelt_preflight_key_is_refused_with_a_hint() -> None:
    doc = {"version": 1, "targets": {"t": {"crad": "rtx3090"}}}
    with pytest.raises(LockError, match=r"targets\.t\.crad: unknown key \(did you mean card\?\)"):
        config.parse(doc, Path("preflight.json"))
    with pytest.raises(LockError, match=r"modles: unknown key \(did you mean models\?\)"):
        config.parse({"version": 1, "modles": {}}, Path("preflight.json"))


def test_nearest_name() -> None:
    assert nearest("frank-smal", ["frank-small", "llama-cpu"]) == "frank-small"
    assert nearest("zzz", ["frank-small", "llama-cpu"]) is None
    assert hint("LLAMA-CPU", ["llama-cpu"]) == " (did you mean llama-cpu?)"


@pytest.mark.parametrize(
    ("typed", "card"),
    [("RTX 3090", "rtx3090"), ("3090", "rtx3090"), ("h100", "h100-80g"),
     ("NVIDIA GeForce RTX 4090", "rtx4090"), ("A100 80GB", "a100-80g"), ("rtx3090", "rtx3090")],
)  # fmt: skip
def test_card_names_are_normalised(typed: str, card: str) -> None:
    assert host.card_named(typed).name == card


def test_an_ambiguous_or_unknown_card_is_refused_with_the_candidates() -> None:
    with pytest.raises(UsageError, match=r"more than one card matches \(a100-40g, a100-80g\)"):
        host.card_named("a100")
    with pytest.raises(UsageError, match=r"unknown card \(did you mean rtx3090\?\)"):
        host.card_named("rtx3080")


def test_a_kv_dtype_llama_cpp_lacks_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    lock = str(REPO / "locks/digests.json")
    code = main(["preflight", "--lock", lock, "--gpu", "rtx3090", "--kv-cache-dtype", "q5_9",
                 "llama-cuda"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 64, err
    assert (
        "llama-cuda: --kv-cache-dtype q5_9: llama.cpp has no such cache type (did you mean q5_"
        in err
    )
    assert "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1" in err  # llama.KV_TYPES


def test_llama_cpp_cache_types_are_b10069s() -> None:
    """KV_TYPES are arg.cpp's kv_cache_types at b10069 (common/arg.cpp:301-311)."""
    assert list(llama.KV_TYPES) == ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl",
                                    "q5_0", "q5_1"]  # fmt: skip


@pytest.mark.parametrize("verb", ["payloads", "smoke", "preflight", "deploy"])
def test_an_empty_store_path_is_refused(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([verb, "--store", ""])
    assert exc.value.code == 64
    assert (
        "argument --store: an empty path would mean the current folder" in capsys.readouterr().err
    )


def test_an_unknown_target_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--lock", str(REPO / "locks/digests.json"), "frank-smal"])
    assert code == 64
    assert "no target 'frank-smal' (did you mean frank-small?)" in capsys.readouterr().err
