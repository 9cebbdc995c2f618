"""A tiny random-weight ``qwen35`` GGUF that the pinned llama.cpp (b10069) loads and serves.

Its dims are SYNTHETIC TEST DIMS: small made-up numbers (the same as
``tests/unit/test_preflight_hybrid.py``'s), not any real model's. They exist so that
``llama-server`` allocates, and logs, the three memories preflight sizes for a hybrid Gated
DeltaNet + attention model: the attention KV cache, the recurrent state, and the
``--spec-type draft-mtp`` context's KV over the MTP block; the e2e cross-check
(``tests/e2e/test_preflight_llama_crosscheck.py``) compares those logs with preflight.

The tensor names and shapes follow b10069's qwen35 loader (``src/llama-model.cpp``,
``src/models/qwen35.cpp``): layer ``il`` of the main stack is Gated DeltaNet unless
``(il + 1) % full_attention_interval == 0``; the ``nextn_predict_layers`` MTP blocks come
last, each a full-attention block plus ``nextn.*`` projections. Weights are f32 noise, so
the model loads and decodes but says nothing meaningful.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

ARCH = "qwen35"
# SYNTHETIC TEST DIMS (made up; not any real model): 8 main layers + 1 MTP block.
EMBD, HEADS, KV_HEADS, HEAD = 256, 4, 2, 64
MAIN, NEXTN, INTERVAL = 8, 1, 4
CONV, INNER, STATE, GROUPS, DT_RANK = 4, 128, 32, 2, 4
N_FF, N_CTX_TRAIN = 512, 8192
ROPE_SECTIONS = (12, 10, 10, 0)  # qwen35 uses multi-section rope; these add up to HEAD/2
WORDS = ("the", "cat", "sat", "on", "mat", "and", "a", "dog")

Array = npt.NDArray[np.float32]


def vocab() -> tuple[list[str], list[float], list[int]]:
    """An SPM vocabulary: three specials, then every prefix of each ``"\\u2581word"``, so a
    prompt of :data:`WORDS` tokenizes without byte fallback (there are no byte tokens)."""
    pieces = sorted({("\u2581" + w)[:k] for w in WORDS for k in range(1, len(w) + 2)})
    tokens = ["<unk>", "<s>", "</s>", *pieces]
    scores = [0.0, 0.0, 0.0, *(float(len(p)) for p in pieces)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.NORMAL] * len(pieces)
    return tokens, scores, [int(t) for t in types]


def is_attention(il: int) -> bool:
    """Whether layer ``il`` is an attention block: every INTERVAL-th of the main stack (the
    rest are Gated DeltaNet), and each MTP block after it."""
    return il >= MAIN or (il + 1) % INTERVAL == 0


def write(path: Path, *, nextn: int = NEXTN, seed: int = 0) -> Path:
    """Write the model to ``path`` (about 21 MB); ``nextn=0`` leaves out the MTP block."""
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocab()

    def mat(rows: int, cols: int) -> Array:
        out: Array = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)
        return out

    def ones(n: int, sign: float = 1.0) -> Array:
        return np.full(n, sign, dtype=np.float32)

    w = gguf.GGUFWriter(str(path), ARCH)
    w.add_name("synthetic-qwen35-test-dims")
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(EMBD)
    w.add_block_count(MAIN + nextn)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_count(HEAD)
    w.add_array(f"{ARCH}.rope.dimension_sections", list(ROPE_SECTIONS))
    w.add_uint32(f"{ARCH}.full_attention_interval", INTERVAL)
    w.add_uint32(f"{ARCH}.nextn_predict_layers", nextn)
    w.add_uint32(f"{ARCH}.ssm.conv_kernel", CONV)
    w.add_uint32(f"{ARCH}.ssm.inner_size", INNER)
    w.add_uint32(f"{ARCH}.ssm.state_size", STATE)
    w.add_uint32(f"{ARCH}.ssm.group_count", GROUPS)
    w.add_uint32(f"{ARCH}.ssm.time_step_rank", DT_RANK)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_tensor("token_embd.weight", mat(len(tokens), EMBD))
    w.add_tensor("output_norm.weight", ones(EMBD))
    w.add_tensor("output.weight", mat(len(tokens), EMBD))
    key_dim, value_dim = STATE * GROUPS, STATE * DT_RANK
    conv_dim = 2 * key_dim + value_dim
    for il in range(MAIN + nextn):
        blk = f"blk.{il}"
        w.add_tensor(f"{blk}.attn_norm.weight", ones(EMBD))
        w.add_tensor(f"{blk}.post_attention_norm.weight", ones(EMBD))
        if is_attention(il):
            w.add_tensor(f"{blk}.attn_q.weight", mat(HEAD * HEADS * 2, EMBD))  # query + gate
            w.add_tensor(f"{blk}.attn_k.weight", mat(HEAD * KV_HEADS, EMBD))
            w.add_tensor(f"{blk}.attn_v.weight", mat(HEAD * KV_HEADS, EMBD))
            w.add_tensor(f"{blk}.attn_output.weight", mat(EMBD, HEAD * HEADS))
            w.add_tensor(f"{blk}.attn_q_norm.weight", ones(HEAD))
            w.add_tensor(f"{blk}.attn_k_norm.weight", ones(HEAD))
        else:  # Gated DeltaNet
            w.add_tensor(f"{blk}.attn_qkv.weight", mat(conv_dim, EMBD))
            w.add_tensor(f"{blk}.attn_gate.weight", mat(value_dim, EMBD))
            w.add_tensor(f"{blk}.ssm_conv1d.weight", mat(conv_dim, CONV))
            w.add_tensor(f"{blk}.ssm_dt.bias", ones(DT_RANK))
            w.add_tensor(f"{blk}.ssm_a", ones(DT_RANK, -1.0))
            w.add_tensor(f"{blk}.ssm_beta.weight", mat(DT_RANK, EMBD))
            w.add_tensor(f"{blk}.ssm_alpha.weight", mat(DT_RANK, EMBD))
            w.add_tensor(f"{blk}.ssm_norm.weight", ones(STATE))
            w.add_tensor(f"{blk}.ssm_out.weight", mat(EMBD, value_dim))
        w.add_tensor(f"{blk}.ffn_gate.weight", mat(N_FF, EMBD))
        w.add_tensor(f"{blk}.ffn_up.weight", mat(N_FF, EMBD))
        w.add_tensor(f"{blk}.ffn_down.weight", mat(EMBD, N_FF))
        if il >= MAIN:
            w.add_tensor(f"{blk}.nextn.eh_proj.weight", mat(EMBD, 2 * EMBD))
            w.add_tensor(f"{blk}.nextn.enorm.weight", ones(EMBD))
            w.add_tensor(f"{blk}.nextn.hnorm.weight", ones(EMBD))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
