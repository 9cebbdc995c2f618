"""A VLLM_VERSION bump is judged by the new version's own rules (issue 17).

The second version is a real one: vLLM 0.33.0, the newest on PyPI when this was written.
Its rules are derived here again from its PyPI wheel (336 MB; under CI=true a PyPI that
cannot be reached fails, elsewhere the test skips) and must equal the file lockpipe ships,
and a lock bumped to it is judged with them: the seeds' TurboQuant shape is still refused
for its sliding layers, by 0.33.0's TurboQuantAttentionBackend.

Then 0.33.0's own parser and validators, in the environment ``nox -s vllm-parser -- 0.33.0``
builds under the cache (constraints/vllm-parser-0.33.0.txt: the wheel's own torch pin, as
PyPI's CUDA 13 build with its CUDA libraries, since no CPU build of it is reachable here;
``torch.cuda.is_available()`` is False): frank-small's
command and the seeds' TurboQuant flags through it, preflight of the TurboQuant shape with
its selector, and the refresh proposal's verdicts. Not built: on CI it is built here (and
a failure fails), elsewhere these skip with the reason.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import CheckFailed, LockpipeError
from lockpipe.lock.model import load_lock
from lockpipe.preflight import vllm_parser, vllm_parser_env, vllm_release
from lockpipe.preflight.vllm_parser import Accepted, Parsed, ParserEnv, Refused
from lockpipe.refresh import judge
from lockpipe.refresh.proposal import Proposal
from tests.frank_small import TURBOQUANT_WHAT_IF, bump, run_preflight, turboquant
from tests.policy import scratch, unavailable
from tests.vllm_env import parser_env

REPO = Path(__file__).resolve().parents[2]
NEW = "0.33.0"


@pytest.fixture(scope="module")
def derived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """0.33.0's rules, derived from its PyPI wheel into a fresh folder."""
    with scratch(tmp_path_factory, "rules") as where:
        try:
            rules = vllm_release.derive(NEW, where)
        except LockpipeError as exc:
            unavailable(f"vLLM {NEW}'s wheel could not be fetched from PyPI: {exc}")
        yield rules


def test_the_rules_regenerate_from_the_new_wheel_as_shipped(derived: Path) -> None:
    again = json.loads(derived.read_text())
    assert again["vllm"] == NEW and again["wheel"]["file"].startswith(f"vllm-{NEW}-")
    assert again == json.loads(vllm_release.rules_path(NEW).read_text())


def test_a_bumped_lock_is_judged_by_the_new_versions_rules(derived: Path, tmp_path: Path) -> None:
    lock = bump(tmp_path, NEW)
    # what lock writes on a bump: the derived rules beside the lock, read before lockpipe's
    beside = vllm_release.beside(load_lock(lock))
    beside.mkdir()
    shutil.copy(derived, beside / derived.name)
    assert vllm_release.source_of(load_lock(lock), NEW) == beside
    code, by = run_preflight(tmp_path, "--gpu", "rtx3090", "--vllm-parser", "off",
                             *TURBOQUANT_WHAT_IF, "frank-small", lock=lock)  # fmt: skip
    fs = by["frank-small"]
    rules = next(f for f in fs["figures"] if f["name"] == "backend rules")
    assert f"data/vllm-{NEW}.json" in rules["note"]
    backend = next(c for c in fs["checks"] if c["name"] == "backend")
    assert code == CheckFailed.return_code and backend["status"] == "fail"
    assert "sliding window not supported (40 sliding layers)" in backend["detail"]
    # 0.33.0's own default, read from its config/cache.py
    memory = next(f for f in fs["figures"] if f["name"] == "KV memory")
    assert memory["note"].startswith("0.92 x")


@pytest.fixture(scope="module")
def env33() -> ParserEnv:
    """vLLM 0.33.0's own parser: built under the cache, or (CI=true) built here."""
    return parser_env(NEW)


@pytest.fixture(scope="module")
def parsed33(env33: ParserEnv) -> dict[str, Parsed]:
    """One run of 0.33.0's parser over frank-small's command, the seeds' TurboQuant one and
    two that 0.29.0's parser refuses (test_vllm_parser.py)."""
    lock = load_lock(REPO / "locks" / "digests.json")
    base = ("vllm", "serve", "m")
    commands = {
        "frank-small": lock.target("frank-small").serve.command,
        "turboquant": turboquant(lock).target("frank-small").serve.command,
        "bad dtype": (*base, "--kv-cache-dtype", "bfloat17"),
        "unknown flag": (*base, "--no-such-flag", "1"),
    }
    out = dict(zip(commands, vllm_parser.parse(env33, list(commands.values())), strict=True))
    for name, result in out.items():
        if isinstance(result, vllm_parser.Unavailable):
            pytest.fail(f"vLLM {NEW}'s parser did not run on {name}: {result.reason}")
    return out


def test_the_033_environment_records_the_torch_it_runs_on_and_the_wheels_pin(
    env33: ParserEnv,
) -> None:
    marker = json.loads((env33.tree.parent / vllm_parser.MARKER).read_text())
    assert marker["constraints"] == vllm_parser_env.constraints_for(REPO, NEW).name
    pins = (REPO / "constraints" / marker["constraints"]).read_text()
    # the torch installed is the constraints' one, the wheel's pin is read from its METADATA,
    # and they are the same release, in PyPI's CUDA build (torch finds no CUDA here)
    release, build = marker["torch"].split("+")
    assert f"torch=={release} " in pins and build.startswith("cu")
    assert marker["torch_pin"] == vllm_parser_env.torch_pin(env33.wheel_path)
    assert marker["torch_pin"] == f"=={release}"
    assert env33.torch_note == f"torch {marker['torch']}"


def test_033s_own_parser_takes_frank_small_and_the_seeds_turboquant_flags(
    parsed33: dict[str, Parsed],
) -> None:
    fs, tq = parsed33["frank-small"], parsed33["turboquant"]
    assert isinstance(fs, Accepted) and isinstance(tq, Accepted)
    assert fs.engine["kv_cache_dtype"] == "bfloat16" and fs.engine["attention_backend"] is None
    assert fs.engine["speculative_config"]["num_speculative_tokens"] == 4
    assert (tq.engine["attention_backend"], tq.engine["kv_cache_dtype"]) == (
        "TURBOQUANT", "turboquant_k8v4"
    )  # fmt: skip
    unknown = parsed33["unknown flag"]
    assert isinstance(unknown, Refused)
    assert "unrecognized arguments: --no-such-flag 1" in unknown.message
    # measured: 0.33.0's --kv-cache-dtype is no longer an argparse choice (config/cache.py
    # validates CacheConfig.cache_dtype when the engine config is made), so its parser and
    # from_cli_args take a bad dtype that 0.29.0's parser refuses
    bad = parsed33["bad dtype"]
    assert isinstance(bad, Accepted) and bad.engine["kv_cache_dtype"] == "bfloat17"


def test_under_033_its_own_selector_refuses_the_seeds_turboquant_shape(
    env33: ParserEnv, tmp_path: Path
) -> None:
    lock = bump(tmp_path, NEW)
    code, by = run_preflight(tmp_path, "--gpu", "rtx3090", "--vllm-parser",
                             str(env33.tree.parent), *TURBOQUANT_WHAT_IF, "frank-small",
                             lock=lock)  # fmt: skip
    fs = by["frank-small"]
    checks = {c["name"]: c for c in fs["checks"]}
    figures = {f["name"]: f for f in fs["figures"]}
    assert checks["serve-args"]["status"] == "pass"
    assert env33.torch_note in checks["serve-args"]["detail"]
    assert figures["serve command"]["value"] == f"parsed by vLLM {NEW}"
    assert figures["backend rules"]["value"] == "vLLM's code"
    assert code == CheckFailed.return_code and checks["backend"]["status"] == "fail"
    detail = checks["backend"]["detail"]
    assert f"vLLM {NEW}'s own platforms/cuda.py get_attn_backend_cls" in detail
    assert "Selected backend AttentionBackendEnum.TURBOQUANT is not valid" in detail
    assert ("head 256 sliding turboquant_k8v4 (37 layers): Selected backend "
            "AttentionBackendEnum.TURBOQUANT is not valid for this configuration. Reason: "
            "['sliding window not supported']") in detail  # fmt: skip
    assert (
        "head 512 full auto (layers 47): " in detail and "'kv_cache_dtype not supported'" in detail
    )


def test_the_033_proposal_for_frank_small_is_judged_by_033s_own_code(
    env33: ParserEnv,
) -> None:
    lock = load_lock(REPO / "locks" / "digests.json")
    proposal = Proposal(kind="bases", name="vllm-openai", pinned="v0.29.0-cu129", version=NEW,
                        new=f"vllm/vllm-openai:v{NEW}-cu129", targets=("frank-small",))  # fmt: skip

    def parser_for(version: str) -> ParserEnv | vllm_parser.Unavailable:
        return env33 if version == NEW else vllm_parser.Unavailable(reason=version, fix="")

    verdicts = {v.check: v for v in judge.judge_vllm(lock, proposal, parser_for=parser_for)}
    parser = verdicts["serve-args"]
    assert parser.status == "pass", parser
    assert f"vLLM {NEW}'s own parser" in parser.detail and env33.torch_note in parser.detail
    assert verdicts["preflight"].status == "pass", verdicts
    passed = verdicts["preflight"].detail
    # the backend and the page sizes came from 0.33.0's own functions (page-size is a check
    # only when they ran), and every check passed
    assert "serve-args" in passed and "backend" in passed and "page-size" in passed
    assert f"backend rules: vLLM's code (vLLM {NEW}'s own code ran: Gemma4Config hook" in passed
    assert not [v for v in verdicts.values() if v.status in ("fail", "unknown")]
