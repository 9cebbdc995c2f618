"""What each stage of a demo run proved, with its time: read from the stages' outputs, pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Proof:
    stage: str
    seconds: float
    proved: str


def smoke_summary(doc: Mapping[str, Any], target: str, image_id: str) -> str:
    """``N checks passed`` and the first completion, from smoke.json's entry for the image."""
    entries = [r for r in doc.get("reports", []) if r.get("target") == target
               and r.get("image_id") == image_id]  # fmt: skip
    if not entries:
        return f"smoke.json holds no run of {target} on {image_id[:19]}"
    results = entries[-1].get("results", [])
    passed = [r for r in results if r.get("status") == "PASS"]
    head = f"{len(passed)} of {len(results)} checks passed"
    answers = [str(r.get("detail", "")) for r in passed if str(r.get("name")).startswith("gen")]
    return f"{head}; {answers[0]}" if answers else head


def render(title: str, proofs: Sequence[Proof]) -> str:
    """A plain table: stage, seconds, what it proved; then the total."""
    width = max(len(p.stage) for p in proofs)
    lines = [title]
    for p in proofs:
        lines.append(f"  {p.stage:<{width}}  {p.seconds:7.1f} s  {p.proved}")
    total = sum(p.seconds for p in proofs)
    lines.append(f"  {'total':<{width}}  {total:7.1f} s")
    return "\n".join(lines)
