"""The verbs that feed and run built images: ``payloads`` and ``smoke``.

The payload and smoke packages are imported when these verbs run, not when the
parser is built: every other verb (a no-op build above all) starts faster.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline import lock
from pipeline.errors import UsageError

if TYPE_CHECKING:
    from pipeline.payloads import Options

GPU_MODES = ("docker-gpus", "cdi", "manual")  # pipeline.smoke.gpu.MODES, checked by a test
DEFAULT_SMOKE = Path("locks/smoke.json")


def add_payload_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, default=None,
                   help="payload store (PIPELINE_STORE; default /var/lib/lockpipe/payloads "
                        "for root, else ~/.cache/lockpipe/store)")  # fmt: skip
    p.add_argument("--connections", type=int, default=16,
                   help="parallel connections, shared by the files at once (16)")  # fmt: skip
    p.add_argument("--verify", action="store_true", help="re-hash every file in the store")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="no progress display")
    out.add_argument("--jsonl", action="store_true", help="progress as JSON lines, for CI")


def add_smoke_options(p: argparse.ArgumentParser) -> None:
    add_payload_options(p)
    p.add_argument("--gpu", action="store_true", help="GPU targets too, on their own ports")
    p.add_argument(
        "--gpu-mode",
        choices=GPU_MODES,
        default=os.environ.get("PIPELINE_GPU_MODE", "cdi"),
        help="how the GPU reaches the container (PIPELINE_GPU_MODE; default cdi)",
    )
    p.add_argument(
        "--expect",
        type=Path,
        default=Path(os.environ.get("PIPELINE_SMOKE") or DEFAULT_SMOKE),
        help="what each target must answer (PIPELINE_SMOKE; default locks/smoke.json)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="host port (default: the target's own with --gpu, else a free one)",
    )
    p.add_argument(
        "--port-timeout",
        type=float,
        default=90.0,
        help="seconds to wait for a held port to clear (90)",
    )
    p.add_argument("--out", type=Path, default=None,
                   help="logs, smoke.json and smoke.junit.xml (default STATE/smoke)")  # fmt: skip


def _payload_options(args: argparse.Namespace) -> Options:
    from pipeline.payloads import Options, default_store

    env = dict(os.environ)
    store = args.store or Path(env.get("PIPELINE_STORE") or default_store(env))
    output = "quiet" if args.quiet else "jsonl" if args.jsonl else "rich"
    # Resolved once: the smoke runner maps store paths into the container relative to it.
    store = store.expanduser().resolve()
    return Options(store, args.mirror, args.connections, args.verify, output, env=env)


def do_payloads(args: argparse.Namespace) -> int:
    from pipeline.payloads import run_payloads

    run_payloads(lock.load_lock(args.lock), args.targets, _payload_options(args))
    return 0


def do_smoke(args: argparse.Namespace) -> int:
    from pipeline.cli import state_dir
    from pipeline.engines import get_engine
    from pipeline.log import console, echo
    from pipeline.payloads import run_payloads
    from pipeline.payloads.store import payload_path
    from pipeline.records import read_record
    from pipeline.smoke.config import load_smoke
    from pipeline.smoke.report import SmokeReport, render, write_json, write_junit
    from pipeline.smoke.runner import SmokeOptions, needs_gpu, smoke_target

    loaded = lock.load_lock(args.lock)
    engine = get_engine(args.engine)
    state = state_dir(args, loaded)
    names = args.targets or sorted(loaded.targets)
    for n in names:
        loaded.target(n)
    if not args.gpu:
        gpu_only = [n for n in names if needs_gpu(loaded.target(n))]
        if gpu_only and args.targets:
            raise UsageError(
                f"{', '.join(gpu_only)} need a GPU: run smoke with --gpu on a GPU host"
            )
        names = [n for n in names if n not in gpu_only]
    if not args.targets:
        names = [n for n in names if read_record(state, engine.name, n) is not None]
        if not names:
            raise UsageError(f"no target was built with {engine.name} here ({state}); "
                             "build one first, e.g. nox -s build-llama-cpu")  # fmt: skip
    specs = load_smoke(args.expect)
    options = _payload_options(args)
    out = (args.out or state / "smoke").expanduser()
    smoke = SmokeOptions(
        options.store, state, out, gpu=args.gpu, gpu_mode=args.gpu_mode,
        port_timeout=args.port_timeout, port=args.port,
    )  # fmt: skip
    reports: list[SmokeReport] = []
    for n in names:  # every expectation is checked before any container starts
        if n not in specs:
            raise UsageError(f"{args.expect}: no expectations for target {n}; add targets.{n}")
        for check, modality in ((specs[n].image, "vision"), (specs[n].audio, "audio")):
            if check is not None and modality not in loaded.target(n).serve.modalities:
                raise UsageError(f"{args.expect}: targets.{n} checks {modality}, but "
                                 f"targets.{n}.serve.modalities in the lock lacks it")  # fmt: skip
    for n in names:
        t = loaded.target(n)
        run_payloads(loaded, [n], options)
        paths = {p: payload_path(options.store, loaded.payloads[p]) for p in t.payloads}
        reports.append(smoke_target(loaded, n, specs[n], engine, paths, smoke))
        render(reports[-1], console)
    write_json(reports, out / "smoke.json")
    write_junit(reports, out / "smoke.junit.xml")
    echo(f"reports: {out / 'smoke.json'}, {out / 'smoke.junit.xml'}")
    return 0 if all(r.ok for r in reports) else 1
