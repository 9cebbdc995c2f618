"""A model's attention layers, as the runtime that loads it sees them; pure.

Two readers, each following its runtime's own rule:

- :func:`from_gguf`: llama.cpp b10069 (``src/llama-model.cpp`` and ``src/models/*.cpp``):
  ``{arch}.attention.head_count_kv`` scalar or per layer, ``key_length``/``value_length``
  (default ``embedding_length / head_count``), ``key_length_swa``/``value_length_swa``
  (default: the full ones), ``sliding_window``, and the layer pattern:
  ``sliding_window_pattern`` as a per-layer bool array (gemma4 reads it into ``is_swa``), or
  a period ``n`` (``llama_hparams::set_swa_pattern``: layer ``il`` slides when
  ``il % n < n - 1``), defaulting per architecture (:data:`SWA_PERIOD`);
  ``attention.shared_kv_layers``: the last N layers keep no KV of their own. Hybrid Gated
  DeltaNet models (qwen35, qwen35moe, qwen3next): :mod:`lockpipe.preflight.recurrent` marks
  the recurrent layers (state, no KV) and the MTP blocks (KV only in a draft-mtp context).
- :func:`from_hf_config`: vLLM 0.29.0 (``transformers_utils/configs/gemma4.py``):
  ``layer_types`` pick sliding or full; a full layer uses ``global_head_dim`` and, with
  ``attention_k_eq_v``, ``num_global_key_value_heads``; K and V are both cached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import FormatError
from lockpipe.jsonshape import Key, Reader, kind_of, render
from lockpipe.preflight import recurrent

# src/llama-hparams.h LLAMA_MAX_LAYERS (tree-checked): llama_model_loader::get_key_or_arr
# throws "n > N_MAX" past it, so llama-server loads no GGUF with more blocks. vLLM has no
# such cap; preflight holds a config.json to the same one, as it builds an entry per layer
# (a block count of 2**40 took 12 GB before the first check).
MAX_LAYERS = 512
# The most any count or length in a model's header or config may be: llama.cpp keeps its
# hparams as uint32/int32, and a bound keeps a corrupt value (-8 heads, 10**400 tokens) from
# being sized into a negative page that passes or a float that overflows.
MAX_NUMBER = 2**31 - 1

# Architecture -> (period, default window) where the GGUF names no pattern
# (src/models/<arch>.cpp in b10069: gemma2.cpp, gemma3.cpp, gemma3n.cpp, cohere2.cpp,
# openai-moe.cpp). gemma3 slides only when it names a window > 0. Typed: preflight reads
# a model's shape before any llama.cpp tree is fetched, and these defaults are C++.
SWA_PERIOD: dict[str, tuple[int, int | None]] = {
    "gemma2": (2, 4096), "gemma3": (6, None), "gemma3n": (5, None), "cohere2": (4, None),
    "gpt-oss": (2, None),
}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Layer:
    index: int
    sliding: bool
    kv_heads: int
    head_k: int
    head_v: int
    q_heads: int | None = None
    has_kv: bool = True  # False: the layer reads another layer's KV (shared KV layers)
    recurrent: bool = False  # a linear-attention layer: fixed state per sequence, no KV
    nextn: bool = False  # an MTP block: KV only in the draft-mtp context

    @property
    def values_per_token(self) -> int:
        """K plus V elements one token stores in this layer."""
        return self.kv_heads * (self.head_k + self.head_v) if self.has_kv else 0


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    name: str
    layers: tuple[Layer, ...]
    window: int | None  # tokens a sliding layer attends to
    trained_context: int | None  # GGUF context_length, or HF max_position_embeddings
    source: str  # where these values were read
    notes: tuple[str, ...] = ()
    arch: str | None = None  # general.architecture, for a GGUF
    hybrid: recurrent.Hybrid | None = None  # recurrent layers and their state size
    # Keys where preflight.json's models entry disagrees with the file this was read from.
    disagrees: tuple[str, ...] = ()

    @property
    def kv_layers(self) -> tuple[Layer, ...]:
        """The layers whose KV the main context caches: not recurrent, not MTP blocks."""
        return tuple(x for x in self.layers if x.has_kv and not x.recurrent and not x.nextn)

    @property
    def mtp_layers(self) -> tuple[Layer, ...]:
        """MTP blocks (``blk.N.nextn.*``): cached only by a draft-mtp context."""
        return tuple(x for x in self.layers if x.has_kv and x.nextn)

    def count(self, *, sliding: bool) -> int:
        return sum(1 for x in self.kv_layers if x.sliding == sliding)

    @property
    def hybrid_head_dims(self) -> bool:
        return len({(x.head_k, x.head_v) for x in self.kv_layers}) > 1


def _reader(source: str) -> Reader:
    """Whole numbers read from a model's header or config: another type is a FormatError
    naming ``source`` and the key, not a ValueError traceback."""
    return Reader(where=source, root="the model's metadata", error=FormatError)


def _whole(
    read: Reader, doc: Mapping[str, Any], path: Sequence[Key], default: int | None = 0
) -> int:
    """The whole number at ``path``, 0 to :data:`MAX_NUMBER` (``default`` where it is
    absent: 0, which every caller reads as "not given", or None where it must be there);
    anything else is a FormatError naming the key."""
    value = read.get(doc, path, int, default)
    if not 0 <= value <= MAX_NUMBER:
        shown = f"{value:,}" if abs(value) < 10**30 else f"a number of {value.bit_length()} bits"
        raise read.fail(
            f"{render(path)} is {shown}; a count or length must be 0 to {MAX_NUMBER:,} "
            "(the header or config is corrupt or not this model's)"
        )
    return value


def _per_layer(
    meta: Mapping[str, Any], n: int, key: str, source: str, default: int | None = None
) -> list[int]:
    value, read = meta.get(key), _reader(source)
    if value is None:
        if default is None:
            raise FormatError(f"GGUF metadata lacks {key}; the model's KV size is unknown")
        return [default] * n
    if isinstance(value, list):
        if len(value) != n:
            raise FormatError(f"{key} has {len(value)} entries for {n} layers")
        return [_whole(read, meta, (key, i), None) for i in range(n)]
    return [_whole(read, meta, (key,), None)] * n


def swa_pattern(n_layer: int, period: int) -> list[bool]:
    """``llama_hparams::set_swa_pattern(period)`` (dense_first false)."""
    return [period == 0 or il % period < period - 1 for il in range(n_layer)]


def from_gguf(
    meta: Mapping[str, Any], *, source: str, long_arrays: Sequence[str] = ()
) -> ModelShape:
    """The attention layers of a GGUF model, from its header metadata (llama.cpp's rule)."""
    arch = meta.get("general.architecture")
    if not isinstance(arch, str):
        raise FormatError(f"{source}: no general.architecture in the GGUF header")

    read = _reader(source)

    def key(name: str) -> Any:
        return meta.get(f"{arch}.{name}")

    def number(name: str, default: int | None = None) -> int | None:
        """``arch.name``, a whole number; ``default`` when absent (or 0)."""
        return _whole(read, meta, (f"{arch}.{name}",)) or default

    n = number("block_count") or 0
    if n <= 0:
        raise FormatError(f"{source}: {arch}.block_count is missing")
    if n > MAX_LAYERS:
        raise FormatError(
            f"{source}: {arch}.block_count {n:,}: llama.cpp loads at most {MAX_LAYERS} layers "
            "(src/llama-hparams.h LLAMA_MAX_LAYERS); the header is corrupt or not this model's"
        )
    for name in ("attention.head_count", "attention.head_count_kv"):
        if f"{arch}.{name}" in long_arrays:
            raise FormatError(
                f"{source}: {arch}.{name} is a per-layer array longer than the GGUF reader "
                "keeps (lockpipe/payloads/gguf.py KEEP_ARRAY); the KV heads are unknown"
            )
    hybrid = recurrent.read_gguf(meta, arch, n, source=source, long_arrays=long_arrays)
    heads = _per_layer(meta, n, f"{arch}.attention.head_count", source)
    kv = _per_layer(meta, n, f"{arch}.attention.head_count_kv", source, default=heads[0])
    embd = number("embedding_length")
    derived = embd // heads[0] if embd and heads[0] else None
    head_k = number("attention.key_length", derived)
    head_v = number("attention.value_length", derived)
    if head_k is None or head_v is None:
        raise FormatError(f"{source}: neither key_length nor embedding_length is given")
    swa_k = number("attention.key_length_swa", head_k) or head_k
    swa_v = number("attention.value_length_swa", head_v) or head_v
    window = number("attention.sliding_window")
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    pattern = meta.get(pattern_key)
    notes: list[str] = []
    default_period, default_window = SWA_PERIOD.get(arch, (None, None))
    window = window or default_window
    if pattern_key in long_arrays:
        sliding = [False] * n
        notes.append(f"{pattern_key} is too long to read here: every layer counted as full")
    elif isinstance(pattern, list):
        if not all(isinstance(v, bool | int) for v in pattern):  # "false" would read as true
            wrong = next(v for v in pattern if not isinstance(v, bool | int))
            raise read.fail(f"{pattern_key} holds {kind_of(wrong)}, not true/false per layer")
        sliding = [bool(v) for v in pattern] + [False] * (n - len(pattern))
    elif pattern is not None and not isinstance(pattern, int):
        raise read.fail(f"{pattern_key} is {kind_of(pattern)}, not a period or a per-layer list")
    elif isinstance(pattern, int) and window:
        sliding = swa_pattern(n, pattern)
    elif default_period and window:
        sliding = swa_pattern(n, default_period)
        notes.append(f"{arch}: no pattern in the file; llama.cpp's default period {default_period}")
    else:
        sliding = [False] * n
        if window:
            notes.append(f"{arch}: a window but no pattern llama.cpp reads: every layer full")
    shared = number("attention.shared_kv_layers") or 0
    if shared >= n:  # none left holding KV
        raise FormatError(
            f"{source}: {arch}.attention.shared_kv_layers {shared:,} of {n:,} layers leaves "
            f"no layer holding its own KV; it must be 0 to {n - 1:,} (the header is corrupt "
            "or not this model's)"
        )
    layers = tuple(
        Layer(
            index=i,
            sliding=sliding[i] and bool(window),
            kv_heads=kv[i],
            head_k=swa_k if sliding[i] else head_k,
            head_v=swa_v if sliding[i] else head_v,
            q_heads=heads[i],
            has_kv=i < n - shared,
            recurrent=bool(hybrid and hybrid.recurrent[i]),
            nextn=bool(hybrid and i >= hybrid.n_layer),
        )
        for i in range(n)
    )
    _check_heads(layers, arch, source)
    return ModelShape(
        name=str(meta.get("general.name") or arch),
        layers=layers,
        window=window,
        trained_context=number("context_length"),
        source=source,
        notes=tuple(notes),
        arch=arch,
        hybrid=hybrid,
    )


def _check_heads(layers: Sequence[Layer], arch: str, source: str) -> None:
    """Every layer preflight counts as KV (not recurrent) has at least one query and KV head
    and non-zero head sizes. llama.cpp (src/llama-model.cpp load_hparams) reads
    ``head_count`` 0 as a model without attention ("non-transformer models do not have
    attention heads") and a layer's ``head_count_kv`` 0 as a recurrent layer (jamba,
    granitehybrid, falcon-h1: ``recurrent_layer_arr[i] = n_head_kv(i) == 0``), neither of
    which preflight sizes: 0 was taken as 0 bytes of KV and a PASS."""
    for x in layers:
        if x.recurrent or not x.has_kv:
            continue
        if not x.q_heads:
            raise FormatError(
                f"{source}: {arch}.attention.head_count is 0 for layer {x.index}: llama.cpp "
                "reads that as a model without attention, whose state preflight does not size"
            )
        if not x.kv_heads:
            raise FormatError(
                f"{source}: {arch}.attention.head_count_kv is 0 for layer {x.index}: llama.cpp "
                "reads that as a recurrent layer (n_head_kv(il) == 0), whose state preflight "
                "does not size for this architecture"
            )
        if not x.head_k or not x.head_v:
            raise FormatError(
                f"{source}: layer {x.index} has a head size of 0 (attention.key_length/"
                "value_length not given and embedding_length // head_count is 0); the header "
                "is corrupt or not this model's"
            )


def from_hf_config(config: Mapping[str, Any], *, source: str) -> ModelShape:
    """The attention layers of a Hugging Face ``config.json`` (vLLM 0.29.0's reading)."""
    read = _reader(source)
    text = read.get(config, ("text_config",), dict, {}) or config
    at = ("text_config",) if text is not config else ()

    def number(name: str, default: int | None = None) -> int | None:
        """``name`` in the text config, a whole number; ``default`` when absent (or 0)."""
        return _whole(read, config, (*at, name)) or default

    for need in ("num_hidden_layers", "num_attention_heads"):
        if not number(need):
            raise FormatError(f"{source}: config.json lacks '{need}'; its KV size is unknown")
    n, heads = number("num_hidden_layers") or 0, number("num_attention_heads") or 1
    if not 0 < n <= MAX_LAYERS:
        raise FormatError(
            f"{source}: num_hidden_layers {n:,}: preflight reads 1 to {MAX_LAYERS} layers "
            "(llama.cpp's LLAMA_MAX_LAYERS); the config is corrupt or not this model's"
        )
    kv = number("num_key_value_heads", heads) or heads
    head = number("head_dim")
    if head is None:
        hidden = number("hidden_size")
        if hidden is None:
            raise FormatError(f"{source}: config.json lacks 'hidden_size'; its KV size is unknown")
        head = hidden // heads
        if head == 0:  # pages of 0 bytes, then a ZeroDivisionError in vllm_kv's page count
            raise FormatError(
                f"{source}: hidden_size {hidden:,} // num_attention_heads {heads:,} is a head "
                "size of 0 (and head_dim is not given); the config is corrupt or not this model's"
            )
    listed = read.get(config, (*at, "layer_types"), list, [])
    types = [read.get(config, (*at, "layer_types", i), str) for i in range(len(listed))]
    window = number("sliding_window")
    if not types:
        types = ["sliding_attention" if window else "full_attention"] * n
    if len(types) != n:
        raise FormatError(f"{source}: layer_types has {len(types)} entries for {n} layers")
    if "linear_attention" in types:  # Qwen3-Next/3.5: vLLM's hybrid state is not sized here
        raise FormatError(
            f"{source}: linear_attention layers (a hybrid model): preflight sizes their state "
            "for llama.cpp GGUFs only; for vLLM every layer would be counted as KV"
        )
    full_head = number("global_head_dim", head) or head
    full_kv = (
        (number("num_global_key_value_heads", kv) or kv) if text.get("attention_k_eq_v") else kv
    )
    shared = number("num_kv_shared_layers") or 0
    if not 0 <= shared < n:  # none left holding KV: max() of no pages was a ValueError
        raise FormatError(
            f"{source}: num_kv_shared_layers {shared:,} of {n:,} layers leaves no layer "
            f"holding its own KV; it must be 0 to {n - 1:,} (the config is corrupt or not "
            "this model's)"
        )
    layers = []
    for i, kind in enumerate(types):
        full = kind == "full_attention"
        h = full_head if full else head
        layers.append(
            Layer(
                index=i,
                sliding=not full and bool(window),
                kv_heads=full_kv if full else kv,
                head_k=h,
                head_v=h,
                q_heads=heads,
                has_kv=i < n - shared,
            )
        )
    return ModelShape(
        name=str(config.get("_name_or_path") or text.get("model_type") or "model"),
        layers=tuple(layers),
        window=window,
        trained_context=number("max_position_embeddings"),
        source=source,
    )
