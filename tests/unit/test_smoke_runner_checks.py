"""A whole smoke_target run against a fake engine and a fake llama-server's counters.

No socket is opened: the HTTP calls of lockpipe.smoke.checks are replaced by a fake
server that keeps /metrics counters the way llama-server does, so what is measured
from which request can be checked exactly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lockpipe.errors import CheckFailed
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.model import Lock, load_lock
from lockpipe.preflight import config as preflight_config
from lockpipe.preflight import host, plan
from lockpipe.preflight.whatif import Overrides
from lockpipe.smoke import checks
from lockpipe.smoke.config import load_smoke
from lockpipe.smoke.gpucheck import gpu_gate
from lockpipe.smoke.probes import speculates
from lockpipe.smoke.report import CheckResult, SmokeReport
from lockpipe.smoke.runner import SmokeOptions, smoke_target
from tests import fake_engine
from tests.frank_small import turboquant

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
STORE = Path("/var/lib/lockpipe/payloads")
IMAGE = "sha256:" + "3" * 64
CPU_SHAPE = "kv=f16,ctx=8192,par=1"  # llama-cpu's serve entry in the lock
GENERATION = [{"prompt": "1, 2, 3, 4, 5,", "expect": ["6"], "max_tokens": 12}]


class FakeEngine(fake_engine.FakeEngine):
    """The shared fake, running the one image every record here names."""

    def __init__(self, *, running: bool = True) -> None:
        super().__init__(IMAGE, running=running)


class FakeLlama:
    """llama-server's counters: each completion adds its tokens, drafts and accepted drafts.

    ``short`` and ``long`` are the acceptance (tokens per verification step) of requests
    below and from 256 max_tokens: a 12-token answer to "1, 2, 3," drafts far better than
    a long continuation, which is why acceptance is judged only over a long run.
    ``stop_at`` caps what a request generates (a server that ends at EOS).
    """

    def __init__(self, *, short: float, long: float, stop_at: int = 100_000) -> None:
        self.short, self.long, self.stop_at = short, long, stop_at
        self.tokens = self.drafts = self.accepted = 0.0
        self.requests: list[tuple[int, bool]] = []  # (max_tokens, ignore_eos)

    def complete(self, base: str, model: str, prompt: str, max_tokens: int = 16,
                 *, ignore_eos: bool = False) -> checks.Generation:  # fmt: skip
        self.requests.append((max_tokens, ignore_eos))
        n = min(max_tokens, self.stop_at)
        rate = self.short if max_tokens < 256 else self.long
        steps = n / rate
        self.tokens += n
        self.drafts += steps
        self.accepted += n - steps
        text = " 6, 7, 8, 9," if prompt.startswith("1, 2, 3") else " and so on" * (n // 3)
        return checks.Generation(text=text, prompt_tokens=len(prompt.split()),
                                 completion_tokens=n, seconds=n / 50)  # fmt: skip

    def metrics_text(self, base: str) -> str:
        return "\n".join([
            "# TYPE llamacpp:prompt_tokens_total counter",
            "llamacpp:prompt_tokens_total 40",
            "llamacpp:prompt_seconds_total 0.5",
            f"llamacpp:tokens_predicted_total {self.tokens}",
            f"llamacpp:tokens_predicted_seconds_total {self.tokens / 50}",
            f"llamacpp:spec_decode_num_drafts_total {self.drafts}",
            f"llamacpp:spec_decode_num_draft_tokens_total {self.drafts * 4}",
            f"llamacpp:spec_decode_num_accepted_tokens_total {self.accepted}",
        ]) + "\n"  # fmt: skip


@pytest.fixture
def state(tmp_path: Path) -> Path:
    for name in ("llama-cpu", "llama-cuda", "frank-small"):
        key = build_key(plan_target(LOCK, name), FakeEngine.name, "5.0")
        write_record(tmp_path / "state", BuildRecord(
            target=name, tag=LOCK.target(name).tag, key=key, image_id=IMAGE,
            engine=FakeEngine.name, engine_version="5.0", reproducible=True,
            reproducible_how="fake", fingerprint="f", source_date_epoch=0, built_at="now",
            seconds=0.0,
        ))  # fmt: skip
    return tmp_path / "state"


def serve(monkeypatch: pytest.MonkeyPatch, server: FakeLlama) -> None:
    monkeypatch.setattr(checks, "wait_ready", lambda base, deadline, exited: 0.1)
    monkeypatch.setattr(checks, "model_ids", lambda base: ["gemma-4-12b"])
    monkeypatch.setattr(checks, "complete", server.complete)
    monkeypatch.setattr(checks, "metrics_text", server.metrics_text)


def expectations(tmp_path: Path, probes: dict[str, object]) -> Path:
    target = {"ready_seconds": 60, "generation": GENERATION, "probes": probes}
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"llama-cpu": target}}))
    return path


def smoke(tmp_path: Path, state: Path, expect: Path, engine: FakeEngine, name: str = "llama-cpu",
          lock: Lock = LOCK, **options: object) -> SmokeReport:  # fmt: skip
    spec = load_smoke(expect)[name] if expect.is_file() else load_smoke(
        REPO / "locks" / "smoke.json")[name]  # fmt: skip
    paths = {p: STORE / p / "f" for p in lock.target(name).payloads}
    o = SmokeOptions(store=STORE, state=state, out=tmp_path / "out", **options)  # type: ignore[arg-type]
    return smoke_target(lock, name, spec, engine, paths, o)


def row(report: SmokeReport, name: str) -> CheckResult:
    return next(r for r in report.results if r.name == name)


ACCEPT = {"accept": {"value": 2.8, "unit": "tokens/step", "tolerance": 0.1}}  # floor 2.52


def test_acceptance_is_judged_over_its_own_long_run_not_the_short_answers(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeLlama(short=4.0, long=2.0)  # the 12-token answers alone would pass
    serve(monkeypatch, server)
    report = smoke(tmp_path, state, expectations(tmp_path, {CPU_SHAPE: ACCEPT}), FakeEngine())
    accept = row(report, "spec-decode acceptance")
    assert not accept.ok
    assert "accept: 2.00, below 2.52 (baseline 2.8 minus tolerance)" in accept.detail
    assert CPU_SHAPE in accept.detail and accept.shape == CPU_SHAPE
    long_runs = [r for r in server.requests if r[0] >= 256]
    assert long_runs == [(long_runs[0][0], True)], "one dedicated run, EOS ignored"


def test_acceptance_within_its_floor_passes_with_the_run_s_figures(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, FakeLlama(short=1.5, long=3.0))  # the short answers alone would fail
    report = smoke(tmp_path, state, expectations(tmp_path, {CPU_SHAPE: ACCEPT}), FakeEngine())
    accept = row(report, "spec-decode acceptance")
    assert accept.ok, accept.detail
    assert accept.measured["accept"] == pytest.approx(3.0)
    assert accept.measured["generated tokens"] >= 256
    assert accept.unjudged == () and "within tolerance" in accept.detail
    assert "acceptance" not in row(report, "metrics counters").measured


def test_acceptance_is_not_judged_over_fewer_than_256_tokens(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, FakeLlama(short=4.0, long=4.0, stop_at=100))  # stops at EOS
    report = smoke(tmp_path, state, expectations(tmp_path, {CPU_SHAPE: ACCEPT}), FakeEngine())
    accept = row(report, "spec-decode acceptance")
    assert not accept.ok
    assert "at least 256 generated tokens" in accept.detail
    assert "counted 100" in accept.detail


def test_a_shape_without_baseline_reports_its_figures_and_passes(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock serves f16 KV; the only baseline was measured in bf16: it must not judge."""
    serve(monkeypatch, FakeLlama(short=1.2, long=1.2))  # far below the bf16 floor
    bf16 = "kv=bf16,ctx=8192,par=1"
    report = smoke(tmp_path, state, expectations(tmp_path, {bf16: ACCEPT}), FakeEngine())
    accept = row(report, "spec-decode acceptance")
    assert accept.ok and accept.status == "PASS"
    assert accept.detail.startswith(f"no baseline for {CPU_SHAPE}")
    assert accept.unjudged == ("accept",) and accept.shape == CPU_SHAPE
    assert accept.measured["accept"] == pytest.approx(1.2)


def test_without_an_accept_probe_there_is_no_long_run(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeLlama(short=4.0, long=2.0)
    serve(monkeypatch, server)
    report = smoke(tmp_path, state, expectations(tmp_path, {CPU_SHAPE: {}}), FakeEngine())
    assert report.ok, [r for r in report.results if not r.ok]
    assert "spec-decode acceptance" not in {r.name for r in report.results}
    assert all(max_tokens < 256 for max_tokens, _ in server.requests)


def test_the_report_records_the_store_the_container_mounted(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy mounts the same store: smoke.json keeps it with the result."""
    serve(monkeypatch, FakeLlama(short=4.0, long=2.0))
    report = smoke(tmp_path, state, expectations(tmp_path, {CPU_SHAPE: {}}), FakeEngine())
    assert report.store == STORE


FAKE_SMI = """#!/bin/sh
# FAKE nvidia-smi for tests: one idle RTX 3090, no process holding memory.
case "$1" in
  --query-gpu=name,memory.total,memory.free,compute_cap,driver_version)
    echo "NVIDIA GeForce RTX 3090, 24576, 24244, 8.6, 610.57.04" ;;
  --query-gpu=*) echo "0, NVIDIA GeForce RTX 3090, 24576, 1, 24244, 8.6" ;;
  --query-compute-apps=*) ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
"""


@pytest.fixture
def fake_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "fake-nvidia-smi"
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(FAKE_SMI)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return script


def test_a_gpu_smoke_takes_a_free_host_port_not_production_s(
    tmp_path: Path, state: Path, fake_nvidia_smi: Path
) -> None:
    """llama-cuda serves on 7771 in the container, as frank-small does in production on the
    host: a --gpu smoke that bound 7771 on the host would collide with it (or wait for it)."""
    engine = FakeEngine(running=False)  # exits at once: only the start matters here
    smoke(tmp_path, state, tmp_path / "none.json", engine, name="llama-cuda", gpu=True,
          port_timeout=0.0)  # fmt: skip
    ((inside, host),) = engine.specs[0].ports.items()
    assert inside == 7771 and host != 7771
    assert engine.specs[0].devices == ("nvidia.com/gpu=all",)
    assert engine.stopped == ["container-1"]


@pytest.mark.parametrize("gpu", [True, False])
def test_port_names_the_host_port_with_or_without_gpu(
    tmp_path: Path, state: Path, fake_nvidia_smi: Path, gpu: bool
) -> None:
    engine = FakeEngine(running=False)
    smoke(tmp_path, state, tmp_path / "none.json", engine, name="llama-cuda" if gpu else
          "llama-cpu", gpu=gpu, port=17771, port_timeout=0.0)  # fmt: skip
    assert list(engine.specs[0].ports.values()) == [17771]


def test_a_gpu_smoke_of_the_cpu_target_asks_for_no_gpu(tmp_path: Path, state: Path) -> None:
    """issue 19: `smoke --gpu` runs llama-cpu as without --gpu: no CDI device, no nvidia-smi
    (none is on PATH here, so a gate or an attach would fail)."""
    engine = FakeEngine(running=False)
    smoke(tmp_path, state, tmp_path / "none.json", engine, name="llama-cpu", gpu=True,
          port=17772, port_timeout=0.0)  # fmt: skip
    assert engine.specs[0].devices == ()
    assert engine.specs[0].device_requests == ()


class FakeLlamaB10069(FakeLlama):
    """The pinned b10069: no spec-decode counters in /metrics; the answer's ``timings``
    carry ``draft_n``/``draft_n_accepted`` (tools/server/server-task.cpp:255-258)."""

    def complete(self, base: str, model: str, prompt: str, max_tokens: int = 16,
                 *, ignore_eos: bool = False) -> checks.Generation:  # fmt: skip
        out = super().complete(base, model, prompt, max_tokens, ignore_eos=ignore_eos)
        n = out.completion_tokens
        steps = round(n / (self.short if max_tokens < 256 else self.long))
        accepted = n - 1 - steps  # every pass drafted: steps = predicted_n - 1 - accepted
        timings = {"predicted_n": n, "draft_n": steps * 4, "draft_n_accepted": accepted}
        return checks.Generation(text=out.text, prompt_tokens=out.prompt_tokens,
                                 completion_tokens=n, seconds=out.seconds,
                                 timings=timings)  # fmt: skip

    def metrics_text(self, base: str) -> str:
        return (
            "\n".join(
                line
                for line in super().metrics_text(base).splitlines()
                if "spec_decode" not in line
            )
            + "\n"
        )


def test_acceptance_on_b10069_comes_from_the_answer_s_timings(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, FakeLlamaB10069(short=1.5, long=3.2))
    report = smoke(tmp_path, state, expectations(tmp_path, {CPU_SHAPE: ACCEPT}), FakeEngine())
    accept = row(report, "spec-decode acceptance")
    assert accept.ok, accept.detail
    assert accept.measured["accept"] == pytest.approx(3.2, abs=0.05)
    assert "from the answer's timings" in accept.detail


def test_a_gpu_smoke_runs_preflight_first_and_a_failing_shape_never_starts(
    tmp_path: Path, state: Path, fake_nvidia_smi: Path
) -> None:
    """frank-small in the seeds' TurboQuant shape: vLLM 0.29.0's TURBOQUANT backend cannot
    serve Gemma 4's sliding layers (docs/preflight.md), so the container would crash-loop on
    the 3090. The gate runs before any payload is fetched or container started
    (cli/serve.py); the lock's own bf16 shape passes it."""
    with pytest.raises(CheckFailed) as info:
        gpu_gate(turboquant(LOCK), "frank-small", gpu=True, store=STORE)
    text = str(info.value)
    assert "preflight on NVIDIA GeForce RTX 3090" in text and "TURBOQUANT" in text
    assert "lockpipe preflight frank-small" in text
    gpu_gate(
        LOCK, "llama-cuda", gpu=True, store=STORE
    )  # the calibrated 3090 shape passes, and memory is free
    gpu_gate(LOCK, "frank-small", gpu=True, store=STORE)  # the lock's bf16 shape passes
    gpu_gate(turboquant(LOCK), "frank-small", gpu=False, store=STORE)  # no --gpu: no judging


def test_a_target_that_drafts_has_its_acceptance_measured_without_a_probe(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-cuda serves with --spec-type draft-mtp,ngram-mod: acceptance is measured and
    reported even though locks/smoke.json has no baseline for it."""
    assert speculates(LOCK.target("llama-cuda").serve.command)
    assert not speculates(LOCK.target("llama-cpu").serve.command)
    assert speculates(["vllm", "serve", "--speculative-config={}"])
    serve(monkeypatch, FakeLlamaB10069(short=1.5, long=3.2))
    shape = "kv=q8_0,ctx=default,par=1"
    target = {"ready_seconds": 60, "generation": GENERATION, "probes": {shape: {}}}
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"llama-cuda": target}}))
    report = smoke(tmp_path, state, path, FakeEngine(), name="llama-cuda")
    accept = row(report, "spec-decode acceptance")
    assert accept.ok and accept.unjudged == ("accept",)
    assert accept.measured["accept"] == pytest.approx(3.2, abs=0.05)


def test_an_old_driver_alone_warns_and_a_direct_caller_is_gated_too(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Driver 560 is older than CUDA 12.9.1 asks (575.57.08): preflight fails on it alone.
    podman's CDI and manual modes do not enforce NVIDIA_REQUIRE_CUDA, so the gate warns."""
    folder = tmp_path / "old-driver"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_SMI.replace("610.57.04", "560.28.03"))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    card = host.query_host()
    report = plan.evaluate(LOCK, preflight_config.load(REPO / "locks" / "preflight.json"),
                           LOCK.target("llama-cuda"), card, None, Overrides())  # fmt: skip
    assert [c.name for c in report.checks if c.status == "fail"] == ["driver"]
    gpu_gate(LOCK, "llama-cuda", gpu=True, store=STORE)  # a warning, not a refusal
    with pytest.raises(CheckFailed, match="driver"):  # docker --gpus enforces it: refused
        gpu_gate(LOCK, "llama-cuda", gpu=True, store=STORE, gpu_mode="docker-gpus")
    engine = FakeEngine(running=False)
    with pytest.raises(CheckFailed, match="TURBOQUANT"):  # smoke_target gates on its own
        smoke(tmp_path, state, tmp_path / "none.json", engine, name="frank-small", gpu=True,
              port_timeout=0.0, lock=turboquant(LOCK))  # fmt: skip
    assert engine.specs == []
