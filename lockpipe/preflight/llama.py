"""llama.cpp b10069's KV cache arithmetic and its flash-attention kernel rule; pure.

Read from the pinned tree (``llama.cpp-b10069``):

- cache types: ``common/arg.cpp`` ``kv_cache_types``; bytes: ``ggml_row_size`` (a block of
  32 values: q8_0 34 bytes, q4_0 18, q4_1 20, q5_0 22, q5_1 24, iq4_nl 18).
- cells: ``src/llama-context.cpp`` (``n_ctx`` padded to 256; without ``--kv-unified`` each of
  ``n_seq_max`` streams holds ``n_ctx_seq = pad256(n_ctx / n_seq_max)`` cells) and
  ``src/llama-kv-cache-iswa.cpp`` (a sliding layer holds ``pad256(min(n_ctx_seq,
  n_swa * (unified ? n_seq : 1) + n_ubatch))`` cells per stream, all of them with
  ``--swa-full``).
- layers: only attention layers are cached (``src/llama-kv-cache.cpp:163-232``: a layer
  passes ``has_kv`` and the memory's filter, then K and V are ``n_embd_{k,v}_gqa x kv_size
  x n_stream``); a hybrid model's recurrent layers and MTP blocks are left out here and
  sized in :mod:`lockpipe.preflight.recurrent` and :func:`mtp_kv_size`.
- kernels: ``ggml/src/ggml-cuda/fattn.cu`` ``ggml_cuda_get_best_fattn_kernel`` and
  ``ggml/src/ggml-cuda/CMakeLists.txt``: without ``GGML_CUDA_FA_ALL_QUANTS`` K and V must
  be the same type, one of f16 (f32 counts as f16), q4_0, q8_0, bf16; with it any pair of
  f16, q4_0, q4_1, q5_0, q5_1, q8_0, bf16. Head sizes: 40-256 need D_K == D_V, 512 needs
  D_V 512 and a GQA ratio of at least 2, 576 needs D_V 512 (and GQA), 192/320 need D_V
  128/256. A quantized V cache needs flash attention (``src/llama-context.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass

from lockpipe.preflight.shape import Layer, ModelShape

# Typed from the pinned tree, not read at run time: preflight judges before any tree is
# fetched, and these are C++ a CPU here cannot run; tests/unit/test_preflight_llama_tree.py
# holds the ones marked (tree-checked) to the b10069 sdist.
# type -> (values per block, bytes per block), as ggml_row_size sizes them
KV_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18),
    "q4_1": (32, 20), "iq4_nl": (32, 18), "q5_0": (32, 22), "q5_1": (32, 24),
}  # fmt: skip
FA_DEFAULT = frozenset({"f16", "q4_0", "q8_0", "bf16"})  # fattn.cu's #else cases (tree-checked)
FA_ALL_QUANTS = frozenset({"f16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "bf16"})  # (tree-checked)
QUANTIZED = frozenset(k for k, (block, _) in KV_TYPES.items() if block > 1)
PAD = 256  # llama-context.cpp and llama-kv-cache-iswa.cpp pad cell counts to 256
DEFAULT_UBATCH = 512  # common/common.h n_ubatch (tree-checked)


def row_bytes(kv_type: str, values: int) -> int:
    """``ggml_row_size``: bytes of ``values`` elements of ``kv_type`` (whole blocks)."""
    block, size = KV_TYPES[kv_type]
    if values % block:
        raise ValueError(f"{values} values are not whole {kv_type} blocks of {block}")
    return values // block * size


def layer_bytes_per_token(layer: Layer, type_k: str, type_v: str) -> int:
    """K and V bytes one token takes in one layer: n_head_kv x (head_k, head_v) rows."""
    if not layer.has_kv:
        return 0
    return row_bytes(type_k, layer.kv_heads * layer.head_k) + row_bytes(
        type_v, layer.kv_heads * layer.head_v
    )


def pad(n: int, to: int = PAD) -> int:
    return -(-n // to) * to


@dataclass(frozen=True, kw_only=True)
class Cells:
    """How many cells each cache holds, per stream, and how many streams."""

    n_ctx: int  # after llama.cpp's padding and rounding
    slot: int  # n_ctx_seq: the window each slot (sequence) gets
    streams: int
    full_cells: int  # per stream, full-attention layers
    swa_cells: int  # per stream, sliding layers
    seqs: int = 1  # sequences (slots) the streams serve

    @property
    def unified(self) -> bool:
        """One KV stream shared by several slots (``--kv-unified``): its KV is counted once."""
        return self.streams == 1 and self.seqs > 1


def cells(
    *,
    n_ctx: int,
    n_seq: int,
    unified: bool,
    window: int | None,
    n_ubatch: int = DEFAULT_UBATCH,
    swa_full: bool = False,
) -> Cells:
    """The cache sizes ``llama_context`` and ``llama_kv_cache_iswa`` allocate."""
    ctx = pad(n_ctx)
    if unified:
        slot, streams = ctx, 1
    else:
        slot, streams = pad(ctx // n_seq), n_seq
        ctx = slot * n_seq
    swa = slot
    if window and not swa_full:
        swa = pad(min(slot, window * (n_seq if unified else 1) + n_ubatch))
    return Cells(n_ctx=ctx, slot=slot, streams=streams, full_cells=slot, swa_cells=swa,
                 seqs=n_seq)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class KvSize:
    per_token_full: int  # bytes per token, summed over full-attention layers
    per_token_swa: int  # bytes per token, summed over sliding layers
    total: int  # bytes of the whole cache
    per_slot: int  # total / slots


def kv_size(shape: ModelShape, c: Cells, type_k: str, type_v: str) -> KvSize:
    full = sum(layer_bytes_per_token(x, type_k, type_v) for x in shape.kv_layers if not x.sliding)
    swa = sum(layer_bytes_per_token(x, type_k, type_v) for x in shape.kv_layers if x.sliding)
    total = c.streams * (full * c.full_cells + swa * c.swa_cells)
    return KvSize(
        per_token_full=full, per_token_swa=swa, total=total, per_slot=total // max(1, c.streams)
    )


def mtp_kv_size(shape: ModelShape, c: Cells, type_k: str, type_v: str) -> KvSize:
    """The KV of a ``--spec-type draft-mtp`` context: a plain cache over the MTP blocks.

    Same ``-c``/``--parallel`` as the main context, so the same cells; the MTP blocks are
    full-attention layers (``is_swa`` false past ``n_layer()``, llama-hparams.cpp:19-21).
    """
    per_token = sum(layer_bytes_per_token(x, type_k, type_v) for x in shape.mtp_layers)
    total = c.streams * per_token * c.full_cells
    return KvSize(
        per_token_full=per_token, per_token_swa=0, total=total, per_slot=total // max(1, c.streams)
    )


def fa_pair_problem(type_k: str, type_v: str, *, all_quants: bool) -> str | None:
    """Why the CUDA build has no flash-attention kernel for this K/V pair, or None."""
    k, v = ("f16" if t == "f32" else t for t in (type_k, type_v))
    if not all_quants and k != v:
        return (
            f"K {type_k} and V {type_v} differ: without GGML_CUDA_FA_ALL_QUANTS "
            "fattn.cu only has same-type pairs"
        )
    allowed = FA_ALL_QUANTS if all_quants else FA_DEFAULT
    bad = sorted({t for t in (k, v) if t not in allowed})
    if bad:
        build = "with" if all_quants else "without"
        return f"{', '.join(bad)} has no CUDA FA kernel {build} GGML_CUDA_FA_ALL_QUANTS"
    return None


def fa_head_problem(layer: Layer) -> str | None:
    """Why ``ggml_cuda_get_best_fattn_kernel`` returns NONE for this layer's head sizes."""
    dk, dv = layer.head_k, layer.head_v
    q, kv = layer.q_heads, layer.kv_heads
    gqa = q // kv if q and kv else None
    if dk in (40, 64, 72, 80, 96, 112, 128, 256):
        return None if dv == dk else f"D_K {dk} needs D_V {dk}, not {dv}"
    needs = {512: 512, 576: 512, 192: 128, 320: 256}
    if dk not in needs:
        return f"head size {dk} has no CUDA FA kernel"
    if dv != needs[dk]:
        return f"D_K {dk} needs D_V {needs[dk]}, not {dv}"
    if gqa is not None and gqa < 2:
        return f"D_K {dk} needs a GQA ratio of 2 or more (this layer: {gqa})"
    return None


def block_problem(shape: ModelShape, kv_type: str, which: str) -> str | None:
    """llama_init_from_model: a quantized cache's block must divide every head size."""
    block = KV_TYPES[kv_type][0]
    for x in shape.kv_layers:
        size = x.head_k if which == "K" else x.head_v
        if size % block:
            return f"{which} cache {kv_type} (blocks of {block}) does not divide head size {size}"
    return None
