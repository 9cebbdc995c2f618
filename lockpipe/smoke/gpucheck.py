"""Before a --gpu smoke fetches payloads or starts its container (:func:`gpu_gate`):
preflight on the host's card, then ask nvidia-smi whether the target fits in the memory
free now. A shape that fails either would only crash-loop."""

from __future__ import annotations

from pathlib import Path

from lockpipe.engines.base import GpuMode
from lockpipe.errors import CheckFailed, GpuAttachError
from lockpipe.lock.model import Lock, Target
from lockpipe.log import echo
from lockpipe.preflight import config, host, plan
from lockpipe.preflight.host import nvidia_smi
from lockpipe.preflight.whatif import Overrides
from lockpipe.smoke.gpumem import (
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


def ensure_preflight(
    lock: Lock, target: Target, store: Path | None, *, driver_enforced: bool = False
) -> str:
    """Preflight of ``target`` on this host's card (the crash loops it catches by
    arithmetic); CheckFailed with its reasons and fixes when the verdict is FAIL.

    ``driver_enforced``: the container runtime refuses an image whose CUDA needs a newer
    driver (docker's ``--gpus``, through NVIDIA_REQUIRE_CUDA), so that check fails too;
    podman's CDI and manual modes do not, so alone it only warns there.
    """
    card = host.parse_smi(nvidia_smi(host.QUERY, otherwise="run the smoke without --gpu"))
    cfg = config.load(lock.path.parent / config.DEFAULT_NAME)
    config.check_names(cfg, targets=lock.targets, payloads=lock.payloads, lock=lock.path)
    shape = plan.model_shape(lock, cfg, target, store if store and store.is_dir() else None)
    report = plan.evaluate(lock, cfg, target, card, shape, Overrides())
    bad = [c for c in report.checks if c.status == "fail"]
    if [c.name for c in bad] == ["driver"] and not driver_enforced:  # alone, it may run
        echo(f"smoke {target.name}: warning: {bad[0].detail} (fix: {bad[0].fix}); podman's "
             "CDI and manual modes do not enforce the image's NVIDIA_REQUIRE_CUDA, so the "
             "smoke goes on", style="yellow")  # fmt: skip
    elif bad:
        reasons = "; ".join(f"{c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else "")
                            for c in bad)  # fmt: skip
        raise CheckFailed(
            f"{target.name}: preflight on {report.card} fails, so the smoke does not start: "
            f"{reasons}\nfix: `lockpipe preflight {target.name}` shows the whole table"
        )
    need = report.numbers.get("need_mib")
    tail = f", {need:,.0f} MiB planned" if isinstance(need, (int, float)) else ""
    verdict = "WARN" if bad else report.verdict.upper()
    return f"preflight {verdict} on {report.card}{tail}"


def needs_gpu(target: Target) -> bool:
    """vLLM targets, llama.cpp builds with CUDA and external images serve on a GPU only."""
    return target.serve.runtime == "vllm" or target.build_args.get("GGML_CUDA", "ON") != "OFF"


def gpu_gate(
    lock: Lock, name: str, *, gpu: bool, store: Path | None, gpu_mode: GpuMode = "cdi"
) -> None:
    """With ``gpu``, for a GPU target built here: :func:`ensure_preflight`, then
    :func:`ensure_gpu_memory`, each printing what it found."""
    target = lock.target(name)
    if gpu and needs_gpu(target) and target.external is None:
        enforced = gpu_mode == "docker-gpus"
        echo(f"smoke {name}: {ensure_preflight(lock, target, store, driver_enforced=enforced)}")
        echo(f"smoke {name}: {ensure_gpu_memory(lock, target)}")
