"""``lockpipe preflight`` on the real lock and locks/preflight.json, with --gpu (no host)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from lockpipe.cli.options import add_preflight_options
from lockpipe.errors import CheckFailed, LockError, UsageError
from lockpipe.preflight import config
from tests.frank_small import run_preflight as run

REPO = Path(__file__).resolve().parents[2]


def test_the_lock_as_it_stands_on_the_3090(tmp_path: Path) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "--driver", "610.57.04")
    assert code == 0  # frank-large is unknown (external), which passes without --strict
    names = ("frank-small", "llama-cpu", "llama-cuda", "llama-cuda-slots")
    verdicts = {t: by[t]["verdict"] for t in names}
    assert verdicts == dict.fromkeys(names, "pass")  # frank-small: bf16 at 131,072 (issue 17)
    slots = by["llama-cuda-slots"]["numbers"]
    assert (slots["fixed_mib"], slots["per_slot_mib"], slots["max_slots"]) == (8546, 3450, 4)
    assert slots["budget_from"] == "calibrated" and slots["need_mib"] == 22346
    grid = next(c for c in by["llama-cuda-slots"]["checks"] if c["name"] == "slot-grid")
    assert "262,144 per slot (the full trained window)" in grid["detail"]


def test_the_seeds_qwen_mtp_slot_fits_on_the_3090_and_a_second_does_not(tmp_path: Path) -> None:
    """llama-cuda-mtp from the header transcript in locks/preflight.json: every figure is
    recomputed here from that entry with llama.cpp b10069's rules (docs/preflight.md)."""
    meta = config.load(REPO / "locks" / "preflight.json").models["qwen3.8-27b-iq3_s-mtp"].data

    def key(name: str) -> int:
        return int(meta[f"qwen35.{name}"])

    nextn = key("nextn_predict_layers")
    main = key("block_count") - nextn
    attention = main // key("full_attention_interval")
    f16_token = 2 * key("attention.head_count_kv") * key("attention.key_length") * 2  # K+V
    inner, state = key("ssm.inner_size"), key("ssm.state_size")
    r = (key("ssm.conv_kernel") - 1) * (inner + 2 * key("ssm.group_count") * state)
    rows = 1 + 3  # the live state and draft-mtp's 3 rollback snapshots (--spec-draft-n-max)
    recurrent = (main - attention) * (r + state * inner) * 4 * rows
    per_slot = 131072 * (attention + nextn) * f16_token + recurrent
    lock = json.loads((REPO / "locks" / "digests.json").read_text())
    weights = sum(
        lock["payloads"][p]["size"] for p in lock["targets"]["llama-cuda-mtp"]["payloads"]
    )
    # the draft-mtp context's compute buffer holds its KQ mask: every cell x the 512
    # ubatch rows (common.h's n_ubatch) x f16 (llama-graph.cpp:26-43, llama_cuda.py)
    mtp_mask = 131072 * 512 * 2
    need_mib = (weights + per_slot + mtp_mask) / 2**20 + config.DEFAULT_LLAMA_COMPUTE_MIB

    code, by = run(tmp_path, "--gpu", "rtx3090", "--driver", "610.57.04", "llama-cuda-mtp")
    mtp = by["llama-cuda-mtp"]
    n = mtp["numbers"]
    assert code == 0 and mtp["verdict"] == "pass"
    assert (n["attention_layers"], n["recurrent_layers"], n["mtp_layers"]) == (16, 48, 1)
    assert n["kv_per_token_full"] == attention * f16_token
    assert n["recurrent_per_slot"] == recurrent
    assert n["need_mib"] == pytest.approx(need_mib) and need_mib < 24576
    assert n["max_slots"] == 1
    code, by = run(tmp_path, "--gpu", "rtx3090", "--parallel", "2", "--ctx-size", "262144",
                   "llama-cuda-mtp")  # fmt: skip
    budget = next(c for c in by["llama-cuda-mtp"]["checks"] if c["name"] == "budget")
    assert code == CheckFailed.return_code and budget["status"] == "fail"


def test_a_model_whose_shape_nobody_pinned_is_unknown_not_judged(tmp_path: Path) -> None:
    """Without the models entry (and no file in the store) no figure is made up."""
    doc = json.loads((REPO / "locks" / "preflight.json").read_text())
    del doc["models"]["qwen3.8-27b-iq3_s-mtp"]
    bare = tmp_path / "preflight-bare.json"
    bare.write_text(json.dumps(doc))
    code, by = run(tmp_path, "--gpu", "rtx3090", "--preflight", str(bare), "llama-cuda-mtp")
    mtp = by["llama-cuda-mtp"]
    shape = next(c for c in mtp["checks"] if c["name"] == "model-shape")
    assert code == 0 and mtp["verdict"] == "unknown" and mtp["numbers"] == {}
    assert "nox -s payloads -- qwen3.8-27b-iq3_s-mtp" in shape["fix"]
    strict, _ = run(tmp_path, "--gpu", "rtx3090", "--strict", "--preflight", str(bare),
                    "llama-cuda-mtp")  # fmt: skip
    assert strict == CheckFailed.return_code


def test_the_seeds_four_full_window_slots_fit_and_a_fifth_does_not(tmp_path: Path) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "llama-cuda-slots")
    assert code == 0 and by["llama-cuda-slots"]["numbers"]["need_mib"] == 22346
    code, by = run(
        tmp_path, "--gpu", "rtx3090", "--ctx-size", "1310720", "--parallel", "5", "llama-cuda-slots"
    )
    budget = next(c for c in by["llama-cuda-slots"]["checks"] if c["name"] == "budget")
    assert code == CheckFailed.return_code and "25,796 MiB" in budget["detail"]


def test_an_uneven_slot_grid_is_never_accepted(tmp_path: Path) -> None:
    code, by = run(
        tmp_path, "--gpu", "rtx3090", "--ctx-size", "1000000", "--parallel", "3", "llama-cuda"
    )
    grid = next(c for c in by["llama-cuda"]["checks"] if c["name"] == "slot-grid")
    assert code == CheckFailed.return_code and grid["status"] == "fail" and "even" in grid["detail"]


def test_what_if_bf16_at_131072_on_the_3090(tmp_path: Path) -> None:
    code, by = run(
        tmp_path,
        "--gpu",
        "rtx3090",
        "--kv-cache-dtype",
        "bfloat16",
        "--attention-backend",
        "auto",
        "--max-model-len",
        "131072",
        "frank-small",
    )
    numbers = by["frank-small"]["numbers"]
    assert code == 0 and numbers["backend"] == "TRITON_ATTN"
    assert 289_647 <= numbers["pool_tokens"] < 289_647 + 64  # the measured pool, to a block


def test_the_seeds_env_var_lands_nowhere(tmp_path: Path) -> None:
    code, by = run(
        tmp_path, "--gpu", "rtx3090", "--env", "VLLM_ATTENTION_BACKEND=TURBOQUANT", "frank-small"
    )
    names = [c["name"] for c in by["frank-small"]["checks"] if c["status"] == "fail"]
    assert code == CheckFailed.return_code and "env" in names


def test_preflight_json_is_validated(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"version": 1, "targets": {"x": {"llama_slots": {}}}}))
    with pytest.raises(LockError, match="points"):
        config.load(path)
    loaded = config.load(REPO / "locks" / "preflight.json")
    assert loaded.target("llama-cuda-slots").llama_slots is not None
    assert config.load(tmp_path / "absent.json").targets == {}


def test_verb_options_parse() -> None:
    p = argparse.ArgumentParser()
    add_preflight_options(p)
    ns = p.parse_args(["--gpu", "h200", "--env", "A=1", "--env", "B=2", "--strict"])
    assert (ns.gpu, ns.env, ns.strict) == ("h200", ["A=1", "B=2"], True)


def test_an_external_image_gets_its_slot_grid_checked_and_an_unknown_verdict(
    tmp_path: Path,
) -> None:
    """frank-large: 2 slots x HALOGEN_CTX 200,192 = the seeds' 400,384-position pool."""
    code, by = run(tmp_path, "--gpu", "rtx3090", "frank-large")
    fl = by["frank-large"]
    grid = next(c for c in fl["checks"] if c["name"] == "slot-grid")
    assert code == 0 and fl["verdict"] == "unknown" and fl["runtime"] == "halogen"
    assert grid["status"] == "pass" and "= 400,384 positions" in grid["detail"]


def test_no_card_anywhere_says_why_the_host_gave_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = json.loads((REPO / "locks" / "preflight.json").read_text())
    doc["targets"]["llama-cuda"].pop("card")
    bare = tmp_path / "preflight-nocard.json"
    bare.write_text(json.dumps(doc))
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    with pytest.raises(UsageError) as info:
        run(tmp_path, "--preflight", str(bare), "llama-cuda")
    text = str(info.value)
    assert "no NVIDIA driver tools" in text and "preflight --gpu CARD" in text
    assert "targets.llama-cuda.card" in text


@pytest.mark.parametrize("length", ["0", "-5"])
def test_a_length_vllm_refuses_is_a_failed_check(tmp_path: Path, length: str) -> None:
    """0 was taken as "not given" (the lock's own length judged, PASS) and -5 sized a pool
    of -1,614 tokens; vLLM refuses both (ModelConfig.max_model_len: ge=-1, then "must be a
    positive integer")."""
    code, by = run(tmp_path, "--gpu", "rtx3090", "--max-model-len", length, "frank-small")
    assert code == CheckFailed.return_code
    check = next(c for c in by["frank-small"]["checks"] if c["name"] == "max-model-len")
    assert check["status"] == "fail", check
    assert f"--max-model-len {length}: vLLM takes a length of 1 or more" in check["detail"]


@pytest.mark.parametrize("length", ["-1", "auto"])
def test_auto_length_is_judged_at_the_trained_window(tmp_path: Path, length: str) -> None:
    """-1 (auto) is vLLM's "the trained length, fitted to memory"; it was sized as a
    length of -1: a pool of -1,614 tokens and 1,614 sessions, PASS."""
    _, by = run(tmp_path, "--gpu", "rtx3090", "--max-model-len", length, "frank-small")
    numbers = by["frank-small"]["numbers"]
    assert numbers["max_model_len"] == 262_144, numbers  # gemma-4's max_position_embeddings
    assert numbers["pool_tokens"] > 0, numbers
    assert "max-model-len" not in {c["name"] for c in by["frank-small"]["checks"]}


def test_a_length_written_as_vllm_s_shorthand_is_refused_with_its_whole_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run(tmp_path, "--gpu", "rtx3090", "--max-model-len", "128k", "frank-small")
    assert "'128k' is not a number of tokens: write it whole (128000 for 128k" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--free-mib", "-5", "'-5' is not a whole number of MiB (0 or more)"),
        ("--free-mib", "2e4", "'2e4' is not a whole number of MiB (0 or more)"),
        ("--gpu-index", "-1", "'-1' is not a GPU index (0, 1, …)"),
    ],
)
def test_a_card_given_negative_numbers_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, said: str
) -> None:
    """--free-mib -5 was judged as it came: FAIL, "-5 MiB is free now", fix: "stop what
    holds the card"."""
    with pytest.raises(SystemExit):
        run(tmp_path, "--gpu", "rtx3090", option, value, "frank-small")
    assert f"argument {option}: {said}" in capsys.readouterr().err


def test_the_locks_serve_env_is_judged_as_the_server_sees_it(tmp_path: Path) -> None:
    """serve.env reaches the container (smoke and the unit), so preflight judges it as
    it does --env and the Dockerfile's ENV: the seeds' VLLM_ATTENTION_BACKEND=TURBOQUANT
    in the lock passed before, unread (issue 18)."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "images").symlink_to(REPO / "images")
    (root / "locks").mkdir()
    doc = json.loads((REPO / "locks" / "digests.json").read_text())
    doc["targets"]["frank-small"]["serve"]["env"] = {"VLLM_ATTENTION_BACKEND": "TURBOQUANT"}
    lock = root / "locks" / "digests.json"
    lock.write_text(json.dumps(doc, indent=2) + "\n")
    shutil.copy(REPO / "locks" / "preflight.json", root / "locks" / "preflight.json")
    code, by = run(tmp_path, "--gpu", "rtx3090", "frank-small", lock=lock)
    names = [c["name"] for c in by["frank-small"]["checks"] if c["status"] == "fail"]
    assert code == CheckFailed.return_code and "env" in names, names
