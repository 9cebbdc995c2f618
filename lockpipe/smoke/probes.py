"""The measured probes of a smoke run: spec-decode acceptance and throughput, from counters.

Each probe runs its own request and reads the /metrics counters just before and after
it, so its figure covers that request alone. Figures are judged against the baselines
of the run's serving shape (:mod:`lockpipe.smoke.shape`) only; a shape nobody measured
yet has its figures reported, marked "no baseline", and passes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from lockpipe.errors import CheckFailed
from lockpipe.lock.llama_argv import option
from lockpipe.smoke import checks, metrics
from lockpipe.smoke.metrics import Probe

# Acceptance is a ratio over verification steps: a dozen tokens are three or four steps,
# noise (one drafter already spans 2.80-3.56 in the seeds), so it is judged over no fewer.
ACCEPT_MIN_TOKENS = 256
ACCEPT_MAX_TOKENS = 320  # asked for, EOS ignored: a margin over the minimum
# Plain prose to continue, at temperature 0: neither a list that any drafter guesses
# nor a chat turn that ends early.
ACCEPT_PROMPT = (
    "Chapter One\n\nThe lighthouse keeper had followed the same routine for thirty years. "
    "Every morning he climbed the one hundred and twelve steps of the tower, polished the "
    "great lens until it shone, wrote the wind and the weather into his logbook, and then"
)


@dataclass(frozen=True)
class Server:
    """The running server a probe talks to."""

    base: str
    model: str
    runtime: str

    def scrape(self) -> metrics.Samples:
        return metrics.parse(checks.metrics_text(self.base))


@dataclass(frozen=True, kw_only=True)
class Judged:
    """A probe check that passed: what it measured, and in which shape it was judged."""

    detail: str
    measured: Mapping[str, float]
    shape: str
    unjudged: tuple[str, ...] = ()  # measured, but this shape has no baseline for them


class BaselineMiss(CheckFailed):
    """A measured figure below its baseline's floor, in the run's serving shape."""

    def __init__(self, message: str, shape: str, measured: Mapping[str, float]) -> None:
        super().__init__(message)
        self.shape, self.measured = shape, dict(measured)


def judge(
    measured: Mapping[str, float | None],
    names: Sequence[str],
    baseline: Mapping[str, Probe] | None,
    shape: str,
    note: str = "",
) -> Judged:
    """``measured`` against the baselines of ``shape``; BaselineMiss when one falls short.

    A probe in ``names`` the shape has no baseline for is reported, not judged.
    """
    base = baseline or {}
    wanted = {n: base[n] for n in names if n in base}
    unjudged = tuple(n for n in names if n not in base)
    got = {k: v for k, v in measured.items() if v is not None}
    shown = {k: round(v, 2) for k, v in got.items()}
    tail = f"; {note}" if note else ""
    bad = metrics.compare(got, wanted, require_all=True)
    if bad:
        raise BaselineMiss(f"{'; '.join(map(str, bad))} [{shape} baselines]{tail}", shape, shown)
    if not wanted:
        detail = (f"no baseline for {shape}: figures reported, not judged (measured in "
                  f'this shape, they belong under "probes": {{"{shape}": …}})')  # fmt: skip
    else:
        detail = f"within tolerance of the {shape} baselines"
        if unjudged:
            detail += f"; no baseline for {', '.join(unjudged)}"
    return Judged(detail=detail + tail, measured=shown, shape=shape, unjudged=unjudged)


# Flags that make a server draft tokens (llama-server: b10069 common/arg.cpp; vLLM: its
# engine arguments). Without one there is nothing to accept.
SPEC_FLAGS = ("--spec-type", "--spec-draft-model", "-md", "--model-draft", "--spec-draft-hf",
              "-hfd", "-hfrd", "--hf-repo-draft", "--speculative-config")  # fmt: skip


def speculates(command: Sequence[str]) -> bool:
    """Whether ``command`` makes the server speculate, so acceptance is worth measuring."""
    # a -- name's _ is - to both servers (llama.cpp's arg.cpp: llama_argv; vLLM's argparse)
    return any(option(t.split("=", 1)[0]) in SPEC_FLAGS for t in command)


def acceptance(server: Server, baseline: Mapping[str, Probe] | None, shape: str) -> Judged:
    """Mean acceptance length over one long deterministic generation of its own.

    CheckFailed when the counters saw fewer than ACCEPT_MIN_TOKENS generated: too few
    verification steps to tell a working drafter from a broken one.
    """
    before = server.scrape()
    out = checks.complete(server.base, server.model, ACCEPT_PROMPT, ACCEPT_MAX_TOKENS,
                          ignore_eos=True)  # fmt: skip
    d = metrics.delta(before, server.scrape())
    generated = metrics.throughput(d, server.runtime).gen_tokens
    if generated < ACCEPT_MIN_TOKENS:
        raise CheckFailed(
            f"acceptance is judged over at least {ACCEPT_MIN_TOKENS} generated tokens; /metrics "
            f"counted {generated:g} for the acceptance run (asked {ACCEPT_MAX_TOKENS} with EOS "
            f"ignored; the answer reported {out.completion_tokens}). Fix: let the server "
            f"generate them (ignore_eos honoured, a context that holds the prompt plus "
            f"{ACCEPT_MAX_TOKENS} tokens)"
        )
    value = metrics.spec_decode_acceptance(d, server.runtime)
    note = "" if value is not None else (
        f"/metrics counted no verified drafts over {generated:g} generated tokens: the server "
        "did not speculate (check its draft model or --speculative-config)"
    )  # fmt: skip
    from_timings = metrics.timings_acceptance(out.timings) if value is None else None
    if from_timings is not None:  # b10069: no spec-decode counters, but the answer has them
        value = from_timings.mean_len
        note = (f"from the answer's timings ({from_timings.accepted} of {from_timings.drafted} "
                "drafted tokens accepted; this llama.cpp's /metrics has no spec-decode "
                "counters): a lower bound where some passes drafted nothing")  # fmt: skip
    judged = judge({"accept": value}, ["accept"], baseline, shape, note)
    return replace(judged, measured={**judged.measured, "generated tokens": generated})


def throughput(
    server: Server, names: Sequence[str], baseline: Mapping[str, Probe] | None, shape: str
) -> Judged:
    """Each ``pp@N`` / ``tg@N`` probe as one streamed request, rated from the counters."""
    measured: dict[str, float | None] = {}
    for name in names:
        kind, size = metrics.probe_tokens(name)
        before = server.scrape()
        # A fresh prefix per probe: a prefix-cache hit would not count as prefill work.
        prompt = f"{time.time_ns()} " + "the " * (size or 512)
        checks.stream_timing(server.base, server.model, prompt, 1 if kind == "pp" else 128)
        tp = metrics.throughput(metrics.delta(before, server.scrape()), server.runtime)
        measured[name] = tp.pp if kind == "pp" else tp.tg
    return judge(measured, names, baseline, shape)
