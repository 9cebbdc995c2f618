"""``lockpipe preflight`` against what the pinned runtimes' own code does (issue 17).

llama.cpp b10069 on CUDA: the flash-attention f16 copies of a quantized K and V and the
extra contexts' compute buffers (``lockpipe/preflight/llama_cuda.py``). vLLM 0.29.0: the
FLASH_ATTN head-size rule, ``-ac``/``--attention-config``, space-separated skip layers and
the Gemma 4 hook's "FA4 unsupported" test (``lockpipe/preflight/vllm_rules.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import CheckFailed
from lockpipe.preflight import config, vllm_rules
from lockpipe.preflight.shape import from_hf_config
from tests.frank_small import run_preflight

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "locks" / "digests.json"
PREFLIGHT = REPO / "locks" / "preflight.json"
MIB = 1 << 20
SEEDS_PER_SLOT_MIB = 3450  # the seeds: 11,996 MiB at 1 slot, 22,346 at 4 (000_6a3c38fea55556cf)


def run(
    tmp_path: Path, *argv: str, lock: Path = LOCK, preflight: Path = PREFLIGHT
) -> tuple[int, dict[str, Any]]:
    return run_preflight(tmp_path, "--preflight", str(preflight), *argv, lock=lock)


def check(target: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in target["checks"] if c["name"] == name)
    return found


def figure(target: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in target["figures"] if f["name"] == name)
    return found


# -- llama.cpp on CUDA ------------------------------------------------------------------


def gemma_meta() -> dict[str, Any]:
    return dict(config.load(PREFLIGHT).models["gemma-4-12b-q4_k_m"].data)


def q8_0_row(values: int) -> int:
    return values // 32 * 34  # ggml_row_size(GGML_TYPE_Q8_0): blocks of 32 values, 34 bytes


def gemma_per_slot(slot: int) -> tuple[int, int]:
    """(KV bytes, one context's f16 copies) per slot of ``slot`` cells at q8_0/q8_0."""
    meta = gemma_meta()
    kv_heads = meta["gemma4.attention.head_count_kv"]
    sliding = meta["gemma4.attention.sliding_window_pattern"]
    full_k, swa_k = meta["gemma4.attention.key_length"], meta["gemma4.attention.key_length_swa"]
    swa_cells = -(-min(slot, meta["gemma4.attention.sliding_window"] + 512) // 256) * 256
    kv = 0
    for heads, swa in zip(kv_heads, sliding, strict=True):
        head, cells = (swa_k, swa_cells) if swa else (full_k, slot)
        kv += 2 * q8_0_row(heads * head) * cells  # K and V
    # the largest flash-attention op: a full layer's K and V converted to f16 over every cell
    copies = max(
        2 * heads * (swa_k if swa else full_k) * (swa_cells if swa else slot) * 2
        for heads, swa in zip(kv_heads, sliding, strict=True)
    )
    return kv, copies


def test_fa_copies_push_a_quantized_slot_grid_past_the_card(tmp_path: Path) -> None:
    """Five q8_0 slots of 260,096 cells (off the calibration's 262,144, so first
    principles): KV alone would fit, but the main context and the Gemma 4 assistant each
    convert layer 47's K and V to f16 over every cell of every slot."""
    code, by = run(tmp_path, "--gpu", "rtx3090", "--ctx-size", "1300480", "--parallel", "5",
                   "llama-cuda-slots")  # fmt: skip
    slots = by["llama-cuda-slots"]
    budget = check(slots, "budget")
    assert code == CheckFailed.return_code and budget["status"] == "fail"
    assert budget["fix"].startswith("--parallel 4")
    n = slots["numbers"]
    kv, copies = gemma_per_slot(260096)
    assert n["budget_from"].startswith("first principles")
    assert n["kv_per_slot"] == kv and n["fa_copies_per_slot"] == 2 * copies
    assert n["per_slot_mib"] == pytest.approx((kv + 2 * copies) / MIB)
    assert n["fixed_mib"] + 5 * kv / MIB < 24576  # what the budget said before the copies


def test_the_seeds_q8_0_shape_from_first_principles_is_within_5_percent_of_3450(
    tmp_path: Path,
) -> None:
    """Without the calibration, per slot = KV 2,431 MiB + 2 x 512 MiB of f16 copies (the
    main context and the assistant): the seeds' 3,450 - 2,431 = 1,019 MiB explained."""
    doc = json.loads(PREFLIGHT.read_text())
    del doc["targets"]["llama-cuda-slots"]["llama_slots"]
    bare = tmp_path / "uncalibrated.json"
    bare.write_text(json.dumps(doc))
    code, by = run(tmp_path, "--gpu", "rtx3090", "llama-cuda-slots", preflight=bare)
    n = by["llama-cuda-slots"]["numbers"]
    kv, copies = gemma_per_slot(262144)
    assert n["per_slot_mib"] == pytest.approx((kv + 2 * copies) / MIB)
    assert abs(n["per_slot_mib"] / SEEDS_PER_SLOT_MIB - 1) < 0.05
    assert code == 0 and by["llama-cuda-slots"]["verdict"] == "pass"  # 4 slots still fit
    # the calibrated run shows the same first-principles figure beside the measurement
    _, calibrated = run(tmp_path, "--gpu", "rtx3090", "llama-cuda-slots")
    cal = calibrated["llama-cuda-slots"]["numbers"]
    assert cal["per_slot_mib"] == SEEDS_PER_SLOT_MIB
    assert cal["first_principles_per_slot_mib"] == pytest.approx(n["per_slot_mib"])


def test_an_f16_cache_makes_no_copies_and_the_mtp_context_adds_its_masks(tmp_path: Path) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "llama-cuda-mtp")
    n = by["llama-cuda-mtp"]["numbers"]
    assert n["fa_copies_per_slot"] == 0  # f16 K/V and f16 draft K/V: the kernels read them
    # the MTP context's KQ mask: 131,072 cells x 512 ubatch rows x f16, in its compute buffer
    assert n["extra_compute"] == 131072 * 512 * 2
    assert code == 0 and by["llama-cuda-mtp"]["verdict"] == "pass"


# -- vLLM ---------------------------------------------------------------------------------


def frank_small(tmp_path: Path, *flags: str) -> Path:
    """A copy of the lock whose frank-small command has no --attention-backend or
    --kv-cache-dtype of its own, then ``flags``."""
    doc = json.loads(LOCK.read_text())
    command: list[str] = doc["targets"]["frank-small"]["serve"]["command"]
    kept: list[str] = []
    skip = False
    for token in command:
        if skip:
            skip = False
        elif token in ("--attention-backend", "--kv-cache-dtype"):
            skip = True
        elif not token.startswith(("--attention-backend=", "--kv-cache-dtype=")):
            kept.append(token)
    doc["targets"]["frank-small"]["serve"]["command"] = [*kept, *flags]
    root = tmp_path / "lockcopy"
    (root / "locks").mkdir(parents=True, exist_ok=True)
    if not (root / "images").exists():
        (root / "images").symlink_to(REPO / "images")
    path = root / "locks" / "digests.json"
    path.write_text(json.dumps(doc))
    return path


def vllm_run(tmp_path: Path, *flags: str, gpu: str = "rtx3090") -> tuple[int, dict[str, Any]]:
    lock = frank_small(tmp_path, "--max-model-len", "131072", *flags)
    code, by = run(tmp_path, "--gpu", gpu, "frank-small", lock=lock)
    return code, by["frank-small"]


def test_flash_attn_at_head_size_512_on_sm86_fails(tmp_path: Path) -> None:
    """FlashAttentionBackend.supports_head_size: above 256 only with FA4, which needs a 9.x,
    10.x or 11.x card (vllm_flash_attn/flash_attn_interface.py _is_fa4_supported)."""
    bf16 = ("--attention-backend", "FLASH_ATTN", "--kv-cache-dtype", "bfloat16",
            "--max-model-len", "131072", "frank-small")  # fmt: skip
    code, by = run(tmp_path, "--gpu", "rtx3090", *bf16)
    backend = check(by["frank-small"], "backend")
    assert code == CheckFailed.return_code and backend["status"] == "fail"
    assert "head_size not supported" in backend["detail"] and "512" in backend["detail"]
    code, by = run(tmp_path, "--gpu", "h100-80g", *bf16)
    assert check(by["frank-small"], "backend")["status"] == "pass"  # FA4 on sm 9.0


def test_a_backend_forced_with_ac_is_seen(tmp_path: Path) -> None:
    code, fs = vllm_run(tmp_path, "--kv-cache-dtype", "bfloat16", "-ac", '{"backend":"FLASH_ATTN"}')
    assert figure(fs, "backend")["value"] == "FLASH_ATTN"
    assert code == CheckFailed.return_code and check(fs, "backend")["status"] == "fail"
    code, fs = vllm_run(tmp_path, "--kv-cache-dtype", "turboquant_k8v4",
                        "--attention-config.backend=TRITON_ATTN")  # fmt: skip
    assert figure(fs, "backend")["value"] == "TRITON_ATTN"
    assert "TRITON_ATTN rejects" in check(fs, "backend")["detail"]
    code, fs = vllm_run(tmp_path, "--kv-cache-dtype", "bfloat16", "--attention-backend",
                        "TRITON_ATTN", "-ac.backend", "TRITON_ATTN")  # fmt: skip
    both = check(fs, "attention-config")
    assert code == CheckFailed.return_code and both["status"] == "fail"
    assert "mutually exclusive" in both["detail"]


def test_skip_layers_are_space_separated_as_vllm_takes_them(tmp_path: Path) -> None:
    code, fs = vllm_run(tmp_path, "--attention-backend", "TURBOQUANT", "--kv-cache-dtype",
                        "turboquant_k8v4", "--kv-cache-dtype-skip-layers", "5", "11")  # fmt: skip
    assert "layers 0, 1, 5, 11, 46, 47" in check(fs, "backend")["detail"]
    code, fs = vllm_run(tmp_path, "--attention-backend", "TURBOQUANT", "--kv-cache-dtype",
                        "turboquant_k8v4", "--kv-cache-dtype-skip-layers", "5,11")  # fmt: skip
    assert "layers 0, 1, 46, 47" in check(fs, "backend")["detail"]  # "5,11" names no layer
    named = check(fs, "skip-layers")  # and sorted(..., key=int) raises on it
    assert named["status"] == "fail" and "'5,11'" in named["detail"]
    assert "key=int" in named["detail"]
    code, fs = vllm_run(tmp_path, "--kv-cache-dtype", "bfloat16",
                        "--kv-cache-dtype-skip-layers=5,11")  # fmt: skip
    named = check(fs, "skip-layers")
    assert named["status"] == "warn" and "matches no layer" in named["detail"]
    assert code == 0 and fs["verdict"] == "warn"


def gemma4_hf() -> Any:
    cfg = config.load(PREFLIGHT).models["gemma-4-12b-qat-w4a16"].data
    return from_hf_config(cfg, source="test")


@pytest.mark.parametrize(
    ("cap", "backend"), [((8, 6), "TRITON_ATTN"), ((9, 0), None), ((10, 0), None),
                         ((12, 0), "TRITON_ATTN")],
)  # fmt: skip
def test_the_gemma4_hook_asks_whether_fa4_is_supported(
    cap: tuple[int, int], backend: str | None
) -> None:
    """Gemma4Config.verify_and_update_config: FA4 for all layers where it is supported (9.x,
    10.x, 11.x), else TRITON_ATTN; a 12.x card has no FA4, though it is past 9.0."""
    from lockpipe.preflight.vllm_args import VllmArgs

    facts = vllm_rules.release("0.29.0")
    assert vllm_rules.choose_backend(VllmArgs(), gemma4_hf(), cap, facts) == backend
