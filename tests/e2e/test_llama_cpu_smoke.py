"""``python -m lockpipe smoke`` on the built llama-cpu image, as a user runs it.

The payload (the real Gemma 3 270M GGUF) is fetched by the payload stage from
the loopback mirror into a fresh store, and the container serves it on the CPU.
Then each way an image can fail must fail clearly and leave nothing running.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import CheckFailed, PortError
from tests.e2e.conftest import BuiltLlama, Mirror
from tests.e2e.llama_cpu import GEMMA_URL, SERVE, llama_cpu_lock, reports, smoke_file
from tests.fixtures_gemma import GemmaFile
from tests.policy import scratch

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
# The test lock's serve entry sets no kv_dtype, context or parallel: baselines for its
# runs live under this serving shape key (lockpipe.smoke.shape).
SHAPE = "kv=default,ctx=default,par=default"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, mirror: Mirror,
          gemma3_270m_gguf: GemmaFile) -> Iterator[Path]:  # fmt: skip
    mirror.add(GEMMA_URL, gemma3_270m_gguf.path)
    with scratch(tmp_path_factory, "store") as store:
        yield store


def smoke(llama: BuiltLlama, mirror: Mirror, store: Path, out: Path, *extra: str,
          lock: Path | None = None, expect: Path | None = None,
          ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    expect = expect or smoke_file(out.parent / f"{out.name}-smoke.json")
    argv = [sys.executable, "-m", "lockpipe", "smoke", "llama-cpu", "--engine", "buildah",
            "--lock", str(lock or llama.lock), "--state", str(llama.state), "--store", str(store),
            "--mirror", mirror.url, "--expect", str(expect), "--out", str(out), "--quiet",
            *extra]  # fmt: skip
    return subprocess.run(argv, cwd=REPO, text=True, capture_output=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip


def leftover_containers() -> list[str]:
    out = subprocess.run(["podman", "ps", "--all", "--format", "{{.Names}}"],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return [n for n in out.split() if n.startswith("lockpipe-smoke-")]


def checks_of(out: Path) -> dict[str, dict[str, object]]:
    (report,) = reports(out)["reports"]
    return {c["name"]: c for c in report["results"]}


def test_smoke_serves_a_real_generation_on_cpu(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path
) -> None:
    result = smoke(llama_cpu, mirror, store, tmp_path / "out")
    assert result.returncode == 0, result.stderr[-3000:]
    checks = checks_of(tmp_path / "out")
    assert all(c["status"] in ("PASS", "SKIP") for c in checks.values()), checks
    assert "Paris" in str(checks["generation[0]"]["detail"])
    assert "6, 7, 8" in str(checks["generation[1]"]["detail"])
    assert checks["metrics counters"]["measured"]["tg t/s"] > 0  # type: ignore[index]
    assert checks["image digest"]["status"] == "PASS"
    assert (tmp_path / "out" / "smoke.junit.xml").is_file()
    assert "listening on http" in (tmp_path / "out" / "llama-cpu.log").read_text()
    assert leftover_containers() == []


@pytest.mark.parametrize(
    ("serve", "expected"),
    [
        (["llama-server", "-m", "/store/no-such-model.gguf", "--metrics"], "failed to load model"),
        ([*SERVE, "--no-such-flag"], "invalid argument"),
    ],
    ids=["wrong-model-path", "crash-at-boot"],
)
def test_a_server_that_exits_fails_fast_with_its_log(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path,
    serve: list[str], expected: str,
) -> None:  # fmt: skip
    lock = llama_cpu_lock(tmp_path / "repo", _bases(llama_cpu), serve)
    result = smoke(llama_cpu, mirror, store, tmp_path / "out", lock=lock)
    assert result.returncode == CheckFailed.return_code
    ready = checks_of(tmp_path / "out")["ready"]
    assert ready["status"] == "FAIL"
    assert "exited before it was ready: exit code" in str(ready["detail"])
    assert expected in str(ready["detail"]).lower()
    assert leftover_containers() == []


def test_a_taken_port_is_reported_with_its_holder(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = smoke(llama_cpu, mirror, store, tmp_path / "out", "--port", str(port),
                       "--port-timeout", "1")  # fmt: skip
    assert result.returncode == PortError.return_code
    assert f"port {port} is still in use" in result.stderr
    assert "LISTEN" in result.stderr and f"pid {os.getpid()} (" in result.stderr  # us, the holder
    assert "Traceback" not in result.stderr
    assert leftover_containers() == []


def test_a_wrong_answer_fails_the_generation_check(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path
) -> None:
    expect = tmp_path / "strict.json"
    smoke_file(expect, [{"prompt": "The Eiffel Tower is in the city of", "expect": ["Berlin"]}])
    result = smoke(llama_cpu, mirror, store, tmp_path / "out", expect=expect)
    assert result.returncode == CheckFailed.return_code
    gen = checks_of(tmp_path / "out")["generation[0]"]
    assert gen["status"] == "FAIL"
    assert "expected ['Berlin']" in str(gen["detail"]) and "Paris" in str(gen["detail"])
    assert leftover_containers() == []


def _bases(llama: BuiltLlama) -> dict[str, tuple[str, str]]:
    doc = json.loads(llama.lock.read_text())
    return {n: (b["ref"], b["digest"]) for n, b in doc["bases"].items()}


def test_a_server_without_metrics_fails_that_check_and_still_answers(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path
) -> None:
    serve = [arg for arg in SERVE if arg != "--metrics"]
    lock = llama_cpu_lock(tmp_path / "repo", _bases(llama_cpu), serve)
    result = smoke(llama_cpu, mirror, store, tmp_path / "out", lock=lock)
    assert result.returncode == CheckFailed.return_code
    checks = checks_of(tmp_path / "out")
    assert checks["metrics"]["status"] == "FAIL"
    assert "llama-server needs --metrics" in str(checks["metrics"]["detail"])
    assert checks["generation[0]"]["status"] == "PASS"
    assert "metrics counters" not in checks
    assert leftover_containers() == []


def test_spec_decode_acceptance_and_throughput_probes_are_measured_on_the_pinned_tree(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path
) -> None:
    """The model drafts for itself, so every draft token is accepted: acceptance is real
    and high. The probe floors are low on purpose: this checks that the probes measure
    (on the CPU), not how fast; the GPU baselines live in locks/smoke.json."""
    serve = [*SERVE, "--model-draft", "{payload:gemma-3-270m}", "--spec-type", "draft-simple",
             "--parallel", "1"]  # fmt: skip
    lock = llama_cpu_lock(tmp_path / "repo", _bases(llama_cpu), serve)
    probes = {
        "accept": {"value": 2.0, "unit": "tokens/step", "tolerance": 0.25},
        "pp@256": {"value": 0.1, "unit": "t/s", "tolerance": 0.0},
        "tg@32": {"value": 0.1, "unit": "t/s", "tolerance": 0.0},
    }
    expect = smoke_file(tmp_path / "expect.json", probes={SHAPE: probes})
    result = smoke(llama_cpu, mirror, store, tmp_path / "out", lock=lock, expect=expect)
    assert result.returncode == 0, result.stderr[-3000:]
    checks = checks_of(tmp_path / "out")
    accept = checks["spec-decode acceptance"]
    assert accept["status"] == "PASS" and accept["measured"]["accept"] > 2.0  # type: ignore[index]
    # b10069, the pinned tree, exports no spec-decode counters on /metrics: the value comes
    # from the answers' timings (draft_n, draft_n_accepted), and the report says so.
    assert "from the answer's timings" in str(accept["detail"]), accept
    # judged over a generation of its own, long enough to mean something
    assert accept["measured"]["generated tokens"] >= 256  # type: ignore[index]
    assert accept["baseline"] == {"shape": SHAPE, "no_baseline": []}
    measured = checks["throughput probes"]["measured"]
    assert measured["pp@256"] > 0.1 and measured["tg@32"] > 0.1  # type: ignore[index]
    assert leftover_containers() == []


def test_an_acceptance_below_its_floor_fails(
    llama_cpu: BuiltLlama, mirror: Mirror, store: Path, tmp_path: Path
) -> None:
    """Without a drafter nothing is drafted: the seeds' broken w4a16 assistant, in effect."""
    probes = {"accept": {"value": 2.8, "unit": "tokens/step", "tolerance": 0.1}}
    expect = smoke_file(tmp_path / "expect.json", probes={SHAPE: probes})
    result = smoke(llama_cpu, mirror, store, tmp_path / "out", expect=expect)
    assert result.returncode == CheckFailed.return_code
    accept = checks_of(tmp_path / "out")["spec-decode acceptance"]
    assert accept["status"] == "FAIL"
    assert "accept: not measured (baseline 2.8)" in str(accept["detail"])
    assert leftover_containers() == []
