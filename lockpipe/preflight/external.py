"""Preflight of an external image (frank-large): what the lock can say, and UNKNOWN; pure."""

from __future__ import annotations

from lockpipe.lock.model import Target
from lockpipe.preflight.verdict import Check, Figure, TargetReport, checked


def external_report(target: Target) -> TargetReport:
    """An image built elsewhere (frank-large): its slot grid from the lock, and UNKNOWN.

    Its model, KV dtype and runtime rules live in an image this repository never sees,
    so the one thing preflight can judge is that the window it is told to serve
    (``HALOGEN_CTX``, when the env sets it) is the one the lock declares per slot.
    """
    serve, ext = target.serve, target.external
    assert ext is not None, target.name
    checks = []
    ctx, slots = serve.env.get("HALOGEN_CTX"), serve.parallel or 1
    if ctx is not None and serve.context:
        checks.append(
            checked(
                "slot-grid",
                None
                if ctx == str(serve.context)
                else f"HALOGEN_CTX={ctx}, but serve.context (each slot's window) is "
                f"{serve.context}",
                f"{slots} slot(s) x {serve.context:,} = {slots * serve.context:,} positions",
                "make serve.env.HALOGEN_CTX and serve.context the same window",
            )
        )
    checks.append(
        Check(
            name="model-shape",
            status="unknown",
            detail=f"an external image ({ext.image}), built elsewhere: its model and KV "
            "layout are not in the lock, so no memory figure can be computed",
            fix="measure it on its host (nvidia-smi with the slots idle) and record it",
        )
    )
    return TargetReport(
        target=target.name,
        runtime=serve.runtime,
        card="its host's",
        figures=(Figure(name="image", value=ext.image, note=ext.digest or "digest UNPINNED"),),
        checks=tuple(checks),
        numbers={"slots": slots, "slot_window": serve.context},
    )
