"""Write a tiny llama-architecture GGUF with random weights for gpu-check/run.sh.

It only has to load, run FlashAttention over a q8_0 KV cache and generate: head size 64
(a multiple of q8_0's 32-value block), grouped-query attention (4 heads, 2 KV heads), an
SPM vocabulary of three specials and a dozen words with their prefixes. Greedy decoding of
random weights soon repeats itself, which gives the ngram drafter something to accept.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import numpy as np


def _stub_yaml() -> None:
    """Put a stand-in ``yaml`` in sys.modules when PyYAML is not installed.

    gguf-py's ``gguf/metadata.py`` imports yaml at import time, only to parse a model
    card's front matter (``Metadata.load_model_card``); the writer below never reads a
    model card, so a stub lets a GPU host with just python3 + numpy (run.sh's needs) write
    the file. Anything that does call it fails loudly instead of parsing nothing.
    """
    try:
        import yaml  # noqa: F401
    except ImportError:
        stub = types.ModuleType("yaml")

        def safe_load(*_args: object, **_kwargs: object) -> object:
            raise RuntimeError("make_tiny_gguf.py stubbed PyYAML out; install it to read YAML")

        stub.safe_load = safe_load  # type: ignore[attr-defined]
        sys.modules["yaml"] = stub


_stub_yaml()
try:
    import gguf
except ImportError as exc:  # run.sh puts the pinned tree's gguf-py on PYTHONPATH
    missing = getattr(exc, "name", None)
    if missing == "gguf":
        sys.exit(
            "make_tiny_gguf.py: no `gguf` module; pip install gguf, "
            "or set PYTHONPATH to a llama.cpp tree's gguf-py"
        )
    # gguf was found but one of its own imports failed: say which, not "no gguf".
    sys.exit(f"make_tiny_gguf.py: importing gguf failed: {type(exc).__name__}: {exc}")

N_EMBD, N_HEAD, N_HEAD_KV, N_LAYER, N_FF, N_CTX = 256, 4, 2, 2, 512, 4096
WORDS = ("the", "cat", "sat", "on", "mat", "and", "a", "dog", "ran", "to", "red", "blue")


def vocab() -> tuple[list[str], list[float], list[int]]:
    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    # Every prefix of each "\u2581word", so SPM's pairwise merges reach the words, and no
    # byte tokens: random weights then still emit valid UTF-8 (a stray byte token makes
    # llama-server answer 500, "does not match the expected Content-only format"), and
    # a prompt of these words never needs byte fallback (without byte tokens it throws).
    words = sorted({("\u2581" + w)[:k] for w in WORDS for k in range(1, len(w) + 2)})
    tokens += words
    types += [gguf.TokenType.NORMAL] * len(words)
    scores = [0.0] * 3 + [float(len(w)) for w in words]
    return tokens, scores, [int(t) for t in types]


def add_vocab(w: gguf.GGUFWriter) -> None:
    """vocab()'s SPM vocabulary and its specials, in f16 (both writers' models)."""
    tokens, scores, types = vocab()
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)


def write(path: Path, seed: int) -> int:
    rng = np.random.default_rng(seed)
    tokens = vocab()[0]
    n_vocab, head_dim = len(tokens), N_EMBD // N_HEAD

    def mat(rows: int, cols: int) -> np.ndarray:
        out: np.ndarray = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16)
        return out

    def norm() -> np.ndarray:
        return np.ones(N_EMBD, dtype=np.float32)

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("lockpipe-gpu-check-tiny")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    add_vocab(w)
    w.add_tensor("token_embd.weight", mat(n_vocab, N_EMBD))
    w.add_tensor("output_norm.weight", norm())
    w.add_tensor("output.weight", mat(n_vocab, N_EMBD))
    kv = N_HEAD_KV * head_dim
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", norm())
        w.add_tensor(f"blk.{i}.attn_q.weight", mat(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_k.weight", mat(kv, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_v.weight", mat(kv, N_EMBD))
        w.add_tensor(f"blk.{i}.attn_output.weight", mat(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", norm())
        w.add_tensor(f"blk.{i}.ffn_gate.weight", mat(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", mat(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down.weight", mat(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.stat().st_size


# A tiny Gemma 4 target and its MTP assistant (llama.cpp#23398), for --model-draft. Every
# key and tensor is what the pinned tree reads: src/models/gemma4.cpp and
# src/models/gemma4-assistant.cpp (load_arch_hparams / load_arch_tensors), the generic
# keys of src/llama-model.cpp's load_hparams, names from gguf-py's TENSOR_NAMES, and the
# keys conversion/gemma.py's Gemma4Model / Gemma4AssistantModel write. Two target layers,
# sliding then full: the assistant's layers share the target's KV cache, its sliding layer
# the target's layer n_layer-2 and its full one n_layer-1 (src/llama-model.cpp, "share").
# Both models carry the same SPM vocabulary, as common/speculative.cpp's compatibility
# check asks. The assistant's embedding_length_out is the target's hidden size, unlike its
# own (gemma4-assistant.cpp refuses equal ones).
G4_SWA = (True, False)  # the target's layer types: sliding_attention, full_attention
G4_HEAD_DIM, G4_N_SWA, G4_EMBD_ASSISTANT, G4_FF_ASSISTANT = 64, 512, 128, 256


def write_gemma4(target: Path, assistant: Path, seed: int) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    n_vocab = len(vocab()[0])
    T, M = gguf.TENSOR_NAMES, gguf.MODEL_TENSOR
    # by name: the gguf release the linters type-check against predates the assistant's
    # names, which the pinned tree's gguf-py (run.sh's PYTHONPATH) has
    M4A = gguf.MODEL_ARCH["GEMMA4_ASSISTANT"]

    def name(t: gguf.MODEL_TENSOR, i: int | None = None, suffix: str = ".weight") -> str:
        return T[t].format(bid=i) + suffix

    def mat(rows: int, cols: int) -> np.ndarray:  # ggml's {cols, rows}
        out: np.ndarray = (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float16)
        return out

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def common(w: gguf.GGUFWriter, n_embd: int, n_ff: int, n_layer: int) -> None:
        w.add_name("lockpipe-gpu-check-tiny-gemma4")
        w.add_context_length(N_CTX)
        w.add_embedding_length(n_embd)
        w.add_block_count(n_layer)
        w.add_feed_forward_length(n_ff)
        w.add_head_count(N_HEAD)
        w.add_head_count_kv(N_HEAD_KV)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_key_length(G4_HEAD_DIM)
        w.add_value_length(G4_HEAD_DIM)
        w.add_key_length_swa(G4_HEAD_DIM)
        w.add_value_length_swa(G4_HEAD_DIM)
        w.add_rope_dimension_count(G4_HEAD_DIM)
        w.add_rope_dimension_count_swa(G4_HEAD_DIM)
        w.add_rope_freq_base(1_000_000.0)
        w.add_rope_freq_base_swa(10_000.0)
        w.add_sliding_window(G4_N_SWA)
        w.add_sliding_window_pattern(list(G4_SWA))
        w.add_shared_kv_layers(0)
        w.add_embedding_length_per_layer_input(0)  # no per-layer embeddings
        add_vocab(w)

    def block(w: gguf.GGUFWriter, i: int, n_embd: int, n_ff: int, kv: bool) -> None:
        q = N_HEAD * G4_HEAD_DIM
        w.add_tensor(name(M.ATTN_NORM, i), ones(n_embd))
        w.add_tensor(name(M.ATTN_Q, i), mat(q, n_embd))
        if kv:
            w.add_tensor(name(M.ATTN_K, i), mat(N_HEAD_KV * G4_HEAD_DIM, n_embd))
            w.add_tensor(name(M.ATTN_V, i), mat(N_HEAD_KV * G4_HEAD_DIM, n_embd))
            w.add_tensor(name(M.ATTN_K_NORM, i), ones(G4_HEAD_DIM))
        w.add_tensor(name(M.ATTN_OUT, i), mat(n_embd, q))
        w.add_tensor(name(M.ATTN_Q_NORM, i), ones(G4_HEAD_DIM))
        w.add_tensor(name(M.ATTN_POST_NORM, i), ones(n_embd))
        w.add_tensor(name(M.LAYER_OUT_SCALE, i), ones(1))
        w.add_tensor(name(M.FFN_NORM, i), ones(n_embd))
        w.add_tensor(name(M.FFN_GATE, i), mat(n_ff, n_embd))
        w.add_tensor(name(M.FFN_UP, i), mat(n_ff, n_embd))
        w.add_tensor(name(M.FFN_DOWN, i), mat(n_embd, n_ff))
        w.add_tensor(name(M.FFN_POST_NORM, i), ones(n_embd))

    def finish(w: gguf.GGUFWriter, path: Path) -> int:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path.stat().st_size

    n_layer = len(G4_SWA)
    w = gguf.GGUFWriter(str(target), gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.GEMMA4])
    common(w, N_EMBD, N_FF, n_layer)
    w.add_tensor(name(M.TOKEN_EMBD), mat(n_vocab, N_EMBD))
    w.add_tensor(name(M.OUTPUT_NORM), ones(N_EMBD))
    w.add_tensor(name(M.ROPE_FREQS), ones(G4_HEAD_DIM // 2))  # full layers' freq factors
    for i in range(n_layer):
        block(w, i, N_EMBD, N_FF, kv=True)
    size_t = finish(w, target)

    w = gguf.GGUFWriter(str(assistant), gguf.MODEL_ARCH_NAMES[M4A])
    common(w, G4_EMBD_ASSISTANT, G4_FF_ASSISTANT, n_layer)
    w.add_embedding_length_out(N_EMBD)  # the target's hidden size
    w.add_nextn_predict_layers(n_layer)  # == block_count (gemma4-assistant.cpp asserts it)
    w.add_tensor(name(M.TOKEN_EMBD), mat(n_vocab, G4_EMBD_ASSISTANT))
    w.add_tensor(name(M.OUTPUT_NORM), ones(G4_EMBD_ASSISTANT))
    w.add_tensor(name(M.ROPE_FREQS), ones(G4_HEAD_DIM // 2))
    w.add_tensor(name(M["NEXTN_PROJ_PRE"]), mat(G4_EMBD_ASSISTANT, 2 * N_EMBD))
    w.add_tensor(name(M["NEXTN_PROJ_POST"]), mat(N_EMBD, G4_EMBD_ASSISTANT))
    for i in range(n_layer):
        block(w, i, G4_EMBD_ASSISTANT, G4_FF_ASSISTANT, kv=False)
    return size_t, finish(w, assistant)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arch", choices=("llama", "qwen35", "gemma4"), default="llama",
                    help="qwen35: tests/tiny_qwen35.py's hybrid model with an MTP block, "
                    "for --spec-type draft-mtp; gemma4: a Gemma 4 target at OUT and its "
                    "gemma4-assistant at --assistant, for --model-draft")  # fmt: skip
    ap.add_argument("--assistant", type=Path, help="--arch gemma4: where the assistant goes")
    args = ap.parse_args()
    if args.arch == "gemma4":
        if args.assistant is None:
            ap.error("--arch gemma4 needs --assistant PATH")
        size, small = write_gemma4(args.out, args.assistant, args.seed)
        print(f"{args.assistant}: {small} bytes")
    elif args.arch == "qwen35":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's root
        from tests import tiny_qwen35

        size = tiny_qwen35.write(args.out, seed=args.seed).stat().st_size
    else:
        size = write(args.out, args.seed)
    if size >= 30 * 2**20:
        sys.exit(f"{args.out}: {size} bytes, over the 30 MiB the GPU check carries; shrink it")
    print(f"{args.out}: {size} bytes")


if __name__ == "__main__":
    main()
