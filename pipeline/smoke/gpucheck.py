"""Before a --gpu smoke starts its container: ask nvidia-smi whether the target fits now."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.cmd import call
from pipeline.errors import EngineError, EngineMissing, GpuAttachError
from pipeline.lock.model import Lock, Target
from pipeline.smoke.gpumem import (
    QUERY_CARDS,
    QUERY_HOLDERS,
    Card,
    Holder,
    need_of,
    parse_cards,
    parse_holders,
    shortage,
    verdicts,
)


def nvidia_smi(args: Sequence[str]) -> str:
    """nvidia-smi's output for ``args``, through pipeline.cmd; GpuAttachError when it fails."""
    try:
        return call(["nvidia-smi", *args], quiet=True)
    except EngineMissing:
        raise GpuAttachError(
            "nvidia-smi is not on PATH: this host has no NVIDIA driver tools, so a --gpu smoke "
            "cannot run here. Fix: install the NVIDIA driver (nvidia-smi comes with it) until "
            "nvidia-smi lists the card, or run the smoke without --gpu"
        ) from None
    except EngineError as exc:
        raise GpuAttachError(
            f"nvidia-smi failed, so the GPU's free memory is unknown: {exc}\n"
            "fix: load the NVIDIA driver until nvidia-smi works on this host"
        ) from None


def read_gpus() -> tuple[list[Card], list[Holder]]:
    """The cards and the processes holding their memory, as nvidia-smi reports them now."""
    return parse_cards(nvidia_smi(QUERY_CARDS)), parse_holders(nvidia_smi(QUERY_HOLDERS))


def ensure_gpu_memory(lock: Lock, target: Target) -> str:
    """A line saying what fits; GpuAttachError naming card, figures and holders if not."""
    cards, holders = read_gpus()
    need = need_of(target, lock.payloads)
    message = shortage(target.name, need, cards, holders)
    if message is not None:
        raise GpuAttachError(message)
    return "; ".join(line for _, line in verdicts(target.name, need, cards))
