"""Every vLLM target's serve command through vLLM's own parser, from the pinned wheel.

``FlexibleArgumentParser`` with the serve subcommand, then ``AsyncEngineArgs.from_cli_args``,
imported from the wheel's ``.py`` tree with torch's CPU build (lockpipe/preflight/
vllm_parser.py). The environment is the one ``nox -s vllm-parser`` builds under the cache
(LOCKPIPE_CACHE, else ~/.cache/lockpipe). Where it is not built: on CI it is built here (a
few minutes, then kept), and a parser that cannot run fails; elsewhere the tests skip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lockpipe.errors import LockpipeError
from lockpipe.fs import cache_home
from lockpipe.lock.model import load_lock
from lockpipe.preflight import vllm_parser, vllm_parser_env, vllm_rules
from lockpipe.preflight.vllm_parser import Accepted, Parsed, ParserEnv, Refused
from tests.frank_small import TURBOQUANT_WHAT_IF, run_preflight, turboquant
from tests.policy import ON_CI, unavailable

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
VLLM = {n: t for n, t in LOCK.targets.items() if t.serve.runtime == "vllm" and not t.external}
(VERSION,) = vllm_parser_env.versions(LOCK)
CACHE = Path(os.environ.get("LOCKPIPE_CACHE") or cache_home(os.environ) / "lockpipe")
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
    where = vllm_parser.env_dir(CACHE, VERSION)
    found = vllm_parser.find_env(where, VERSION, vllm_rules.release(VERSION)["wheel"])
    if isinstance(found, ParserEnv):
        return found
    if not ON_CI:
        unavailable(f"{found.reason}; {found.fix}")
    try:
        return vllm_parser_env.build(REPO, CACHE, VERSION)
    except LockpipeError as exc:
        pytest.fail(f"CI=true but vLLM {VERSION}'s parser cannot be built: {exc}")


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
    assert "'turboquant_k8v4'" in bad.message  # vLLM's own choices, listed
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
    assert code == 1 and checks["backend"]["status"] == "fail"
    assert "sliding window not supported (40 sliding layers)" in checks["backend"]["detail"]
    read = next(f for f in by["frank-small"]["figures"] if f["name"] == "serve command")
    assert read["value"] == f"parsed by vLLM {VERSION}"


def test_the_environment_records_what_it_was_built_from(env: ParserEnv) -> None:
    marker = json.loads((env.tree.parent / vllm_parser.MARKER).read_text())
    wheel = vllm_rules.release(VERSION)["wheel"]
    assert (marker["wheel"], marker["sha256"]) == (wheel["file"], wheel["sha256"])
    assert marker["constraints"] == f"vllm-parser-{VERSION}.txt"
    assert not (env.tree / "vllm" / "_C.abi3.so").exists()  # the .py files alone
