"""Preflight's inputs that are numbers: a model's counts and lengths (preflight.json's
models entries, a GGUF header, a config.json), --free-mib/--driver without a card, and
digit runs past Python's int limit. Each wrong one is one error line naming it, never a
PASS judged on it, nor a traceback (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import CheckFailed, FormatError, GpuAttachError, UsageError
from lockpipe.preflight import host
from tests.unit.test_preflight_bad_files import Doc, _checkout

GGUF = "gemma-4-12b-q4_k_m"  # llama-cuda's model
CONFIG = "gemma-4-12b-qat-w4a16"  # frank-small's model


def _preflight(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    lock: Path,
    *args: str,
) -> tuple[int, str]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOCKPIPE_VLLM_PARSER", raising=False)
    code = main(["preflight", "--lock", str(lock), "--store", str(tmp_path / "store"),
                 "--cache", str(tmp_path / "cache"), "--vllm-parser", "off", *args])  # fmt: skip
    out = capsys.readouterr()
    return code, out.out + out.err


HUGE = 10**400


@pytest.mark.parametrize(
    ("model", "path", "value"),
    [
        (CONFIG, ("text_config", "num_key_value_heads"), -8),
        (CONFIG, ("text_config", "head_dim"), -256),
        (CONFIG, ("text_config", "max_position_embeddings"), -5),
        (CONFIG, ("text_config", "sliding_window"), HUGE),
        (CONFIG, ("text_config", "global_head_dim"), 2**31),
        (GGUF, ("gemma4.context_length",), -5),
        (GGUF, ("gemma4.attention.key_length",), HUGE),
        (GGUF, ("gemma4.attention.head_count",), -16),
        (GGUF, ("gemma4.attention.head_count_kv", 3), -8),
        (GGUF, ("gemma4.attention.sliding_window",), -1024),
    ],
    ids=lambda v: "10**400" if v == HUGE else None,
)
def test_a_model_count_below_0_or_past_the_bound_is_one_error_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    model: str,
    path: tuple[str | int, ...],
    value: int,
) -> None:
    """-8 KV heads made a page of -8,192 B and a PASS; -5 tokens of context a KV of 0 MiB
    and a PASS; 10**400 an OverflowError's traceback in verdict.mib."""
    kind = "gguf" if model == GGUF else "config"

    def edit(d: Doc) -> None:
        node = d["models"][model][kind]
        for key in path[:-1]:
            node = node[key]
        assert isinstance(node[path[-1]], int)
        node[path[-1]] = value

    target = "llama-cuda" if model == GGUF else "frank-small"
    code, said = _preflight(tmp_path, monkeypatch, capsys, _checkout(tmp_path, edit),
                            "--gpu", "rtx3090", target)  # fmt: skip
    assert code == FormatError.return_code, said
    assert "PASS" not in said, said
    shown = ".".join(f"[{k}]" if isinstance(k, int) else k for k in path).replace(".[", "[")
    assert f"preflight.json: models.{model}: {shown} is " in said, said
    assert "must be 0 to 2,147,483,647" in said, said


def test_gguf_shared_kv_layers_past_the_last_layer_is_one_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No layer left holding KV, as config.json's num_kv_shared_layers is already refused."""

    def edit(d: Doc) -> None:
        d["models"][GGUF]["gguf"]["gemma4.attention.shared_kv_layers"] = 48

    code, said = _preflight(tmp_path, monkeypatch, capsys, _checkout(tmp_path, edit),
                            "--gpu", "rtx3090", "llama-cuda")  # fmt: skip
    assert code == FormatError.return_code, said
    assert f"models.{GGUF}: gemma4.attention.shared_kv_layers 48 of 48 layers" in said, said
    assert "0 to 47" in said, said


def _no_host_card(monkeypatch: pytest.MonkeyPatch) -> None:
    def query_host(index: int = 0) -> host.Card:
        raise GpuAttachError("nvidia-smi is not on PATH")

    monkeypatch.setattr(host, "query_host", query_host)


@pytest.mark.parametrize("asked", [("--free-mib", "100"), ("--driver", "400.1")])
def test_free_mib_and_driver_apply_to_the_card_preflight_json_names(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    asked: tuple[str, str],
) -> None:
    """With no host card, --free-mib 100 and --driver 400.1 were dropped: a PASS, where
    --gpu rtx3090 (the card preflight.json names for llama-cuda) with them fails."""
    _no_host_card(monkeypatch)
    lock = _checkout(tmp_path)
    code, said = _preflight(tmp_path, monkeypatch, capsys, lock, *asked, "llama-cuda")
    named, named_said = _preflight(tmp_path, monkeypatch, capsys, lock, "--gpu", "rtx3090",
                                   *asked, "llama-cuda")  # fmt: skip
    assert named == CheckFailed.return_code, named_said
    assert code == CheckFailed.return_code, said
    assert "no host card" in said, said
    wanted = "100 MiB" if asked[0] == "--free-mib" else "driver 400.1"
    assert wanted in said and wanted in named_said, said


DIGITS = "8" * 5000  # past int()'s 4,300 digits


def test_a_driver_of_5000_digits_is_one_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was ValueError: Exceeds the limit (4300 digits), a traceback."""
    code, said = _preflight(tmp_path, monkeypatch, capsys, _checkout(tmp_path),
                            "--gpu", "rtx3090", "--driver", DIGITS, "llama-cuda")  # fmt: skip
    assert code == UsageError.return_code, said
    assert f"--driver {'8' * 40}... (5,000 characters): not a driver version" in said, said
    assert len(said.strip().splitlines()) == 1, said


@pytest.mark.parametrize("where", ["lock", "preflight.json"])
def test_cuda_architectures_of_5000_digits_fail_the_arch_check_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """build_args.CMAKE_CUDA_ARCHITECTURES (or preflight.json's image_archs) of 5000 digits
    was ValueError: Exceeds the limit (4300 digits), a traceback."""

    def edit(d: Doc) -> None:
        if where == "preflight.json":
            d["targets"]["frank-small"]["image_archs"] = f"86;{DIGITS}"

    lock = _checkout(tmp_path, edit)
    if where == "lock":
        doc = json.loads(lock.read_text())
        doc["targets"]["llama-cuda"]["build_args"]["CMAKE_CUDA_ARCHITECTURES"] = f"86;{DIGITS}"
        lock.write_text(json.dumps(doc))
    target = "llama-cuda" if where == "lock" else "frank-small"
    code, said = _preflight(tmp_path, monkeypatch, capsys, lock, "--gpu", "rtx3090", target)
    assert code == CheckFailed.return_code, said
    assert f"CMAKE_CUDA_ARCHITECTURES item {'8' * 40}... (5,000 characters) is no CUDA" in said
