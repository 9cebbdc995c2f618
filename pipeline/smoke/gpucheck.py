"""Before a --gpu smoke starts its container: ask nvidia-smi whether the target fits now."""

from __future__ import annotations

from pipeline.errors import GpuAttachError
from pipeline.lock.model import Lock, Target
from pipeline.preflight.host import nvidia_smi
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


def read_gpus() -> tuple[list[Card], list[Holder]]:
    """The cards and the processes holding their memory, as nvidia-smi reports them now."""
    otherwise = "run the smoke without --gpu"
    return (
        parse_cards(nvidia_smi(QUERY_CARDS, otherwise=otherwise)),
        parse_holders(nvidia_smi(QUERY_HOLDERS, otherwise=otherwise)),
    )


def ensure_gpu_memory(lock: Lock, target: Target) -> str:
    """A line saying what fits; GpuAttachError naming card, figures and holders if not."""
    cards, holders = read_gpus()
    need = need_of(target, lock.payloads)
    message = shortage(target.name, need, cards, holders)
    if message is not None:
        raise GpuAttachError(message)
    return "; ".join(line for _, line in verdicts(target.name, need, cards))
