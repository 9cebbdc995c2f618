"""``lockpipe preflight`` on the real lock and locks/preflight.json, with --gpu (no host)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import options
from pipeline.cli.options import add_preflight_options
from pipeline.cli.preflight import do_preflight
from pipeline.errors import CHECK_FAILED_RUN, LockError
from pipeline.preflight import config

REPO = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    parser = options.Parser(prog="lockpipe preflight", parents=[options.common()])
    parser.add_argument("targets", nargs="*")
    add_preflight_options(parser)
    out = tmp_path / "preflight.json"
    args = parser.parse_args(
        [
            "--lock",
            str(REPO / "locks" / "digests.json"),
            "--store",
            str(tmp_path / "no-store"),
            "--json",
            str(out),
            *argv,
        ]
    )
    args.verb = "preflight"
    code = do_preflight(args)
    report: dict[str, Any] = json.loads(out.read_text())
    return code, {t["target"]: t for t in report["targets"]}


def test_the_lock_as_it_stands_on_the_3090(tmp_path: Path) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "--driver", "610.57.04")
    assert code == CHECK_FAILED_RUN
    assert by["frank-small"]["verdict"] == "fail"  # TURBOQUANT cannot run Gemma 4's layers
    verdicts = {t: by[t]["verdict"] for t in ("llama-cpu", "llama-cuda", "llama-cuda-slots")}
    assert verdicts == {"llama-cpu": "pass", "llama-cuda": "pass", "llama-cuda-slots": "pass"}
    slots = by["llama-cuda-slots"]["numbers"]
    assert (slots["fixed_mib"], slots["per_slot_mib"], slots["max_slots"]) == (8546, 3450, 4)
    assert slots["budget_from"] == "calibrated" and slots["need_mib"] == 22346
    grid = next(c for c in by["llama-cuda-slots"]["checks"] if c["name"] == "slot-grid")
    assert "262,144 per slot (the full trained window)" in grid["detail"]


def test_a_model_whose_shape_nobody_pinned_is_unknown_not_judged(tmp_path: Path) -> None:
    """The Qwen3.8-27B -mtp GGUF's header is not reachable from here: no figure is made up."""
    code, by = run(tmp_path, "--gpu", "rtx3090", "llama-cuda-mtp")
    mtp = by["llama-cuda-mtp"]
    shape = next(c for c in mtp["checks"] if c["name"] == "model-shape")
    assert code == 0 and mtp["verdict"] == "unknown" and mtp["numbers"] == {}
    assert "nox -s payloads -- qwen3.8-27b-iq3_s-mtp" in shape["fix"]
    strict, _ = run(tmp_path, "--gpu", "rtx3090", "--strict", "llama-cuda-mtp")
    assert strict == CHECK_FAILED_RUN


def test_the_seeds_four_full_window_slots_fit_and_a_fifth_does_not(tmp_path: Path) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "llama-cuda-slots")
    assert code == 0 and by["llama-cuda-slots"]["numbers"]["need_mib"] == 22346
    code, by = run(
        tmp_path, "--gpu", "rtx3090", "--ctx-size", "1310720", "--parallel", "5", "llama-cuda-slots"
    )
    budget = next(c for c in by["llama-cuda-slots"]["checks"] if c["name"] == "budget")
    assert code == CHECK_FAILED_RUN and "25,796 MiB" in budget["detail"]


def test_an_uneven_slot_grid_is_never_accepted(tmp_path: Path) -> None:
    code, by = run(
        tmp_path, "--gpu", "rtx3090", "--ctx-size", "1000000", "--parallel", "3", "llama-cuda"
    )
    grid = next(c for c in by["llama-cuda"]["checks"] if c["name"] == "slot-grid")
    assert code == CHECK_FAILED_RUN and grid["status"] == "fail" and "even" in grid["detail"]


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
    assert code == CHECK_FAILED_RUN and "env" in names


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
