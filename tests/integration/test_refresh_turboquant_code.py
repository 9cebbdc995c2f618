"""The refresh report's TurboQuant word on the 0.33.0 proposal, from vLLM's own code.

With the real parser environments of the pinned vLLM (0.29.0) and the proposed one
(0.33.0), ``nox -s vllm-parser -- 0.29.0 0.33.0`` under the cache (tests/vllm_env.py: on
CI built here, elsewhere skipped with the reason), the seeds' TurboQuant shape is judged
by each version's own parser and ``get_attn_backend_cls``, and the report's note quotes
0.33.0's refusal; and it is the same judgement ``lockpipe preflight`` gives the same
what-ifs with the same parser (one code path, :func:`lockpipe.preflight.seeds_turboquant.judge`).
"""

from __future__ import annotations

from pathlib import Path

from lockpipe.errors import CheckFailed
from lockpipe.lock.model import load_lock
from lockpipe.preflight import seeds_turboquant, vllm_parser
from lockpipe.refresh import judge, turboquant
from lockpipe.refresh.proposal import Proposal
from tests.frank_small import TURBOQUANT_WHAT_IF, bump, run_preflight
from tests.vllm_env import parser_env

REPO = Path(__file__).resolve().parents[2]
PINNED, NEW = "0.29.0", "0.33.0"
# 0.33.0's own words (platforms/cuda.py, TurboQuantAttentionBackend.validate_configuration)
SLIDING = ("head 256 sliding turboquant_k8v4 (37 layers): Selected backend "
           "AttentionBackendEnum.TURBOQUANT is not valid for this configuration. Reason: "
           "['sliding window not supported']")  # fmt: skip


def test_the_033_proposal_says_turboquant_is_still_refused_by_033s_own_code(
    tmp_path: Path,
) -> None:
    envs = {v: parser_env(v) for v in (PINNED, NEW)}

    def parser_for(version: str) -> vllm_parser.ParserEnv | vllm_parser.Unavailable:
        return envs.get(version) or vllm_parser.Unavailable(reason=version, fix="")

    lock = load_lock(REPO / "locks" / "digests.json")
    proposal = Proposal(kind="bases", name="vllm-openai", pinned=f"v{PINNED}-cu129",
                        version=NEW, new=f"vllm/vllm-openai:v{NEW}-cu129",
                        targets=("frank-small",))  # fmt: skip
    (note,) = turboquant.verdicts(lock, proposal, parser_for)
    assert (note.target, note.check, note.status) == ("frank-small", "turboquant", "note")
    assert f"is still refused under vLLM {NEW}: backend: vLLM {NEW}'s own " in note.detail
    assert SLIDING in note.detail and "'kv_cache_dtype not supported'" in note.detail
    assert f"judged from code (vLLM's code: vLLM {NEW}'s own code ran: " in note.detail
    assert "extract" not in note.fix
    # the judgement of the proposal carries it beside judge_vllm's
    (judged,) = judge.judge(lock, [proposal], parser_for=parser_for)
    assert note in judged.verdicts

    # the pinned version's code refuses it too (the "before" of the comparison)
    before = seeds_turboquant.judge(lock, "frank-small", PINNED, envs[PINNED])
    assert before.by_code and not before.starts and not before.sliding_ok
    assert any("'sliding window not supported'" in f for f in before.failing)

    # the same judgement as preflight's what-if rows with the same parser
    after = seeds_turboquant.judge(lock, "frank-small", NEW, envs[NEW])
    bumped = tmp_path / "locks" / "digests.json"
    bump(tmp_path, NEW)
    code, by = run_preflight(tmp_path, "--gpu", "rtx3090", "--vllm-parser",
                             str(envs[NEW].tree.parent), *TURBOQUANT_WHAT_IF, "frank-small",
                             lock=bumped)  # fmt: skip
    assert code == CheckFailed.return_code
    failing = tuple(f"{c['name']}: {c['detail']}" for c in by["frank-small"]["checks"]
                    if c["status"] == "fail")  # fmt: skip
    assert failing == after.failing and after.asked == " ".join(TURBOQUANT_WHAT_IF)
