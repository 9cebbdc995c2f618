"""What-if values from the preflight command line, and the runtimes each one applies to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lockpipe.preflight import llama


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
