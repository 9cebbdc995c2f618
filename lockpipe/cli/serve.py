"""The ``smoke`` verb: run each built image with its payloads and check that it serves.

Its options live in :mod:`lockpipe.cli.options`, so building the parser imports no smoke
module; the payload options it shares with ``payloads`` are read by
:mod:`lockpipe.cli.fetch`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from lockpipe.cli import jsonout
from lockpipe.cli.fetch import json_begin, payload_options
from lockpipe.cli.options import SMOKE_NAME, state_dir
from lockpipe.engines import get_engine
from lockpipe.engines.base import Engine
from lockpipe.errors import CheckFailed, GpuAttachError, LockpipeError, SmokeError, UsageError
from lockpipe.imagebuild.records import read_record
from lockpipe.lock.model import Lock, load_lock
from lockpipe.log import echo, results
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.store import payload_path
from lockpipe.publish.pull import PulledImage
from lockpipe.smoke.config import SmokeSpec, load_smoke
from lockpipe.smoke.external import external_image
from lockpipe.smoke.gpucheck import gpu_gate, needs_gpu
from lockpipe.smoke.report import (
    CheckResult,
    SmokeReport,
    read_records,
    render,
    to_json,
    write_json,
    write_junit,
)
from lockpipe.smoke.runner import SmokeOptions, current_record, smoke_target


def do_smoke(args: argparse.Namespace) -> int:
    json_begin(args)
    loaded = load_lock(args.lock)
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
    pulled = _pulled(args, names)
    names = [n for n in names if n in pulled] if pulled else names
    if not args.targets and not pulled:
        names = [n for n in names if read_record(state, engine.name, n) is not None]
        if not names:
            raise SmokeError(f"no target was built with {engine.name} here ({state}); "
                             "build one first, e.g. nox -s build-llama-cpu")  # fmt: skip
    expect = args.expect or loaded.path.parent / SMOKE_NAME
    specs = load_smoke(expect)
    options = payload_options(args)
    out = (args.out or state / "smoke").expanduser()
    read_records(out / "smoke.json")  # this run's results merge into it: check it first
    smoke = SmokeOptions(
        store=options.store, state=state, out=out, gpu=args.gpu, gpu_mode=args.gpu_mode,
        port_timeout=args.port_timeout, port=args.port,
    )  # fmt: skip
    reports: list[SmokeReport] = []
    for n in names:  # every expectation is checked before any container starts
        if n not in specs:
            raise UsageError(f"{expect}: no expectations for target {n}; add targets.{n}")
        for check, modality in ((specs[n].image, "vision"), (specs[n].audio, "audio")):
            if check is not None and modality not in loaded.target(n).serve.modalities:
                raise UsageError(f"{expect}: targets.{n} checks {modality}, but "
                                 f"targets.{n}.serve.modalities in the lock lacks it")  # fmt: skip
    for n in names:  # and every image is there to run, before anything is downloaded
        if loaded.target(n).external is not None:  # built elsewhere: by digest, held here
            external_image(loaded.target(n), engine)
        elif n not in pulled:
            current_record(loaded, n, engine, state)
    if args.gpu and args.gpu_mode == "cdi":  # the host, once the lock and images are right
        _require_cdi(loaded, names)
    errors: list[LockpipeError] = []
    for n in names:
        try:
            one = replace(smoke, published=pulled.get(n))
            reports.append(_smoke_one(loaded, n, specs[n], engine, options, one))
        except LockpipeError as exc:  # one target's failure keeps the others' reports
            errors.append(exc)
            image = _image_of(loaded, n, state, engine, pulled)
            reports.append(_failed(n, engine.name, exc, image))
        render(reports[-1], results())
    write_json(reports, out / "smoke.json")
    jsonout.emit(args.json, "smoke", {"reports": [to_json(r) for r in reports]})
    write_junit(reports, out / "smoke.junit.xml")
    echo(f"reports: {out / 'smoke.json'}, {out / 'smoke.junit.xml'}")
    if errors:
        raise errors[0]
    failed = [r.target for r in reports if not r.ok]
    if failed:
        echo(f"smoke: a check failed for {', '.join(failed)}; see the report above", style="red")
        return CheckFailed.return_code
    return 0


def _require_cdi(lock: Lock, names: list[str]) -> None:
    """--gpu-mode cdi names nvidia.com/gpu=all, which the engine resolves from a CDI spec:
    without one the container start fails late as an engine error, so refuse first (12)."""
    from lockpipe.deploy.cdi import NVIDIA_KIND, find_specs

    gpu = [n for n in names if needs_gpu(lock.target(n))]
    if gpu and not find_specs(NVIDIA_KIND):
        raise GpuAttachError(
            f"smoke --gpu {', '.join(gpu)}: --gpu-mode cdi needs a CDI spec for {NVIDIA_KIND} "
            f"in /etc/cdi or /var/run/cdi, and this host has none; fix: `nvidia-ctk cdi "
            "generate --output=/etc/cdi/nvidia.yaml` (nvidia-container-toolkit), or pass "
            "--gpu-mode manual"
        )


def _pulled(args: argparse.Namespace, names: list[str]) -> dict[str, PulledImage]:
    """--image (one target) or --published (each target's images.json entry), read from
    the registry by digest; empty when smoke runs the local build records."""
    if not (args.image or args.published):
        return {}
    from lockpipe.cli.publish import image_for
    from lockpipe.publish.outputs import images_path, read_images
    from lockpipe.publish.pull import read_published

    if args.image and len(args.targets) != 1:
        raise UsageError("--image REF@sha256:… smokes one TARGET: name it")
    if not args.targets:  # --published alone: the targets images.json has
        known = read_images(images_path(args.lock))
        names = [n for n in names if n in known]
        if not names:
            raise SmokeError(f"{images_path(args.lock)}: no published image to smoke; run "
                             "nox -s publish -- TARGET --to REGISTRY/PREFIX first")  # fmt: skip
    return {n: read_published(image_for(args, n)) for n in (args.targets or names)}


def _smoke_one(lock: Lock, name: str, spec: SmokeSpec, engine: Engine, options: Options,
               smoke: SmokeOptions) -> SmokeReport:  # fmt: skip
    t = lock.target(name)
    gpu_gate(lock, name, gpu=smoke.gpu, store=smoke.store, gpu_mode=smoke.gpu_mode)
    if t.payloads:  # an external image has none
        run_payloads(lock, [name], options)
    paths = {p: payload_path(options.store, lock.payloads[p]) for p in t.payloads}
    return smoke_target(lock, name, spec, engine, paths, replace(smoke, gated=True))


def _image_of(
    lock: Lock, name: str, state: Path, engine: Engine, pulled: dict[str, PulledImage]
) -> tuple[str, str]:
    """(reference, image ID) the run of ``name`` was for, as far as known without running."""
    if name in pulled:
        return pulled[name].reference, pulled[name].image_id
    ext = lock.target(name).external
    if ext is not None:
        return (ext.pinned(f"targets.{name}") if ext.digest else ""), ""
    record = read_record(state, engine.name, name)
    return (record.tag, record.image_id) if record is not None else ("", "")


def _failed(name: str, engine: str, exc: LockpipeError, image: tuple[str, str]) -> SmokeReport:
    """A report for a target whose smoke could not run: one failed row with the reason,
    filed under the image it was for, so it replaces that image's earlier result."""
    row = CheckResult(name="setup", ok=False, detail=str(exc))
    return SmokeReport(target=name, image=image[0], image_id=image[1], engine=engine,
                       results=(row,))  # fmt: skip
