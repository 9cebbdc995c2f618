"""Prove reproducibility: a build as ``build`` makes it (the engine's cache allowed) and a
clean one (no cache), compared.

Both are built under a scratch tag and neither is recorded: the build record,
the tag and the provenance of the image the user built stay as they were.

When the two image IDs differ, say why: the first layer whose bytes differ
(a step that writes timestamps, random names or build paths), or, with every
layer equal, the image config (creation times, history). The file-level
explanation (which files, which known cause, which fix) reads both images and
lives a layer up, in ``lockpipe.verify.reproduce``, which the CLI calls.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from lockpipe.engines.base import Engine
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.run import Settings, build_key, run_build
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import Lock
from lockpipe.log import step


@dataclass(frozen=True, kw_only=True)
class Reproduction:
    target: str
    engine: str
    first: str
    second: str
    why: str  # empty when both builds gave the same image

    @property
    def same(self) -> bool:
        return self.first == self.second

    def __str__(self) -> str:
        if self.same:
            return (
                f"{self.target}: reproducible with {self.engine}: a cached build and a clean "
                f"build both gave {self.first}"
            )
        return (
            f"{self.target}: NOT reproducible with {self.engine}: the cached build gave "
            f"{self.first}, the clean build {self.second}; {self.why}"
        )


def layer_difference(first: Sequence[str], second: Sequence[str]) -> str:
    """Where two images' layers first differ, in words."""
    if len(first) != len(second):
        return f"the builds made {len(first)} and {len(second)} layers"
    for number, (a, b) in enumerate(zip(first, second, strict=True), 1):
        if a != b:
            return (
                f"layer {number} of {len(first)} differs ({a[:19]} vs {b[:19]}): the step "
                "that made it writes different bytes each time (file times, random names, "
                "build paths)"
            )
    return "every layer is identical: the image config differs (creation times or history)"


def next_second(clock: Callable[[], float] = time.time,
                sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
    """Wait into the next wall-clock second. Layer tars keep whole-second mtimes, so two
    fast builds inside one second agree even where the engine clamps nothing (measured:
    dockerd 26.1.5, 5 of 11 runs): a "reproducible" must never come from luck."""
    sleep(1.0 - clock() % 1.0 + 0.05)


def scratch_tag(target: str, what: str) -> str:
    """The tag a check's build goes under, so the user's tag keeps naming the user's image."""
    return f"localhost/lockpipe-check/{target}:{what}"


def reproduce_target(lock: Lock, name: str, engine: Engine, s: Settings) -> Reproduction:
    """A cached build and a clean build of ``name``, compared; nothing recorded, no tag moved."""
    check_drift(lock, lock.target(name))
    plan = plan_target(lock, name)
    key = build_key(plan, engine.name, engine.version())
    with step(f"reproduce {name} with {engine.name}: build 1 of 2, the engine's cache allowed"):
        first = run_build(engine, replace(plan, tag=scratch_tag(name, "cached")), key, s)
    next_second()
    with step(f"reproduce {name} with {engine.name}: build 2 of 2, no cache"):
        clean = replace(plan, tag=scratch_tag(name, "clean"))
        second = run_build(engine, clean, key, s, no_cache=True)
    why = ""
    if first.image_id != second.image_id:
        why = layer_difference(engine.layers(first.image_id), engine.layers(second.image_id))
        if not second.reproducible:
            why += f"; the engine says so: {second.reproducible_how}"
    return Reproduction(
        target=name, engine=engine.name, first=first.image_id, second=second.image_id, why=why
    )
