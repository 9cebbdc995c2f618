"""``reproduce``, explained: a cached and a clean build, and when they differ, why, down to
the file.

``lockpipe.imagebuild.reproduce`` builds twice and names the first differing layer;
it may not import this layer, so the explanation is added here: both images
are read from the engine's storage (under their scratch tags,
``localhost/lockpipe-check/TARGET:cached|clean``) and compared by
:func:`lockpipe.verify.explain.explain`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lockpipe.engines.base import Engine
from lockpipe.imagebuild.reproduce import Reproduction, reproduce_target
from lockpipe.imagebuild.run import Settings
from lockpipe.lock.model import Lock
from lockpipe.log import step
from lockpipe.verify.explain import Explanation, explain
from lockpipe.verify.tree import exported, source_for


@dataclass(frozen=True)
class Explained:
    reproduction: Reproduction
    explanation: Explanation | None  # None when both builds gave the same image

    @property
    def same(self) -> bool:
        return self.reproduction.same

    def __str__(self) -> str:
        if self.explanation is None:
            return str(self.reproduction)
        return f"{self.reproduction}\n{self.explanation.text()}"


def explain_images(engine: str, first: str, second: str) -> Explanation:
    """Two local images of ``engine`` (IDs or names), read and compared."""
    with (
        exported(source_for(engine, first)) as a,
        exported(source_for(engine, second)) as b,
    ):
        return explain(a, b)


def reproduce_and_explain(lock: Lock, name: str, engine: Engine, s: Settings) -> Explained:
    """``reproduce_target``, plus the file-level explanation when the two images differ."""
    result = reproduce_target(lock, name, engine, s)
    if result.same:
        return Explained(result, None)
    with step(f"explain {name}: {result.first[:19]} vs {result.second[:19]}"):
        return Explained(result, explain_images(engine.name, result.first, result.second))
