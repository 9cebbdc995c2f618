"""vLLM 0.29.0's KV cache: page bytes per layer, their unification, the pool in tokens; pure.

Each rule is the pinned wheel's (``vllm-0.29.0-cp38-abi3-manylinux_2_28_x86_64.whl``):

- bytes per token and head (``v1/kv_cache_interface.py`` ``AttentionSpec`` and the backends'
  ``customize_spec``): ``(head_k + head_v) x dtype size``; ``*_per_token_head`` adds one
  fp32 scale per K and per V (``triton_attn.py``), int4 halves the data; ``turboquant_*``
  packs one slot per head, ``model_executor/layers/quantization/turboquant/config.py``:
  key ``head`` bytes (fp8 keys) or ``ceil(head x bits / 8) + 2``, value
  ``ceil(head x bits / 8) + 4``, rounded up to even.
- TurboQuant keeps the first and last 2 layers of a dense model unquantized (``auto``)
  (``TurboQuantConfig.get_boundary_skip_layers``, ``engine/arg_utils.py``), and then
  ``platforms/interface.py`` ``_align_heterogeneous_kv_block_size`` raises the block size
  until a quantized page covers an unquantized one, and pads the skipped pages to it.
- a sliding layer takes the backend's smallest kernel block (or the largest that fits the
  shared page), a full layer ``--block-size`` (default 16) (``attention.py``).
- ``v1/core/kv_cache_utils.py`` ``unify_kv_cache_spec_page_size``: a page that divides the
  largest grows its block size by the ratio; one that does not is padded up to it.
- ``_get_kv_cache_groups_uniform_page_size``: layers of one spec form buckets, split into
  groups of the smallest bucket's size (the largest if under 1.5x); a block holds one page
  per layer of the widest group; a request at ``max_model_len`` needs, per group,
  ``cdiv(len, block)`` blocks (full) or ``cdiv(min(window - 1 + in-flight, len), block) + 1``
  (sliding); the pool in tokens is ``num_blocks / blocks_per_request x max_model_len``
  (``get_max_concurrency_for_kv_cache_config``).

This is the path for the default ``LBNHC`` layout (``VLLM_KV_CACHE_LAYOUT`` unset; a
block-outermost layout packs mixed pages instead and is not modelled).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lockpipe.preflight.shape import Layer, ModelShape

# The pool's arithmetic also runs where vLLM's parser environment is not built (the
# extract's path); where it is, vLLM's unify_kv_cache_spec_page_size checks the pages
# these give (the page-size check; turboquant_* pages are the backend's, not checked)
FP32 = 4
MODEL_DTYPE_BYTES = 2  # bf16 weights/activations: what "auto" caches in
DTYPE_BYTES = {"auto": MODEL_DTYPE_BYTES, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1,
               "fp8_e5m2": 1, "fp8_inc": 1}  # fmt: skip
PER_TOKEN_HEAD = {"int8_per_token_head", "fp8_per_token_head", "int4_per_token_head"}
TURBOQUANT = {
    "turboquant_k8v4": (8, 4),
    "turboquant_4bit_nc": (4, 4),
    "turboquant_k3v4_nc": (3, 4),
    "turboquant_3bit_nc": (3, 3),
}
TQ_BOUNDARY = 2  # get_boundary_skip_layers(n=2)


def turboquant_slot(head: int, key_bits: int, value_bits: int) -> int:
    """``TurboQuantConfig.slot_size_aligned``: packed K+V bytes per head and token."""
    key = head if key_bits == 8 else math.ceil(head * key_bits / 8) + 2
    value = math.ceil(head * value_bits / 8) + 4
    slot = key + value
    return slot + slot % 2


def modelled(kv_dtype: str) -> bool:
    """Whether :func:`bytes_per_token` sizes ``kv_dtype``."""
    return kv_dtype in DTYPE_BYTES or kv_dtype in PER_TOKEN_HEAD or kv_dtype in TURBOQUANT


def bytes_per_token(layer: Layer, kv_dtype: str) -> int:
    """One layer's bytes per token for ``kv_dtype`` (a ValueError if not modelled)."""
    heads, hk, hv = layer.kv_heads, layer.head_k, layer.head_v
    if kv_dtype in DTYPE_BYTES:
        return heads * (hk + hv) * DTYPE_BYTES[kv_dtype]
    if kv_dtype in PER_TOKEN_HEAD:
        if kv_dtype == "int4_per_token_head":
            hk, hv = hk // 2, hv // 2
        return heads * (hk + hv + 2 * FP32)
    if kv_dtype in TURBOQUANT:
        return heads * turboquant_slot(hk, *TURBOQUANT[kv_dtype])
    raise ValueError(f"the KV size of {kv_dtype} is not modelled")


@dataclass(frozen=True, kw_only=True)
class Page:
    layer: int
    sliding: bool
    kv_dtype: str
    per_token: int  # bytes per token (unpadded)
    block: int  # tokens per page
    page: int  # bytes per page, padding included

    @property
    def waste(self) -> int:
        return self.page - self.per_token * self.block

    @property
    def key(self) -> tuple[bool, str, int, int, int]:
        return self.sliding, self.kv_dtype, self.per_token, self.block, self.page


@dataclass(frozen=True, kw_only=True)
class Knobs:
    """The engine settings that size the cache."""

    kv_dtype: str
    max_model_len: int
    in_flight: int  # max_concurrent_batches x max_num_batched_tokens
    block_size: int = 16  # CacheConfig.DEFAULT_BLOCK_SIZE, or --block-size
    kernel_blocks: Sequence[int] = (16,)  # the backend's supported kernel block sizes
    skip: frozenset[int] = frozenset()  # layers cached at "auto"
    extra_retained: int = 0  # multi-module MTP only


def boundary_skip(shape: ModelShape, kv_dtype: str, hybrid: bool = False) -> frozenset[int]:
    if kv_dtype not in TURBOQUANT or hybrid:
        return frozenset()
    n = len(shape.layers)
    k = min(TQ_BOUNDARY, n // 2)
    return frozenset([*range(k), *range(n - k, n)])


def model_level(shape: ModelShape) -> Layer:
    """The whole-model layer ``model_config.get_head_size()``/``get_num_kv_heads()`` describe:
    per-layer values that differ collapse to their max (``config/model_arch.py``)."""
    kv = shape.kv_layers
    return Layer(
        index=-1,
        sliding=False,
        kv_heads=max(x.kv_heads for x in kv),
        head_k=max(x.head_k for x in kv),
        head_v=max(x.head_v for x in kv),
    )


def pages(shape: ModelShape, knobs: Knobs) -> list[Page]:
    """Every KV layer's page before unification, as the runner builds the specs."""
    block, shared = knobs.block_size, None
    dtype = {x.index: "auto" if x.index in knobs.skip else knobs.kv_dtype for x in shape.layers}
    if knobs.skip and knobs.kv_dtype != "auto":
        # _align_heterogeneous_kv_block_size sizes pages from the whole-model head size and
        # KV heads, which ModelArchitectureConfig.from_layers collapses with max()
        whole = model_level(shape)
        primary, skipped = bytes_per_token(whole, knobs.kv_dtype), bytes_per_token(whole, "auto")
        if skipped > primary:
            smallest = min(knobs.kernel_blocks)
            align = max(smallest, block)
            block = max(block, align * -(-(skipped * smallest) // (align * primary)))
            shared = block * primary
    out = []
    for x in shape.kv_layers:
        per_token = bytes_per_token(x, dtype[x.index])
        if x.sliding:
            fits = [b for b in knobs.kernel_blocks if shared and b * per_token <= shared]
            b = max(fits) if fits else min(knobs.kernel_blocks)
            page = shared if shared else b * per_token
        else:
            b, page = block, block * per_token
        out.append(
            Page(
                layer=x.index,
                sliding=x.sliding,
                kv_dtype=dtype[x.index],
                per_token=per_token,
                block=b,
                page=max(page, b * per_token),
            )
        )
    return out


def unify(specs: list[Page]) -> list[Page]:
    """``unify_kv_cache_spec_page_size``: grow by an integer ratio, else pad to the largest."""
    top = max(p.page for p in specs)
    out = []
    for p in specs:
        if p.page == top:
            out.append(p)
        elif top % p.page == 0:
            out.append(replace(p, block=p.block * (top // p.page), page=top))
        else:
            out.append(replace(p, page=top))
    return out


@dataclass(frozen=True, kw_only=True)
class Group:
    sliding: bool
    block: int
    page: int
    layers: int
    waste: int = 0  # padding bytes in each layer's page


def groups(specs: list[Page]) -> tuple[list[Group], int]:
    """(KV cache groups, padding layers): ``_get_kv_cache_groups_uniform_page_size``."""
    buckets: dict[tuple[bool, str, int, int, int], list[Page]] = {}
    for p in specs:
        buckets.setdefault(p.key, []).append(p)
    sizes = [len(b) for b in buckets.values()]
    size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    out, padding = [], 0
    for members in buckets.values():
        n = -(-len(members) // size)
        padding += n * size - len(members)
        for i in range(n):
            part = members[i::n]
            out.append(
                Group(
                    sliding=part[0].sliding,
                    block=part[0].block,
                    page=part[0].page,
                    layers=len(part),
                    waste=part[0].waste,
                )
            )
    return out, padding


@dataclass(frozen=True, kw_only=True)
class Pool:
    specs: tuple[Page, ...]
    groups: tuple[Group, ...]
    padding_layers: int
    bytes_per_block: int
    blocks_per_request: int
    num_blocks: int

    @property
    def concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request

    def tokens(self, max_model_len: int) -> int:
        return int(self.concurrency * max_model_len)

    request_waste: int = 0  # padding bytes in one full-length request's blocks

    @property
    def waste_fraction(self) -> float:
        """Share of a full-length request's KV bytes that are page padding."""
        total = self.blocks_per_request * self.bytes_per_block
        return self.request_waste / total if total else 0.0


def group_blocks(g: Group, knobs: Knobs, window: int | None) -> int:
    """Blocks one request at ``max_model_len`` takes from group ``g``."""
    length = knobs.max_model_len
    if g.sliding and window:
        held = min(window - 1 + knobs.extra_retained + knobs.in_flight, length)
        return -(-held // g.block) + 1
    return -(-length // g.block)


def blocks_per_request(groups_: Sequence[Group], knobs: Knobs, window: int | None) -> int:
    return sum(group_blocks(g, knobs, window) for g in groups_)


def pool(shape: ModelShape, knobs: Knobs, available: int) -> Pool:
    """The pool ``available`` bytes of KV memory make for ``shape`` under ``knobs``."""
    specs = unify(pages(shape, knobs))
    grouped, padding = groups(specs)
    per_block = max(g.layers * g.page for g in grouped)
    waste = sum(group_blocks(g, knobs, shape.window) * g.layers * g.waste for g in grouped)
    return Pool(
        specs=tuple(specs),
        groups=tuple(grouped),
        padding_layers=padding,
        bytes_per_block=per_block,
        blocks_per_request=blocks_per_request(grouped, knobs, shape.window),
        num_blocks=max(0, available) // per_block,
        request_waste=waste,
    )


def memory_for_tokens(shape: ModelShape, knobs: Knobs, tokens: int) -> int:
    """The KV bytes whose pool reports ``tokens`` (inverse of :func:`pool`, to a block)."""
    probe = pool(shape, knobs, 0)
    blocks = math.ceil(tokens * probe.blocks_per_request / knobs.max_model_len)
    return blocks * probe.bytes_per_block
