"""The sizing flags of a ``vllm serve`` command line, and the defaults vLLM 0.29.0 fills in.

``--gpu-memory-utilization``: None when not given, then ``CacheConfig``'s default from the
pinned wheel (:func:`utilization`, ``cache_config_defaults`` in the release's rules);
``--max-num-batched-tokens`` by card memory
(``EngineArgs._get_default_usage_values``, OpenAI server: 2048 below 70 GiB, 8192 up to
160 GiB except A100, 16384 above); async scheduling on unless turned off, MTP included
(``config/vllm.py``), so two batches are in flight. ``ENV`` lines of the target's
Dockerfile are the environment the server sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lockpipe.errors import LockError
from lockpipe.jsonshape import loads

GIB = 1 << 30


def default_utilization(facts: Mapping[str, Any]) -> float:
    """``CacheConfig.gpu_memory_utilization``'s default in the release's wheel
    (``config/cache.py``, read by :mod:`.vllm_source`)."""
    value = (facts.get("cache_config_defaults") or {}).get("gpu_memory_utilization")
    if not isinstance(value, (int, float)):
        raise LockError(
            f"vLLM {facts.get('vllm')}'s rules lack cache_config_defaults.gpu_memory_utilization:"
            f" derive them again (python -m lockpipe.preflight.vllm_release {facts.get('vllm')})"
        )
    return float(value)


def utilization(args: VllmArgs, facts: Mapping[str, Any]) -> float:
    """The fraction of the card vLLM asks for: the command's, else the wheel's default."""
    return args.utilization if args.utilization is not None else default_utilization(facts)


@dataclass(frozen=True, kw_only=True)
class VllmArgs:
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    utilization: float | None = None  # --gpu-memory-utilization; None: vLLM's default
    kv_dtype: str = "auto"
    backend: str | None = None
    block_size: int | None = None
    batched_tokens: int | None = None
    skip_layers: tuple[str, ...] = ()  # --kv-cache-dtype-skip-layers: space-separated patterns
    async_scheduling: bool = True  # default on, MTP included (config/vllm.py)
    speculative: Mapping[str, Any] = field(default_factory=dict)
    # -ac/--attention-config (JSON, or --attention-config.KEY VALUE): its "backend" forces
    # one as --attention-backend does (engine/arg_utils.py:2488-2499)
    attention_config: Mapping[str, Any] = field(default_factory=dict)
    # "--flag value" pairs the extract cannot read as a number ('' or vLLM's '128k' forms):
    # vLLM's own parser reads (or refuses) them; without it preflight cannot judge
    unread: tuple[str, ...] = ()

    @property
    def config_backend(self) -> str | None:
        value = self.attention_config.get("backend")
        return value if isinstance(value, str) else None

    @property
    def forced_backend(self) -> str | None:
        """The backend forced by either flag (``auto``: none; config/attention.py)."""
        for value in (self.backend, self.config_backend):
            if value and value.lower() != "auto":
                return value.upper()
        return None


# The extract's reading, for a host without vLLM's parser environment; where it is built,
# vLLM's own parser reads the command and its values win (vllm_parser.as_vllm_args)
_FLAGS = {"--max-model-len": "max_model_len", "--max-num-seqs": "max_num_seqs",
          "--gpu-memory-utilization": "utilization", "--kv-cache-dtype": "kv_dtype",
          "--attention-backend": "backend", "--block-size": "block_size",
          "--max-num-batched-tokens": "batched_tokens"}  # fmt: skip


_CONFIG = ("--attention-config", "-ac")


def parse_args(command: Sequence[str]) -> VllmArgs:
    """The sizing flags of a ``vllm serve`` command line (``--flag value`` or ``=value``),
    read as ``FlexibleArgumentParser`` (``utils/argparse_utils.py:259-444``) reads them:
    ``_`` is ``-`` in a ``--`` name before its first ``.``; ``--attention-config.KEY V``
    (or ``-ac.KEY V``) pieces merge into one dict that replaces any ``-ac JSON``; a list
    option (``--kv-cache-dtype-skip-layers``) takes the values up to the next flag."""
    tokens: list[str] = []
    single: set[int] = set()  # a --flag=value: exactly one value
    for t in command:
        if t.startswith("--"):
            name, eq, value = t.partition("=")
            head, dot, rest = name.partition(".")
            t = head.replace("_", "-") + dot + rest + eq + value
        if t.startswith("-") and "=" in t:
            single.add(len(tokens))
            tokens += t.split("=", 1)
        else:
            tokens.append(t)
    found: dict[str, Any] = {}
    config: dict[str, Any] = {}
    dotted: dict[str, Any] = {}
    for i, t in enumerate(tokens):
        value = tokens[i + 1] if i + 1 < len(tokens) else ""
        key, _, path = t.partition(".")
        if key in _CONFIG and path:
            _nest(dotted, path.split("."), _json_or_text(value))
        elif t in _CONFIG:
            loaded = _json_or_text(value)
            config = loaded if isinstance(loaded, dict) else {}
        elif t in _FLAGS:
            name = _FLAGS[t]
            try:
                found[name] = (
                    float(value)
                    if name == "utilization"
                    else (value if name in ("kv_dtype", "backend") else int(value))
                )
            except ValueError:
                found.setdefault("unread", []).append(f"{t} {value!r}")
        elif t == "--kv-cache-dtype-skip-layers":  # list[str]: nargs "+" (arg_utils.py:263)
            values = [value] if i in single else _until_flag(tokens[i + 1 :])
            found["skip_layers"] = tuple(values)
        elif t in ("--no-async-scheduling", "--async-scheduling"):
            found["async_scheduling"] = t == "--async-scheduling"
        elif t == "--speculative-config":
            try:
                found["speculative"] = loads(value)
            except ValueError:
                found["speculative"] = {}
    found["attention_config"] = dotted or config  # the merged pieces come last: they win
    found["unread"] = tuple(found.get("unread", ()))
    return VllmArgs(**found)


def _until_flag(rest: Sequence[str]) -> list[str]:
    out: list[str] = []
    for t in rest:
        if t.startswith("-") and not t.lstrip("-").isdigit():
            break
        out.append(t)
    return out


def _json_or_text(value: str) -> Any:
    try:
        return loads(value)
    except ValueError:
        return value


def _nest(into: dict[str, Any], keys: Sequence[str], value: Any) -> None:
    for k in keys[:-1]:
        into = into.setdefault(k, {}) if isinstance(into.get(k, {}), dict) else {}
    into[keys[-1]] = value


def default_batched_tokens(card_name: str, memory_mib: int) -> int:
    """``EngineArgs._get_default_usage_values`` for the OpenAI server on this card: the
    extract's path, for when vLLM's parser environment is not built (where it is, vLLM's own
    ``EngineArgs.get_batch_defaults`` on the faked card gives the number)."""
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
