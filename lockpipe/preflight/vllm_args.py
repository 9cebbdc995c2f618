"""The sizing flags of a ``vllm serve`` command line, and the defaults vLLM 0.29.0 fills in.

``--gpu-memory-utilization`` 0.9; ``--max-num-batched-tokens`` by card memory
(``EngineArgs._get_default_usage_values``, OpenAI server: 2048 below 70 GiB, 8192 up to
160 GiB except A100, 16384 above); async scheduling on unless turned off, MTP included
(``config/vllm.py``), so two batches are in flight. ``ENV`` lines of the target's
Dockerfile are the environment the server sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30


@dataclass(frozen=True, kw_only=True)
class VllmArgs:
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    utilization: float = 0.9  # --gpu-memory-utilization default
    kv_dtype: str = "auto"
    backend: str | None = None
    block_size: int | None = None
    batched_tokens: int | None = None
    skip_layers: tuple[str, ...] = ()
    async_scheduling: bool = True  # default on, MTP included (config/vllm.py)
    speculative: Mapping[str, Any] = field(default_factory=dict)


_FLAGS = {"--max-model-len": "max_model_len", "--max-num-seqs": "max_num_seqs",
          "--gpu-memory-utilization": "utilization", "--kv-cache-dtype": "kv_dtype",
          "--attention-backend": "backend", "--block-size": "block_size",
          "--max-num-batched-tokens": "batched_tokens"}  # fmt: skip


def parse_args(command: Sequence[str]) -> VllmArgs:
    """The sizing flags of a ``vllm serve`` command line (``--flag value`` or ``=value``)."""
    tokens: list[str] = []
    for t in command:
        tokens += t.split("=", 1) if t.startswith("--") and "=" in t else [t]
    found: dict[str, Any] = {}
    for i, t in enumerate(tokens):
        value = tokens[i + 1] if i + 1 < len(tokens) else ""
        if t in _FLAGS:
            name = _FLAGS[t]
            found[name] = (
                float(value)
                if name == "utilization"
                else (value if name in ("kv_dtype", "backend") else int(value))
            )
        elif t == "--kv-cache-dtype-skip-layers":
            found["skip_layers"] = tuple(value.split(","))
        elif t in ("--no-async-scheduling", "--async-scheduling"):
            found["async_scheduling"] = t == "--async-scheduling"
        elif t == "--speculative-config":
            try:
                found["speculative"] = json.loads(value)
            except json.JSONDecodeError:
                found["speculative"] = {}
    return VllmArgs(**found)


def default_batched_tokens(card_name: str, memory_mib: int) -> int:
    """``EngineArgs._get_default_usage_values`` for the OpenAI server on this card."""
    if memory_mib * (1 << 20) >= 160 * GIB:
        return 16384
    if memory_mib * (1 << 20) >= 70 * GIB and "a100" not in card_name.lower():
        return 8192
    return 2048


def dockerfile_env(text: str) -> dict[str, str]:
    """``ENV`` assignments of a Dockerfile (``ENV A=1 B=2`` and ``ENV A 1``)."""
    env: dict[str, str] = {}
    for line in re.sub(r"\\\n", " ", text).splitlines():
        m = re.match(r"\s*ENV\s+(.*)", line, re.IGNORECASE)
        if not m:
            continue
        pairs = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|\S*)", m[1])
        if pairs:
            env.update((k, v.strip('"')) for k, v in pairs)
        elif len(parts := m[1].split(None, 1)) == 2:
            env[parts[0]] = parts[1]
    return env
