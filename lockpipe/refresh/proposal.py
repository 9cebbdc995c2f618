"""Proposed upgrades and their verdicts: plain frozen data, shared by the proposer
(:mod:`.propose`), the judge (:mod:`.judge`), the report and ``lockpipe upgrade``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ProposalKind = Literal["bases", "sources", "pip"]
# note: a fact the reviewer should read that neither breaks a target nor gains it anything
Status = Literal["pass", "fail", "warn", "unknown", "gain", "note"]


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One check of one target under the proposed version."""

    target: str
    check: str  # "preflight:backend", "serve-args", "llama-flags", "baselines", "metrics"
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True, kw_only=True)
class Proposal:
    """A newer version of one lock entry. Never applied by ``refresh-digests``:
    ``lockpipe upgrade NAME VERSION`` (:attr:`command`) applies it as a reviewed change."""

    kind: ProposalKind
    name: str  # the lock entry: bases.NAME, sources.NAME, pip.NAME
    pinned: str  # the tag or version pinned now: v0.29.0-cu129, b10069, 0.29.0
    version: str  # what is proposed: 0.33.0, b11434
    new: str  # the new reference: vllm/vllm-openai:v0.33.0-cu129, the tag, vllm==0.33.0
    targets: tuple[str, ...]  # the targets it touches
    first_seen: str | None = None  # ISO UTC, from the first-seen record
    held: str | None = None  # why --min-age holds it back; None: proposed
    also: tuple[str, ...] = ()  # what moves with it (the pip side, a build arg)
    verdicts: tuple[Verdict, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.kind}.{self.name}"

    @property
    def command(self) -> str:
        return f"lockpipe upgrade {self.name} {self.version}"

    @property
    def breaks(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.status == "fail")

    @property
    def summary(self) -> str:
        """``every target would start``, or which would not and on which checks."""
        if self.held:
            return f"held: {self.held}"
        broken = dict.fromkeys(v.target for v in self.breaks)
        if broken:
            return "would break " + ", ".join(
                f"{t} ({', '.join(v.check for v in self.breaks if v.target == t)})" for t in broken
            )
        if any(v.status == "unknown" for v in self.verdicts):
            return "not fully judged: " + ", ".join(
                dict.fromkeys(
                    f"{v.target} ({v.check})" for v in self.verdicts if v.status == "unknown"
                )
            )
        return "every affected target would start" if self.verdicts else "not judged"
