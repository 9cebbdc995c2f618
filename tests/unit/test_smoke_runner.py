from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.engines.base import (
    Mount,
    RunSpec,
)
from lockpipe.errors import CheckFailed, SmokeConfigError, SmokeError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.model import load_lock
from lockpipe.smoke import checks
from lockpipe.smoke.config import SmokeSpec, load_smoke
from lockpipe.smoke.gpucheck import needs_gpu
from lockpipe.smoke.runner import (
    SmokeOptions,
    container_command,
    run_spec,
    smoke_target,
)
from lockpipe.smoke.shape import shape_of
from tests.fake_engine import FakeEngine
from tests.frank_small import turboquant

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
STORE = Path("/var/lib/lockpipe/payloads")
BF16 = "kv=bfloat16,ctx=131072,par=2"  # frank-small as locked, the seeds' measured shape


def _paths(target: str) -> dict[str, Path]:
    t = LOCK.target(target)
    return {
        p: STORE / f"models--{LOCK.payloads[p].repository.replace('/', '--')}/snapshots/r/f"
        for p in t.payloads
    }


def test_payload_placeholders_become_paths_under_the_store_mount() -> None:
    cmd = container_command(LOCK.target("llama-cuda"), _paths("llama-cuda"), STORE)
    assert cmd[:3] == (
        "llama-server",
        "-m",
        "/store/models--unsloth--gemma-4-12b-it-GGUF/snapshots/r/f",
    )
    assert cmd[cmd.index("--model-draft") + 1].startswith("/store/models--unsloth--")
    assert "--spec-type" in cmd and "{payload" not in " ".join(cmd)


def test_payload_dir_placeholder_names_the_folder_inside_json() -> None:
    cmd = container_command(LOCK.target("frank-small"), _paths("frank-small"), STORE)
    assert cmd[2] == "/store/models--google--gemma-4-12B-it-qat-w4a16-ct/snapshots/r"
    spec = json.loads(cmd[cmd.index("--speculative-config") + 1])
    assert spec["model"] == (
        "/store/models--google--gemma-4-12B-it-qat-q4_0-unquantized-assistant/snapshots/r"
    )


def test_a_placeholder_for_a_payload_the_target_lacks_is_named() -> None:
    with pytest.raises(SmokeError, match=r"\{payload:gemma-4-12b-q4_k_m\}.*add it there"):
        container_command(LOCK.target("llama-cpu"), {}, STORE)


def test_run_spec_mounts_the_store_read_only_and_publishes_the_serve_port() -> None:
    target = LOCK.target("llama-cpu")
    spec = run_spec(target, "sha256:" + "1" * 64, ("llama-server", "-m", "x"), STORE, 18080)
    assert spec.entrypoint == ("llama-server",) and spec.command == ("-m", "x")
    assert spec.ports == {8080: 18080}
    assert spec.mounts == (Mount(STORE, "/store", read_only=True),)


def test_which_targets_need_a_gpu() -> None:
    assert {n: needs_gpu(t) for n, t in LOCK.targets.items()} == {
        "frank-large": True, "frank-small": True, "llama-cuda": True, "llama-cuda-mtp": True,
        "llama-cuda-slots": True, "llama-cpu": False,
    }  # fmt: skip


def test_committed_smoke_expectations_cover_every_target() -> None:
    specs = load_smoke(REPO / "locks" / "smoke.json")
    assert set(specs) == set(LOCK.targets)
    frank = specs["frank-small"]
    assert frank.audio is not None and frank.image is not None
    # the seeds measured these with bf16 KV, two full-context (131,072-token) sessions; their
    # pp@213k and tg@213k cannot fit 131,072 tokens and are no baseline (locks/smoke.json)
    assert set(frank.baselines) == {BF16}
    assert frank.baselines[BF16]["pp@67k"].value == 1293
    assert frank.baselines[BF16]["accept"].value == 2.80
    assert frank.probe_names == ("accept", "pp@67k", "tg@85k")


def test_the_seeds_bf16_baselines_judge_the_shape_the_lock_serves() -> None:
    frank = load_smoke(REPO / "locks" / "smoke.json")["frank-small"]
    served = shape_of(LOCK.target("frank-small").serve).key
    assert served == BF16
    assert frank.baseline(served) is not None
    assert frank.baseline(shape_of(turboquant(LOCK).target("frank-small").serve).key) is None


def test_every_committed_shape_key_is_one_the_lock_serves() -> None:
    specs = load_smoke(REPO / "locks" / "smoke.json")
    served = {n: shape_of(t.serve).key for n, t in LOCK.targets.items()}
    for name, spec in specs.items():
        assert set(spec.baselines) <= {served[name]}
    assert served["llama-cpu"] in specs["llama-cpu"].baselines


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"probes": {}}, "targets.x.generation: needs at least one prompt"),
        ({"probes": {}, "generation": [{"prompt": "p", "expect": []}]}, "must be a non-empty list"),
        ({"probes": {}, "generation": [{"prompt": "p", "expect": ["a"]}], "image": {"prompt": "p"}},
         'targets.x.image: needs "prompt", "expect" and "rgb"'),
    ],
)  # fmt: skip
def test_malformed_expectations_name_file_and_key(
    tmp_path: Path, target: dict[str, object], message: str
) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"x": target}}))
    with pytest.raises(SmokeConfigError, match=message):
        load_smoke(path)


def test_the_cli_offers_every_engine() -> None:
    from lockpipe.cli.options import ENGINE_NAMES
    from lockpipe.engines import ENGINES

    assert tuple(ENGINES) == ENGINE_NAMES


def test_the_cli_default_connections_is_the_downloaders() -> None:
    import argparse

    from lockpipe.cli.options import add_payload_options
    from lockpipe.payloads.settings import DEFAULT_CONNECTIONS

    parser = argparse.ArgumentParser()
    add_payload_options(parser)
    assert parser.parse_args([]).connections == DEFAULT_CONNECTIONS


class SdkFault(Exception):
    """What an SDK raises: no LockpipeError, and nothing the runner knows."""


class LogsRaiseEngine(FakeEngine):
    """An Engine whose container exits at once and whose logs() raises an SDK fault."""

    def __init__(self, image_id: str) -> None:
        super().__init__(image_id, running=False, version="1.0")

    def logs(self, container: str) -> str:
        raise SdkFault("500 Server Error: the daemon lost the log stream")


def _built(tmp_path: Path, name: str, engine: LogsRaiseEngine) -> tuple[SmokeSpec, SmokeOptions]:
    """A build record for ``name`` as ``engine`` made it, and the options to smoke it."""
    key = build_key(plan_target(LOCK, name), engine.name, engine.version())
    write_record(tmp_path / "state", BuildRecord(
        target=name, tag=LOCK.target(name).tag, key=key, image_id=engine.image,
        engine=engine.name, engine_version="1.0", reproducible=True, reproducible_how="fake",
        fingerprint="f", source_date_epoch=0, built_at="now", seconds=0.0,
    ))  # fmt: skip
    spec = load_smoke(REPO / "locks" / "smoke.json")[name]
    options = SmokeOptions(store=STORE, state=tmp_path / "state", out=tmp_path / "out")
    return spec, options


def test_the_container_is_stopped_when_fetching_its_log_raises_anything(tmp_path: Path) -> None:
    name = "llama-cpu"
    engine = LogsRaiseEngine("sha256:" + "2" * 64)
    spec, options = _built(tmp_path, name, engine)
    try:
        report = smoke_target(LOCK, name, spec, engine, _paths(name), options)
    finally:
        assert engine.stopped == ["container-1"], "the container was left running"
    ready = next(r for r in report.results if r.name == "ready")
    assert not ready.ok and "exit code 1" in ready.detail
    assert "no log" in ready.detail and "SdkFault" in ready.detail
    assert "lost the log stream" in (tmp_path / "out" / f"{name}.log").read_text()


class RunRaisesEngine(LogsRaiseEngine):
    """An engine that created the container, then failed to start it."""

    def run(self, spec: RunSpec) -> str:
        raise SdkFault("500 Server Error: could not start: GPU device request refused")


def test_a_container_that_failed_to_start_is_removed_by_name(tmp_path: Path) -> None:
    name = "llama-cpu"
    engine = RunRaisesEngine("sha256:" + "3" * 64)
    spec, options = _built(tmp_path, name, engine)
    with pytest.raises(SdkFault):
        smoke_target(LOCK, name, spec, engine, _paths(name), options)
    assert len(engine.stopped) == 1 and engine.stopped[0].startswith(f"lockpipe-smoke-{name}-")


def test_the_port_option_says_a_free_port_is_the_default_with_gpu_too() -> None:
    import argparse

    from lockpipe.cli.options import add_smoke_options

    parser = argparse.ArgumentParser()
    add_smoke_options(parser)
    args = parser.parse_args(["--gpu"])
    assert args.port is None  # the runner picks a free port
    port_help = next(a.help for a in parser._actions if a.dest == "port")
    assert port_help is not None and "a free one, with or without --gpu" in port_help
    assert "target's own with --gpu" not in parser.format_help()


def test_run_spec_gives_the_container_the_locks_serve_env() -> None:
    """serve.env of a built target was counted in what a run served, but never given to the
    smoke container: the run tested another environment than the lock's (issue 18)."""
    target = LOCK.target("llama-cpu")
    target = dataclasses.replace(
        target, serve=dataclasses.replace(target.serve, env={"LLAMA_ARG_THREADS": "2"})
    )
    spec = run_spec(target, "sha256:" + "1" * 64, ("llama-server", "-m", "x"), STORE, 18080)
    assert spec.env == {"LLAMA_ARG_THREADS": "2"}


def test_a_log_that_cannot_be_written_whole_leaves_the_last_one_whole(tmp_path: Path) -> None:
    """The server's log was written in place: a write cut short (a full disk, here a file
    size limit) left half of it where the last run's log was (issue 18)."""
    log = tmp_path / "llama-cpu.log"
    log.write_text("the last run's log\n")
    script = f"""
import resource, signal, sys
from pathlib import Path
sys.path.insert(0, {str(REPO)!r})
from tests.fake_engine import FakeEngine
from lockpipe.smoke.runner import _stop_keeping_log
class Noisy(FakeEngine):
    def logs(self, container):
        return "x" * 100000
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, not death
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    _stop_keeping_log(Noisy("sha256:" + "1" * 64), "c1", Path(sys.argv[1]))
except OSError as exc:
    print("failed:", exc.errno)
"""
    done = subprocess.run([sys.executable, "-c", script, str(log)], capture_output=True,
                          text=True, check=False, cwd=REPO)  # fmt: skip
    assert "failed: 27" in done.stdout, done.stdout + done.stderr[-2000:]  # EFBIG
    assert log.read_text() == "the last run's log\n"


def test_an_answer_without_the_words_is_named_clipped() -> None:
    """The whole answer (up to smoke's 8 MiB) went into the error, smoke.json and the
    terminal: 8,388,677 characters in one line (issue 18)."""
    with pytest.raises(CheckFailed) as caught:
        checks.expect_words("x" * (8 << 20), ("6",), "completion of '1, 2, 3'")
    said = str(caught.value)
    assert len(said) < 1000 and said.endswith("(8,388,608 characters)")
