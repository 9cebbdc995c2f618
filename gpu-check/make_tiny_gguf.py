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


def write(path: Path, seed: int) -> int:
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocab()
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
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arch", choices=("llama", "qwen35"), default="llama",
                    help="qwen35: tests/tiny_qwen35.py's hybrid model with an MTP block, "
                    "for --spec-type draft-mtp")  # fmt: skip
    args = ap.parse_args()
    if args.arch == "qwen35":
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
