"""Every vLLM target's serve command through vLLM's own parser, from the pinned wheel.

``FlexibleArgumentParser`` with the serve subcommand, then ``AsyncEngineArgs.from_cli_args``,
imported from the wheel's ``.py`` tree with torch run on the CPU (lockpipe/preflight/
vllm_parser.py; the constraints set of the running Python: 3.11's is torch's CPU build,
3.13's PyPI's CUDA build). The environment is the one ``nox -s vllm-parser`` builds under the cache
(LOCKPIPE_CACHE, else ~/.cache/lockpipe). Where it is not built: on CI it is built here (a
few minutes, then kept), and a parser that cannot run fails; elsewhere the tests skip.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import CheckFailed
from lockpipe.lock.model import Lock, load_lock
from lockpipe.preflight import (
    config,
    host,
    plan,
    vllm_parser,
    vllm_parser_env,
    vllm_rules,
    vllm_validate,
)
from lockpipe.preflight.vllm_parser import Accepted, Parsed, ParserEnv, Refused
from lockpipe.preflight.vllm_validate import Validation
from lockpipe.preflight.whatif import Overrides
from tests.frank_small import TURBOQUANT_WHAT_IF, run_preflight, turboquant
from tests.vllm_env import parser_env

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
VLLM = {n: t for n, t in LOCK.targets.items() if t.serve.runtime == "vllm" and not t.external}
(VERSION,) = vllm_parser_env.versions(LOCK)
BASE = ("vllm", "serve", "m")
# Beside the lock's own commands: what vLLM must refuse, and the seeds' TurboQuant flags,
# which its parser takes (preflight's backend rules are what refuse them)
EXTRA = {
    "bad dtype": (*BASE, "--kv-cache-dtype", "bfloat17"),
    "unknown flag": (*BASE, "--no-such-flag", "1"),
    "bad JSON": (*BASE, "--speculative-config", "{not json"),
    "turboquant": turboquant(LOCK).target("frank-small").serve.command,
}


@pytest.fixture(scope="module")
def env() -> ParserEnv:
    return parser_env(VERSION)


@pytest.fixture(scope="module")
def parsed(env: ParserEnv) -> dict[str, Parsed]:
    """One run of the parser for every command (importing it takes seconds)."""
    commands = {**{n: t.serve.command for n, t in VLLM.items()}, **EXTRA}
    results = vllm_parser.parse(env, list(commands.values()))
    out = dict(zip(commands, results, strict=True))
    for name, result in out.items():
        if isinstance(result, vllm_parser.Unavailable):
            pytest.fail(f"vLLM {VERSION}'s parser did not run on {name}: {result.reason}")
    return out


def test_every_vllm_targets_command_is_accepted_as_the_lock_declares_it(
    parsed: dict[str, Parsed],
) -> None:
    assert VLLM, "the lock has a vLLM target"
    for name, target in VLLM.items():
        got = parsed[name]
        assert isinstance(got, Accepted), f"{name}: {got}"
        e, serve = got.engine, target.serve
        assert e["kv_cache_dtype"] == serve.kv_dtype, name
        assert (e["max_model_len"], e["max_num_seqs"]) == (serve.context, serve.parallel), name
        assert e["attention_backend"] is None and not e["attention_config"]["backend"], name
        assert e["model"].startswith("/store/"), name  # the payload placeholder, stood in
    spec = parsed["frank-small"]
    assert isinstance(spec, Accepted)
    assert spec.engine["speculative_config"] == {
        "method": "mtp",
        "model": "/store/gemma-4-12b-mtp-assistant-bf16",
        "num_speculative_tokens": 4,
    }


def test_vllm_refuses_a_bad_dtype_an_unknown_flag_and_bad_json(parsed: dict[str, Parsed]) -> None:
    bad, unknown, broken = parsed["bad dtype"], parsed["unknown flag"], parsed["bad JSON"]
    assert isinstance(bad, Refused) and isinstance(unknown, Refused)
    assert "argument --kv-cache-dtype: invalid choice: 'bfloat17'" in bad.message
    # vLLM's own choices, listed (quoted by Python 3.11's argparse, not by 3.13's)
    assert "turboquant_k8v4" in bad.message.partition("(choose from ")[2]
    assert "unrecognized arguments: --no-such-flag 1" in unknown.message
    assert isinstance(broken, Refused) and "--speculative-config" in broken.message


def test_the_seeds_turboquant_flags_parse_and_preflight_refuses_the_backend(
    parsed: dict[str, Parsed], env: ParserEnv, tmp_path: Path
) -> None:
    tq = parsed["turboquant"]
    assert isinstance(tq, Accepted)
    assert (tq.engine["attention_backend"], tq.engine["kv_cache_dtype"]) == (
        "TURBOQUANT", "turboquant_k8v4"
    )  # fmt: skip
    where = str(env.tree.parent)
    code, by = run_preflight(tmp_path, "--gpu", "rtx3090", "--vllm-parser", where,
                             *TURBOQUANT_WHAT_IF, "frank-small")  # fmt: skip
    checks = {c["name"]: c for c in by["frank-small"]["checks"]}
    assert checks["serve-args"]["status"] == "pass"
    assert code == CheckFailed.return_code and checks["backend"]["status"] == "fail"
    # vLLM's own validate_configuration said it, through platforms/cuda.py, not the extract
    detail = checks["backend"]["detail"]
    assert "get_attn_backend_cls" in detail
    assert "Selected backend AttentionBackendEnum.TURBOQUANT is not valid" in detail
    assert "head 256 sliding turboquant_k8v4 (37 layers)" in detail
    assert "Reason: ['sliding window not supported']" in detail
    assert (
        "head 512 full auto (layers 47): " in detail and "'kv_cache_dtype not supported'" in detail
    )
    figures = {f["name"]: f for f in by["frank-small"]["figures"]}
    assert figures["serve command"]["value"] == f"parsed by vLLM {VERSION}"
    assert figures["backend rules"]["value"] == "vLLM's code"


def _asked(lock: Lock, name: str, card: str, *what_if: str) -> dict[str, Any]:
    """What preflight asks vLLM's backend functions for ``name`` on ``card``."""
    cfg = config.load(REPO / "locks" / "preflight.json")
    target = lock.target(name)
    over = Overrides(attention_backend=what_if[1]) if what_if else Overrides()
    shape = plan.model_shape(lock, cfg, target, None)
    asked = plan.validation_request(lock, cfg, target, host.card_named(card), shape, over)
    assert asked is not None
    return asked


@pytest.fixture(scope="module")
def validated(env: ParserEnv) -> dict[str, Validation]:
    """frank-small's layers through vLLM's own selector and page unification: on the 3090
    and the H100 as locked, and with FLASH_ATTN forced on the 3090 (one run)."""
    cases = {
        "3090": ((), "rtx3090", ()),
        "h100": ((), "h100-80g", ()),
        "3090 FLASH_ATTN": (("--attention-backend", "FLASH_ATTN"), "rtx3090",
                            ("--attention-backend", "FLASH_ATTN")),
    }  # fmt: skip
    command = LOCK.target("frank-small").serve.command
    argvs = [(*command, *extra) for extra, _, _ in cases.values()]
    asks = [_asked(LOCK, "frank-small", card, *w) for _, card, w in cases.values()]
    results = vllm_parser.parse(env, argvs, validate=asks)
    out = {}
    for name, result in zip(cases, results, strict=True):
        assert isinstance(result, Accepted), f"{name}: {result}"
        got = vllm_validate.read(result.validation, VERSION)
        assert isinstance(got, Validation), f"{name}: {got}"
        out[name] = got
    return out


def test_vllms_own_selector_gives_gemma4_triton_on_the_3090(
    validated: dict[str, Validation],
) -> None:
    v = validated["3090"]
    assert v.forced is None and v.after_hook == "TRITON_ATTN"  # the Gemma 4 hook: no FA4
    assert {(k.head_size, k.sliding, k.backend) for k in v.kinds} == {
        (256, True, "TRITON_ATTN"), (512, False, "TRITON_ATTN")
    }  # fmt: skip
    assert "vllm._C_stable_libtorch" in v.fakes  # the compiled extensions stood in for
    # and vLLM's own page unification: the full layers' blocks grow 4x to the sliding page
    pages = {(r.block, r.page) for r in v.pages}
    assert pages == {(16, 131072), (64, 131072)} and not v.pages_refused


def test_flash_attn_at_head_512_is_refused_on_the_3090_by_vllms_validation(
    validated: dict[str, Validation],
) -> None:
    forced = validated["3090 FLASH_ATTN"]
    refused = {k.head_size: k.refused for k in forced.kinds if k.refused}
    assert list(refused) == [512]
    assert "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid" in refused[512]
    assert "head_size not supported" in refused[512]


def test_on_the_h100_the_gemma4_hook_leaves_vllm_to_pick_flash_attn_for_every_layer(
    validated: dict[str, Validation],
) -> None:
    v = validated["h100"]
    assert v.after_hook is None  # FA4 supported on 9.x: flash_attn_version 4, no backend forced
    # EngineArgs.get_batch_defaults on the card's memory: 80 GiB (not an A100) is 8192
    assert (v.batched_default, validated["3090"].batched_default) == (8192, 2048)
    assert {k.backend for k in v.kinds} == {"FLASH_ATTN"} and not any(k.refused for k in v.kinds)


def test_the_environment_records_what_it_was_built_from(env: ParserEnv) -> None:
    marker = json.loads((env.tree.parent / vllm_parser.MARKER).read_text())
    wheel = vllm_rules.release(VERSION)["wheel"]
    assert (marker["wheel"], marker["sha256"]) == (wheel["file"], wheel["sha256"])
    assert marker["constraints"] == vllm_parser_env.constraints_for(REPO, VERSION).name
    assert not (env.tree / "vllm" / "_C.abi3.so").exists()  # the .py files alone
