"""What-if values from the preflight command line, and the runtimes each one applies to."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from lockpipe.preflight import llama
from lockpipe.spelling import hint


@dataclass(frozen=True, kw_only=True)
class Overrides:
    """What-if values from the preflight command line, over the target's own."""

    ctx_size: int | None = None
    parallel: int | None = None
    kv_dtype: str | None = None
    attention_backend: str | None = None
    max_model_len: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    def asked(self) -> list[str]:
        """The what-ifs given, as they were spelled on the command line."""
        out = [f"{_FLAGS[k]} {v}" for k, v in self._given().items() if k != "env"]
        return out + [f"--env {k}={v}" for k, v in self.env.items()]

    def not_for(self, runtime: str) -> tuple[list[str], str]:
        """The flags given that a target of ``runtime`` has no use for, and why."""
        applies, why = _APPLIES.get(runtime, (frozenset(), _EXTERNAL))
        out = [_FLAGS[k] for k in self._given() if k not in applies]
        if runtime == "llama.cpp" and self.kv_dtype and not self.llama_kv_type():
            out.append(f"--kv-cache-dtype {self.kv_dtype}")
            why += f"; llama.cpp's cache types are {', '.join(llama.KV_TYPES)}"
        return out, why

    def refused(self, runtime: str, elsewhere: Collection[str] = ()) -> str | None:
        """Why a target of ``runtime`` cannot take a what-if value, or None.

        A KV dtype llama.cpp lacks (its cache types, ``kv_cache_types`` of common/arg.cpp,
        are :data:`llama.KV_TYPES`) is a typo, never a shape to judge without; unless it is
        in ``elsewhere``, the dtypes another target of the run takes (vLLM's ``fp8``), so
        that one what-if can be meant for the vLLM target of the run (see :meth:`not_for`).
        """
        if runtime != "llama.cpp" or not self.kv_dtype or self.llama_kv_type():
            return None
        if self.kv_dtype in elsewhere:
            return None
        types = ", ".join(llama.KV_TYPES)
        return (
            f"--kv-cache-dtype {self.kv_dtype}: llama.cpp has no such cache type"
            f"{hint(self.kv_dtype, llama.KV_TYPES)}; its -ctk/-ctv types are {types} "
            "(vLLM's bfloat16 and float16 mean bf16 and f16)"
        )

    def llama_kv_type(self) -> str | None:
        """``--kv-cache-dtype`` as a llama.cpp cache type (-ctk/-ctv), or None if it is not one.

        vLLM's ``bfloat16``/``float16`` are llama.cpp's ``bf16``/``f16``: one what-if can
        mean both runtimes.
        """
        kv = (self.kv_dtype or "").lower()
        kv = {"bfloat16": "bf16", "float16": "f16"}.get(kv, kv)
        return kv if kv in llama.KV_TYPES else None

    def _given(self) -> dict[str, Any]:
        values = {k: getattr(self, k) for k in _FLAGS}
        return {k: v for k, v in values.items() if v is not None and v != {}}


_FLAGS = {"ctx_size": "--ctx-size", "parallel": "--parallel", "kv_dtype": "--kv-cache-dtype",
          "attention_backend": "--attention-backend", "max_model_len": "--max-model-len",
          "env": "--env"}  # fmt: skip
_APPLIES = {
    "llama.cpp": (
        frozenset({"ctx_size", "parallel", "kv_dtype"}),
        "vLLM's: llama-server's context is --ctx-size, its slots --parallel, and only "
        "VLLM_* variables are checked",
    ),
    "vllm": (
        frozenset({"kv_dtype", "attention_backend", "max_model_len", "env"}),
        "llama.cpp's: vLLM's context is --max-model-len, and its sessions follow from the pool",
    ),
}
_EXTERNAL = "an image built elsewhere: the lock holds none of its flags to change"
