"""The refresh report says when a vLLM release changes the seeds' TurboQuant verdict."""

from __future__ import annotations

import json
from pathlib import Path

from lockpipe.lock.model import load_lock
from lockpipe.preflight import seeds_turboquant, vllm_parser, vllm_release
from lockpipe.refresh import judge, turboquant
from lockpipe.refresh.proposal import Proposal
from tests.frank_small import bump

REPO = Path(__file__).resolve().parents[2]


def proposal(version: str) -> Proposal:
    return Proposal(kind="bases", name="vllm", pinned="v0.29.0-cu129", version=version,
                    new=f"vllm/vllm-openai:v{version}-cu129", targets=("frank-small",))  # fmt: skip


def test_released_versions_refuse_it_and_without_a_parser_the_extract_says_so() -> None:
    lock = load_lock(REPO / "locks" / "digests.json")
    for version in ("0.29.0", "0.33.0"):  # the pinned one and the newest on PyPI
        judged = seeds_turboquant.judge(lock, "frank-small", version)
        assert not judged.starts and not judged.sliding_ok, version
        assert any("sliding window not supported" in f for f in judged.failing), version
        assert not judged.by_code and judged.by.startswith("extract: lockpipe's extract")
    # no parser environment for 0.33.0 (a folder nox -s vllm-parser never built)
    wheel = vllm_release.rules_of(lock, "0.33.0")["wheel"]
    missing = vllm_parser.find_env(REPO / "no-such-env", "0.33.0", wheel)
    assert isinstance(missing, vllm_parser.Unavailable)
    (note,) = turboquant.verdicts(lock, proposal("0.33.0"), lambda version: missing)
    assert (note.target, note.check, note.status) == ("frank-small", "turboquant", "note")
    assert "the seeds' turboquant_k8v4 shape (--kv-cache-dtype turboquant_k8v4" in note.detail
    assert "is still refused under vLLM 0.33.0: backend: " in note.detail
    assert "sliding window not supported" in note.detail
    assert "judged from lockpipe's extract of the wheel (extract: " in note.detail
    assert missing.reason in note.detail and not note.detail.count("from code")
    assert note.fix.endswith(f"; for vLLM 0.33.0's own verdict: {missing.fix}")


def test_a_release_whose_turboquant_takes_sliding_windows_is_a_gain(tmp_path: Path) -> None:
    # FAKE release 9.9.9: 0.33.0's own rules with TURBOQUANT's supports_sliding_window()
    # returning True, which no release has yet (the case this hook exists for)
    path = bump(tmp_path, "0.29.0")
    facts = json.loads(vllm_release.rules_path("0.33.0").read_text())
    facts["vllm"], facts["wheel"]["file"] = "9.9.9", "vllm-9.9.9-FAKE.whl"
    facts["attention_backends"]["TURBOQUANT"]["sliding_window"] = True
    beside = vllm_release.beside(load_lock(path))
    beside.mkdir()
    vllm_release.rules_path("9.9.9", beside).write_text(json.dumps(facts))
    (gain,) = turboquant.verdicts(load_lock(path), proposal("9.9.9"))
    assert (gain.target, gain.check, gain.status) == ("frank-small", "turboquant", "gain")
    assert "TURBOQUANT supports sliding windows in vLLM 9.9.9" in gain.detail
    # its boundary layers still sit at auto, which TURBOQUANT does not list
    assert "still refused: backend:" in gain.detail and "kv_cache_dtype auto" in gain.detail
    assert gain.fix.startswith("lockpipe preflight --gpu rtx3090 frank-small --kv-cache-dtype")
    # and the refresh's judgement of that proposal carries it
    (judged,) = judge.judge(load_lock(path), [proposal("9.9.9")])
    assert gain in judged.verdicts
