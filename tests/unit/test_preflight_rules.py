"""What the pinned vLLM 0.29.0 refuses, each with its fix; and the host's card and driver."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import GpuAttachError, UsageError
from lockpipe.preflight import host, vllm_kv
from lockpipe.preflight.shape import ModelShape, from_hf_config
from lockpipe.preflight.verdict import Check
from lockpipe.preflight.vllm_args import VllmArgs, dockerfile_env, parse_args
from lockpipe.preflight.vllm_rules import choose_backend, release, rule_checks

DATA = Path(__file__).resolve().parents[1] / "data" / "preflight"
SM86 = (8, 6)


def gemma4() -> ModelShape:
    doc: dict[str, Any] = json.loads((DATA / "gemma-4-12b-it.config.json").read_text())
    return from_hf_config(doc["config"], source="tt-metal config")


def failures(args: VllmArgs, env: Mapping[str, str] | None = None, cap: Any = SM86) -> list[Check]:
    shape = gemma4()
    checks = rule_checks(
        facts=release("0.29.0"),
        args=args,
        shape=shape,
        backend=choose_backend(args, shape, cap, release("0.29.0")),
        skip=vllm_kv.boundary_skip(shape, args.kv_dtype),
        cap=cap,
        env=env or {},
    )
    return [c for c in checks if c.status == "fail"]


def test_the_extracted_release_names_its_source() -> None:
    facts = release("0.29.0")
    assert facts["wheel"]["file"] == "vllm-0.29.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    assert len(facts["wheel"]["sha256"]) == 64 and "vllm/envs.py" in facts["sources"]
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in facts["env_vars"]
    assert "VLLM_ATTENTION_BACKEND" not in facts["env_vars"]
    tq = facts["attention_backends"]["TURBOQUANT"]
    assert tq["sliding_window"] is False and "turboquant_k8v4" in tq["kv_cache_dtypes"]
    assert facts["attention_backends"]["TRITON_ATTN"]["sliding_window"] is True


def test_the_locked_frank_small_command_is_refused() -> None:
    """TURBOQUANT declares no sliding-window support and only turboquant_* dtypes, while
    Gemma 4 has 40 sliding layers and TurboQuant keeps layers 0, 1, 46, 47 at 'auto'."""
    args = parse_args(
        [
            "vllm",
            "serve",
            "m",
            "--max-model-len",
            "262144",
            "--attention-backend",
            "TURBOQUANT",
            "--kv-cache-dtype",
            "turboquant_k8v4",
            "--max-num-seqs",
            "2",
        ]
    )
    assert (args.backend, args.kv_dtype, args.max_model_len) == (
        "TURBOQUANT",
        "turboquant_k8v4",
        262144,
    )
    [bad] = failures(args)
    assert bad.name == "backend" and "sliding window not supported" in bad.detail
    assert "layers 0, 1, 46, 47" in bad.detail and bad.fix


def test_triton_attn_rejects_turboquant_dtypes() -> None:
    """No --attention-backend: Gemma4Config forces TRITON_ATTN below sm_90 (the seeds' crash)."""
    args = VllmArgs(kv_dtype="turboquant_k8v4")
    assert choose_backend(args, gemma4(), SM86, release("0.29.0")) == "TRITON_ATTN"
    [bad] = failures(args)
    assert bad.detail.startswith("TRITON_ATTN rejects") and "turboquant_k8v4" in bad.detail


def test_fp8_is_refused_below_compute_capability_8_9() -> None:
    bad = failures(VllmArgs(kv_dtype="fp8"))
    assert [c.name for c in bad] == ["fp8"] and "8.6" in bad[0].detail and bad[0].fix
    assert failures(VllmArgs(kv_dtype="fp8"), cap=(8, 9)) == []


def test_int8_and_bf16_pass_the_rules_on_the_3090() -> None:
    assert failures(VllmArgs(kv_dtype="int8_per_token_head")) == []
    assert failures(VllmArgs(kv_dtype="bfloat16")) == []


def test_unknown_env_var_unknown_dtype_and_backend() -> None:
    bad = failures(VllmArgs(), env={"VLLM_ATTENTION_BACKEND": "TURBOQUANT"})
    assert [c.name for c in bad] == ["env"] and "--attention-backend" in (bad[0].fix or "")
    assert next(c.name for c in failures(VllmArgs(kv_dtype="int3"))) == "kv-cache-dtype"
    assert "attention-backend" in [c.name for c in failures(VllmArgs(backend="FAST"))]


def test_max_model_len_past_the_config_needs_the_override() -> None:
    long = VllmArgs(kv_dtype="bfloat16", max_model_len=524288)
    assert [c.name for c in failures(long)] == ["max-model-len"]
    assert failures(long, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}) == []


def test_dockerfile_env() -> None:
    text = 'FROM x\nENV A=1 B="two words"\nENV VLLM_ATTENTION_BACKEND TURBOQUANT\n'
    assert dockerfile_env(text) == {
        "A": "1",
        "B": "two words",
        "VLLM_ATTENTION_BACKEND": "TURBOQUANT",
    }


@pytest.mark.parametrize(
    ("driver", "cuda", "ok"),
    [
        ("610.57.04", (12, 9, 1), True),  # the seeds' host
        ("575.57.08", (12, 9, 1), True),
        ("575.51.03", (12, 9, 1), False),  # 12.9 GA's driver, not Update 1's
        ("570.211.01", (12, 9, 0), False),
        ("570.211.01", (12, 8, 0), True),
    ],
)
def test_driver_against_the_cuda_runtime(driver: str, cuda: tuple[int, int, int], ok: bool) -> None:
    assert (host.driver_problem(driver, cuda) is None) is ok


def test_cuda_versions_and_architectures() -> None:
    assert host.cuda_version("nvidia/cuda:12.9.1-runtime-ubuntu24.04") == (12, 9, 1)
    assert host.cuda_version("vllm/vllm-openai:v0.29.0-cu129") == (12, 9, 0)
    assert host.arch_problem("86", SM86) == (None, None)
    assert host.arch_problem("86", (8, 9)) == (None, None)  # sm_86 SASS runs on 8.9
    fail, warn = host.arch_problem("86", (9, 0))
    assert fail is None and warn and "PTX" in warn  # PTX 8.6 is JIT-compiled on 9.0
    assert host.arch_problem("89-real", SM86)[0]  # 8.9 SASS cannot run on 8.6
    card = host.parse_smi("NVIDIA GeForce RTX 3090, 24576, 23000, 8.6, 610.57.04\n")
    assert (card.memory_mib, card.compute_cap, card.free_mib) == (24576, SM86, 23000)
    assert host.card_named("RTX3090").memory_mib == card.memory_mib
    assert host.card_named("h200").compute_cap == (9, 0)


def test_the_host_card_is_asked_of_nvidia_smi_and_its_absence_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi on it yet
    with pytest.raises(GpuAttachError, match=r"no NVIDIA driver tools.*preflight --gpu CARD"):
        host.query_host()
    # FAKE nvidia-smi (no GPU here): it prints what the real one prints for QUERY.
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771, 140000, 9.0, 580.65.06'\n")
    smi.chmod(0o755)
    card = host.query_host()
    assert (card.name, card.compute_cap, card.free_mib, card.driver) == (
        "NVIDIA H200",
        (9, 0),
        140000,
        "580.65.06",
    )
    with pytest.raises(UsageError, match=r"--gpu-index 1: nvidia-smi lists 1 GPU\(s\), 0 to 0"):
        host.query_host(1)
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    with pytest.raises(GpuAttachError, match="nvidia-smi failed"):
        host.query_host()
