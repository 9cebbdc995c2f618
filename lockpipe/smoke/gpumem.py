"""Is there GPU memory for a target to start? nvidia-smi's CSV, each runtime's need; pure.

A --gpu smoke runs beside whatever else the card serves (the fleet's host serves
frank-small in production). vLLM measures free memory when it starts and refuses to
start when it is below ``--gpu-memory-utilization`` of the card's total (by default
``CacheConfig.gpu_memory_utilization`` of the target's ``VLLM_VERSION``, from its wheel:
0.92 in 0.29.0);
llama.cpp loads its payloads' weights onto the card(s), so their sizes are a lower bound
of what it takes. Either way the smoke says so before it starts a container: which card,
free against needed, and which processes hold the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lockpipe.errors import GpuAttachError, SmokeError
from lockpipe.lock.model import Payload, Target
from lockpipe.preflight.vllm_args import default_utilization
from lockpipe.preflight.vllm_release import rules_for

QUERY_CARDS = (
    "--query-gpu=index,name,memory.total,memory.used,memory.free,compute_cap",
    "--format=csv,noheader,nounits",
)
QUERY_HOLDERS = (
    "--query-compute-apps=pid,process_name,used_memory",
    "--format=csv,noheader,nounits",
)
MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Card:
    index: int
    name: str
    total_mib: int
    used_mib: int | None  # [N/A] on some boards
    free_mib: int
    compute_cap: str

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.name})"


@dataclass(frozen=True)
class Holder:
    """A process holding GPU memory (on any card: the query does not say which)."""

    pid: int
    name: str
    used_mib: int | None  # [N/A] where the driver does not tell


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def parse_cards(text: str) -> list[Card]:
    """The cards in nvidia-smi's QUERY_CARDS output; GpuAttachError quoting what is unusable."""
    query = " ".join(QUERY_CARDS)
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split(",")]
        if not line.strip():
            continue
        index, total, free = (_int(f[0]), _int(f[-4]), _int(f[-2])) if len(f) >= 6 else (None,) * 3
        if index is None or total is None or free is None:
            raise GpuAttachError(
                f"nvidia-smi {query} printed {line.strip()!r}, not index, name, total, used and "
                "free MiB, compute capability: without a card's total and free memory the "
                "check cannot run; fix the driver until nvidia-smi reports them"
            )
        out.append(Card(index=index, name=", ".join(f[1:-4]), total_mib=total,
                        used_mib=_int(f[-3]), free_mib=free, compute_cap=f[-1]))  # fmt: skip
    if not out:
        raise GpuAttachError(f"nvidia-smi {query} listed no GPU; a --gpu smoke needs one that "
                             "nvidia-smi lists")  # fmt: skip
    return out


def parse_holders(text: str) -> list[Holder]:
    """The processes in nvidia-smi's QUERY_HOLDERS output (none: empty output)."""
    out = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.lower().startswith("no running processes"):
            continue
        f = [x.strip() for x in s.split(",")]
        pid = _int(f[0]) if len(f) >= 3 else None
        if pid is None:
            raise GpuAttachError(f"nvidia-smi {' '.join(QUERY_HOLDERS)} printed {s!r}, not "
                                 "pid, process name, used MiB")  # fmt: skip
        out.append(Holder(pid, ", ".join(f[1:-1]), _int(f[-1])))
    return out


def vllm_option(command: Sequence[str], *names: str) -> str | None:
    """The value of the first of ``names`` in ``command`` (``--x v``, ``--x=v``, ``--x_y``)."""
    for i, arg in enumerate(command):
        flag, eq, value = arg.partition("=")
        flag = "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag
        if flag in names:
            if eq:
                return value
            return command[i + 1] if i + 1 < len(command) else None
    return None


@dataclass(frozen=True, kw_only=True)
class Need:
    """What a target needs free on the GPU before it starts."""

    runtime: str
    utilization: float | None = None  # vLLM: this fraction of each card's total
    cards: int = 1  # vLLM: --tensor-parallel-size
    payload_bytes: int = 0  # llama.cpp: its weights, a lower bound
    unsized: int = 0  # payload files without a pinned size, not counted

    def mib(self, card: Card) -> int:
        if self.utilization is not None:
            return math.ceil(self.utilization * card.total_mib)
        return math.ceil(self.payload_bytes / MIB)


def vllm_rules_of(target: Target) -> Mapping[str, Any]:
    """The preflight rules of the target's ``VLLM_VERSION`` (its wheel's own facts)."""
    version = target.build_args.get("VLLM_VERSION")
    if not version:
        raise SmokeError(f"targets.{target.name}.build_args: no VLLM_VERSION, so vLLM's "
                         "defaults are unknown; pin it in the lock")  # fmt: skip
    return rules_for(version)


def need_of(target: Target, payloads: Mapping[str, Payload]) -> Need:
    """The target's need, from its serve command (vLLM) or its payload sizes (llama.cpp)."""
    cmd = target.serve.command
    where = f"targets.{target.name}.serve.command"
    if target.serve.runtime == "vllm":
        raw = vllm_option(cmd, "--gpu-memory-utilization")
        try:
            util = default_utilization(vllm_rules_of(target)) if raw is None else float(raw)
        except ValueError:
            util = math.nan
        if not 0 < util <= 1:
            raise SmokeError(f"{where}: --gpu-memory-utilization {raw!r} is not a fraction "
                             "0 < it <= 1, which vLLM needs; fix it in the lock")  # fmt: skip
        tp = vllm_option(cmd, "--tensor-parallel-size", "-tp") or "1"
        if not (tp.isascii() and tp.isdigit() and len(tp) <= 4) or int(tp) < 1:
            raise SmokeError(f"{where}: --tensor-parallel-size {tp!r} is not a count of GPUs")
        return Need(runtime="vllm", utilization=util, cards=int(tp))
    files = [f for name in target.payloads for f in payloads[name].files]
    return Need(runtime=target.serve.runtime, payload_bytes=sum(f.size or 0 for f in files),
                unsized=sum(f.size is None for f in files))  # fmt: skip


def verdicts(name: str, need: Need, cards: Sequence[Card]) -> list[tuple[bool, str]]:
    """(enough, what was compared) for each card the target uses, or the cards together."""
    if need.utilization is None:
        return [_weights_verdict(name, need, cards)]
    if len(cards) < need.cards:
        tp = f"--tensor-parallel-size {need.cards}"
        return [(False, f"{name} needs {need.cards} GPUs ({tp}), nvidia-smi lists {len(cards)}")]
    out = []
    for c in cards[: need.cards]:
        share = f"--gpu-memory-utilization {need.utilization:g} x {c.total_mib} MiB total"
        line = f"{c.label}: {c.free_mib} MiB free, {name} needs {need.mib(c)} MiB ({share})"
        out.append((c.free_mib >= need.mib(c), line))
    return out


def _weights_verdict(name: str, need: Need, cards: Sequence[Card]) -> tuple[bool, str]:
    """llama.cpp spreads its layers over every card it sees: their free memory together."""
    free = sum(c.free_mib for c in cards)
    indices = ", ".join(str(c.index) for c in cards)
    where = cards[0].label if len(cards) == 1 else f"GPUs {indices} together"
    mib = need.mib(cards[0])
    unsized = f"; {need.unsized} files without a pinned size not counted" if need.unsized else ""
    line = (
        f"{where}: {free} MiB free, {name} needs {mib} MiB at least (the sum of its payload "
        f"files, a lower bound: the KV cache and compute buffers come on top{unsized})"
    )
    return free >= mib, line


def shortage(name: str, need: Need, cards: Sequence[Card], holders: Sequence[Holder]) -> str | None:
    """The error for a target that would not fit now, or None when it does."""
    short = [line for enough, line in verdicts(name, need, cards) if not enough]
    if not short:
        return None
    why = (
        "vLLM measures free memory when it starts and refuses to start below that"
        if need.utilization is not None
        else "llama.cpp loads these weights onto the card before it serves"
    )
    if holders:
        held = "processes holding GPU memory (on any card):\n" + "\n".join(
            f"  pid {h.pid} {h.name}: "
            + (f"{h.used_mib} MiB" if h.used_mib is not None else "size unknown")
            for h in holders
        )
    else:
        held = ("nvidia-smi lists no process holding GPU memory (another user's or container's "
                "may be hidden from this one: run nvidia-smi as root to see them)")  # fmt: skip
    fix = "stop them (a production server on the card, or a smoke left running), or " + (
        f"lower --gpu-memory-utilization in targets.{name}.serve.command of the lock"
        if need.utilization is not None
        else "smoke on a card with more free memory"
    )
    return "\n".join([*short, f"{why}; not enough is free now.", held, f"fix: {fix}"])
