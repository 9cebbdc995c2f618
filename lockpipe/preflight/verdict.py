"""What preflight says about one target: checks (each with its fix) and figures; pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# "unknown": a figure preflight needs (the model's shape) is not known, so nothing was
# judged; it is not a pass, and --strict fails on it as on a warning.
Status = Literal["pass", "warn", "unknown", "fail"]
MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str | None = None


@dataclass(frozen=True, kw_only=True)
class Figure:
    """One row of a target's table: a quantity, its value and how it was reached."""

    name: str
    value: str
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class TargetReport:
    target: str
    runtime: str
    card: str
    figures: tuple[Figure, ...]
    checks: tuple[Check, ...]
    numbers: Mapping[str, Any] = field(default_factory=dict)  # for --json

    @property
    def verdict(self) -> Status:
        states = {c.status for c in self.checks}
        return next((s for s in ("fail", "unknown", "warn") if s in states), "pass")

    @property
    def reasons(self) -> list[str]:
        worst = self.verdict
        return [c.detail for c in self.checks if c.status == worst and worst != "pass"]

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.target, "runtime": self.runtime, "card": self.card,
            "verdict": self.verdict,
            "figures": [{"name": f.name, "value": f.value, "note": f.note} for f in self.figures],
            "checks": [
                {"name": c.name, "status": c.status, "detail": c.detail, "fix": c.fix}
                for c in self.checks
            ],
            "numbers": dict(self.numbers),
        }  # fmt: skip


def mib(n_bytes: float) -> str:
    """Bytes as MiB with thousands separators, the unit nvidia-smi and the seeds use."""
    return f"{n_bytes / MIB:,.0f} MiB"


def checked(name: str, problem: str | None, ok: str, fix: str | None = None) -> Check:
    """A pass with ``ok`` when ``problem`` is None, else a fail carrying it and ``fix``."""
    if problem is None:
        return Check(name=name, status="pass", detail=ok)
    return Check(name=name, status="fail", detail=problem, fix=fix)
