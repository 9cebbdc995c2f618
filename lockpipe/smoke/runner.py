"""Run a built image with its payloads and prove it serves.

The container runs the target's serve command from the lock, with the
payload store mounted read-only, on a free host port (or --port, waited free),
after a GPU target's memory need was checked against what nvidia-smi shows free
(--gpu), and is always stopped and removed afterwards, its log kept. Each check
becomes a row of the report.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import requests

from lockpipe.engines.base import Engine, GpuMode, Mount, RunSpec
from lockpipe.errors import CheckFailed, LockpipeError, SmokeError
from lockpipe.fs import write_atomic
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.records import BuildRecord, read_record
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.fingerprint import served
from lockpipe.lock.model import Lock, Target
from lockpipe.lock.schema import PLACEHOLDER
from lockpipe.log import echo
from lockpipe.payloads.store import is_snapshot_dir
from lockpipe.publish.pull import PulledImage
from lockpipe.smoke import checks, logscan, metrics, probes
from lockpipe.smoke.config import Generation, MediaCheck, SmokeSpec
from lockpipe.smoke.external import external_image, external_spec
from lockpipe.smoke.gpu import discover_host, plan_gpu, with_gpu
from lockpipe.smoke.gpucheck import gpu_gate, needs_gpu
from lockpipe.smoke.media import solid_png, speech_wav
from lockpipe.smoke.ports import free_port, wait_port_clear
from lockpipe.smoke.report import CheckResult, SmokeReport
from lockpipe.smoke.shape import shape_of
from lockpipe.urls import clipped, shown

STORE_IN_CONTAINER = "/store"


@dataclass(frozen=True, kw_only=True)
class SmokeOptions:
    store: Path
    state: Path
    out: Path
    gpu: bool = False
    gpu_mode: GpuMode = "cdi"
    port_timeout: float = 90.0
    # Host port; default a free one, also with --gpu: the target's own port is the one its
    # production server listens on (frank-small's 7771 on the fleet's host).
    port: int | None = None
    # --image/--published: run this published image (pulled) instead of the build record's.
    published: PulledImage | None = None
    gated: bool = False  # gpu_gate already ran (before the payloads were fetched)


def container_command(target: Target, paths: Mapping[str, Path], store: Path) -> tuple[str, ...]:
    """The serve command with ``{payload:NAME}`` (file) and ``{payload-dir:NAME}`` (its
    folder; a snapshot payload's path is that folder itself) replaced by their paths
    inside the container, where the store is mounted."""

    def inside(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in paths:
            raise SmokeError(
                f"targets.{target.name}.serve.command names {{payload:{name}}}, which is not "
                f"in targets.{target.name}.payloads; add it there"
            )
        path, folder = paths[name], is_snapshot_dir(store, paths[name])
        if folder and not match.group(1):
            raise SmokeError(
                f"targets.{target.name}.serve.command passes {{payload:{name}}}, but "
                f"payloads.{name} is a snapshot folder: write {{payload-dir:{name}}}"
            )
        path = path.parent if match.group(1) and not folder else path
        return f"{STORE_IN_CONTAINER}/{path.relative_to(store).as_posix()}"

    return tuple(PLACEHOLDER.sub(inside, arg) for arg in target.serve.command)


def run_spec(
    target: Target, image: str, command: tuple[str, ...], store: Path, port: int
) -> RunSpec:
    """Detached container: program as entrypoint, the lock's ``serve.env``, store read-only,
    serve port published."""
    return RunSpec(
        image=image,
        entrypoint=command[:1],
        command=command[1:],
        name=f"lockpipe-smoke-{target.name}-{os.getpid()}",
        env=dict(target.serve.env),
        ports={target.serve.port: port},
        mounts=(Mount(store, STORE_IN_CONTAINER, read_only=True),),
    )


Outcome = tuple[str, Mapping[str, float]] | probes.Judged


class _Checks:
    """The checks of one running container, each recorded as a report row."""

    def __init__(self, base: str, model: str, runtime: str, shape: str) -> None:
        self.base, self.model, self.runtime, self.shape = base, model, runtime, shape
        self.server = probes.Server(base, model, runtime)
        self.results: list[CheckResult] = []
        self.pick_model = False  # the lock names no model: use the first /v1/models lists
        self.speculative = False  # the serve command drafts: acceptance is measured

    def run(self, name: str, fn: Callable[[], Outcome]) -> bool:
        start = time.monotonic()
        try:
            out = fn()
        except probes.BaselineMiss as exc:
            self.results.append(CheckResult(name=name, ok=False, detail=str(exc),
                                            seconds=time.monotonic() - start,
                                            measured=exc.measured, shape=exc.shape))  # fmt: skip
            return False
        except (LockpipeError, requests.RequestException, KeyError, ValueError) as exc:
            self.results.append(CheckResult(name=name, ok=False, detail=str(exc),
                                            seconds=time.monotonic() - start))  # fmt: skip
            return False
        seconds = time.monotonic() - start
        if isinstance(out, probes.Judged):
            self.results.append(CheckResult(name=name, ok=True, detail=out.detail,
                                            seconds=seconds, measured=out.measured,
                                            shape=out.shape, unjudged=out.unjudged))  # fmt: skip
        else:
            self.results.append(CheckResult(name=name, ok=True, detail=out[0], seconds=seconds,
                                            measured=out[1]))  # fmt: skip
        return True

    def skip(self, name: str, why: str) -> None:
        self.results.append(CheckResult(name=name, ok=False, detail=why, skipped=True))

    def scrape(self) -> metrics.Samples:
        return self.server.scrape()


def _generation_checks(c: _Checks, spec: SmokeSpec) -> None:
    seen: dict[str, metrics.Samples] = {}

    def scrape_first() -> tuple[str, Mapping[str, float]]:
        seen["before"] = c.scrape()
        return f"{len(seen['before'])} series parsed", {}

    c.run("metrics", scrape_first)
    for i, gen in enumerate(spec.generations):

        def one(gen: Generation = gen) -> tuple[str, Mapping[str, float]]:
            out = checks.complete(c.base, c.model, gen.prompt, gen.max_tokens)
            checks.expect_words(out.text, gen.expect, f"completion of {gen.prompt!r}")
            rate = out.completion_tokens / out.seconds if out.seconds else 0.0
            said = f"{shown(gen.prompt, 120)} -> {shown(out.text, 300)}"
            return said, {"tokens/s (wall)": round(rate, 1)}

        c.run(f"generation[{i}]", one)
    if "before" not in seen:
        return

    def counters() -> tuple[str, Mapping[str, float]]:
        delta = metrics.delta(seen["before"], c.scrape())
        tp = metrics.throughput(delta, c.runtime)
        if not tp.gen_tokens:
            raise CheckFailed("/metrics counted no generated tokens during the checks")
        measured = {k: round(v, 2) for k, v in (("pp t/s", tp.pp), ("tg t/s", tp.tg)) if v}
        return f"{tp.gen_tokens:g} tokens counted", measured

    c.run("metrics counters", counters)
    if "accept" in spec.probe_names or c.speculative:  # a long run of its own, not the answers
        base = spec.baseline(c.shape)
        c.run("spec-decode acceptance", lambda: probes.acceptance(c.server, base, c.shape))


def _media_checks(c: _Checks, spec: SmokeSpec) -> None:
    if spec.image is not None and spec.image.rgb is not None:
        img = spec.image
        c.run("image", lambda: _ask(c, [checks.image_part(solid_png(img.rgb or (0, 0, 0)))], img))
    if spec.audio is not None and spec.audio.say is not None:
        aud = spec.audio
        c.run("audio", lambda: _ask(c, [checks.audio_part(speech_wav(aud.say or ""))], aud))


def _ask(
    c: _Checks, parts: list[dict[str, object]], m: MediaCheck
) -> tuple[str, Mapping[str, float]]:
    answer = checks.chat(c.base, c.model, [*parts, {"type": "text", "text": m.prompt}])
    checks.expect_words(answer, m.expect, m.prompt)
    return shown(answer, 120), {}


def _probe_checks(c: _Checks, spec: SmokeSpec) -> None:
    """The throughput probes the expectations define (GPU targets only run with --gpu)."""
    names = [n for n in spec.probe_names if n != "accept"]
    if names:
        base = spec.baseline(c.shape)
        c.run("throughput probes", lambda: probes.throughput(c.server, names, base, c.shape))


def current_record(lock: Lock, name: str, engine: Engine, state: Path) -> BuildRecord:
    """The build record of ``name``, if its image is what the lock pins now; else SmokeError.

    Checked for every target before any payload is fetched: nothing is downloaded for
    an image that is not there to run.
    """
    record = read_record(state, engine.name, name)
    if record is None:
        raise SmokeError(f"{name}: no build record for engine {engine.name} in {state}; "
                         f"build it first: nox -s build -- {name}")  # fmt: skip
    key = build_key(plan_target(lock, name), engine.name, engine.version())
    if record.key != key:
        raise SmokeError(f"{name}: the image was built from other inputs than the lock now "
                         f"pins (build key {record.key[:12]}, now {key[:12]}); rebuild: "
                         f"nox -s build -- {name}")  # fmt: skip
    if engine.image_id(record.tag) != record.image_id:
        raise SmokeError(f"{name}: {record.tag} is not the image the build record holds "
                         f"({record.image_id[:19]}); rebuild: nox -s build -- {name}")  # fmt: skip
    return record


def smoke_target(lock: Lock, name: str, spec: SmokeSpec, engine: Engine,
                 paths: Mapping[str, Path], o: SmokeOptions) -> SmokeReport:  # fmt: skip
    """Start the target's built image, run every check, always remove the container."""
    target = lock.target(name)
    if not o.gated:
        gpu_gate(lock, name, gpu=o.gpu, store=o.store, gpu_mode=o.gpu_mode)
    if target.external is not None:  # built elsewhere: its pinned digest, in local storage
        tag, image_id = external_image(target, engine)
        run_image = image_id
    elif o.published is not None:  # checked against the digest the registry gave
        tag = run_image = o.published.reference
        image_id = o.published.image_id
    else:
        record = current_record(lock, name, engine, o.state)
        tag, run_image, image_id = record.tag, record.image_id, record.image_id
    port = o.port or free_port()  # never the target's own: production may serve there
    wait_port_clear(port, o.port_timeout)
    store = o.store
    if target.external is not None:
        spec_run = external_spec(target, run_image, port)
    else:
        command = container_command(target, paths, store)
        spec_run = run_spec(target, run_image, command, store, port)
    if o.gpu and needs_gpu(target):  # a CPU target runs as without --gpu
        host = discover_host() if o.gpu_mode == "manual" else None
        image_env = o.published.env if o.published else engine.image_env(image_id)
        env = image_env.get("LD_LIBRARY_PATH")
        attach = plan_gpu(o.gpu_mode, engine=engine.name, host=host, image_ld_path=env)
        spec_run = with_gpu(spec_run, attach)
    c = _Checks(f"http://127.0.0.1:{port}", target.serve.model or name, target.serve.runtime,
                shape_of(target.serve).key)  # fmt: skip
    c.pick_model = target.external is not None and target.serve.model is None
    c.speculative = probes.speculates(target.serve.command)
    o.out.mkdir(parents=True, exist_ok=True)
    log_path = o.out / f"{name}.log"
    echo(f"smoke {name}: {tag} ({image_id[:19]}) on :{port} with {engine.name}")
    try:
        container = engine.run(spec_run)
    except BaseException:  # created but not started (a GPU or port refused, Ctrl-C): remove it
        with contextlib.suppress(Exception):
            engine.stop(spec_run.name or "")
        raise
    try:
        _run_checks(c, spec, engine, container, image_id)
    finally:
        log = _stop_keeping_log(engine, container, log_path)
    if target.serve.runtime in logscan.FATAL:
        c.run("log scan", lambda: _scan(log, target.serve.runtime))
    else:  # an external runtime: its fatal lines are not known from any source here
        c.skip("log scan", f"no known fatal lines for {target.serve.runtime}; log kept")
    return SmokeReport(target=name, image=tag, image_id=image_id, engine=engine.name,
                       results=tuple(c.results), log_path=log_path,
                       store=store if target.payloads else None,
                       served=served(lock, target))  # fmt: skip


def _run_checks(c: _Checks, spec: SmokeSpec, engine: Engine, container: str, image: str) -> None:
    def exited() -> str | None:
        state = engine.state(container)
        if state.running:
            return None
        tail = "\n".join(_safe_logs(engine, container).splitlines()[-25:])
        return f"exit code {state.exit_code}; log tail:\n{tail}"

    def same_image() -> tuple[str, Mapping[str, float]]:
        running = engine.state(container).image_id
        if running != image:
            raise CheckFailed(f"running {running}, the build record (or --image) holds {image}")
        return running, {}

    c.run("image digest", same_image)
    deadline = time.monotonic() + spec.ready_seconds
    if not c.run("ready", lambda: ("/health 200", {"seconds": round(
            checks.wait_ready(c.base, deadline, exited), 1)})):  # fmt: skip
        return
    c.run("models", lambda: _models(c))
    _generation_checks(c, spec)
    _media_checks(c, spec)
    _probe_checks(c, spec)


def _models(c: _Checks) -> tuple[str, Mapping[str, float]]:
    ids = checks.model_ids(c.base)
    if c.pick_model and ids:  # an external image whose model the lock does not name
        c.model, c.server = ids[0], probes.Server(c.base, ids[0], c.runtime)
    if c.model not in ids:
        raise CheckFailed(f"/v1/models lists {clipped(', '.join(ids), 300)}, not {c.model!r}")
    return clipped(", ".join(ids), 300), {}


def _scan(log: str, runtime: str) -> tuple[str, Mapping[str, float]]:
    """The runtime's fatal lines (logscan.py: from the pinned sources); benign ones pass."""
    found = logscan.scan(runtime, log)
    if found:
        lines = [f"line {f.line_no} [{f.pattern}]: {shown(f.line.strip(), 200)}\n  fix: {f.fix}"
                 for f in found[:10]]  # fmt: skip
        raise CheckFailed(f"{len(found)} fatal line(s) in the log:\n" + "\n".join(lines))
    return f"{len(log.splitlines())} lines, none fatal for {runtime}", {}


def _stop_keeping_log(engine: Engine, container: str, log_path: Path) -> str:
    """Fetch the log, stop the container, write the log (atomically: the old one or the new
    one, never half); the stop runs whatever else raises."""
    log = "(no log: fetching it was interrupted)"
    try:
        log = _safe_logs(engine, container)
    finally:
        try:
            engine.stop(container)  # before the write: a failed write must not leak a GPU
        finally:
            write_atomic(log_path, log)  # a full disk leaves the last run's log whole
    return log


def _safe_logs(engine: Engine, container: str) -> str:
    """The container's log, or a line saying why there is none: an SDK's own exceptions
    included, so that a failed log fetch never skips the stop after it."""
    try:
        return engine.logs(container)
    except Exception as exc:
        return f"(no log: {type(exc).__name__}: {exc})"
