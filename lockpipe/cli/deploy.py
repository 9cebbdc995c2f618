"""``lockpipe deploy TARGET``: render, check and optionally install a podman quadlet.

Also ``lockpipe deploy --wait-port PORT``: wait until no socket holds the port (listener,
accepted, TIME_WAIT), or fail with the socket table; the unit's own ExecStartPre does the
same with the host's /bin/sh, so that nothing of lockpipe's runs when it starts.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
from pathlib import Path

from lockpipe import cmd
from lockpipe.cli.options import state_dir
from lockpipe.deploy import keys
from lockpipe.deploy.artifact import why_not
from lockpipe.deploy.external import external_target
from lockpipe.deploy.gate import (
    Verdict,
    check_built,
    check_fingerprint,
    check_reference,
    pinned_image,
)
from lockpipe.deploy.install import default_dir, install, start
from lockpipe.deploy.plan import (
    DeployOptions,
    HostFacts,
    inputs_for_external,
    inputs_for_published,
    inputs_for_target,
    require_digest,
)
from lockpipe.deploy.render import DeployInputs, render_quadlet
from lockpipe.deploy.store import check_payloads, unit_store
from lockpipe.deploy.unit import parse_unit
from lockpipe.deploy.verify import find_generator, generator_dryrun, plain_service, systemd_verify
from lockpipe.engines.base import env_of
from lockpipe.engines.buildah import tool_json
from lockpipe.errors import DeployError, EngineError, UsageError
from lockpipe.fs import write_atomic
from lockpipe.lock.fingerprint import served
from lockpipe.lock.model import Lock, checkout_root, load_lock
from lockpipe.log import echo, result
from lockpipe.payloads.store import default_store
from lockpipe.smoke.gpu import discover_host
from lockpipe.smoke.ports import wait_port_clear
from lockpipe.urls import shown


def podman_version(override: str | None) -> keys.Version:
    """--podman-version, else the installed podman's (``podman --version``)."""
    if override:  # the command line's value: a wrong one is a usage error (64)
        try:
            return keys.parse_version(override)
        except DeployError:
            raise UsageError(
                f"--podman-version {shown(override, 60)}: not a podman version; give X.Y "
                "(e.g. 4.3 or 5.4), or leave it out to ask this host's podman"
            ) from None
    return keys.parse_version(
        cmd.call(["podman", "--version"], quiet=True, stdout_only=True, timeout=cmd.QUERY_TIMEOUT)
    )


def image_config(image: str) -> tuple[tuple[str, ...] | None, str | None]:
    """The image's Entrypoint (None when it has none) and LD_LIBRARY_PATH, from this user's
    podman storage; output of another shape is an EngineError naming the command."""
    argv = ["podman", "image", "inspect", "--format", "{{json .Config}}", image]
    try:
        out = cmd.call(argv, quiet=True, stdout_only=True, timeout=cmd.QUERY_TIMEOUT)
    except EngineError:
        raise DeployError(
            f"image {image} is not in this user's podman storage (podman image inspect "
            "failed): build or pull it as the user the unit runs as (rootless units see "
            "~/.local/share/containers, root ones /var/lib/containers), or pass "
            "--no-inspect to render without it"
        ) from None
    read, doc = tool_json(out, " ".join(argv))
    if doc is None:  # an image without a config
        return None, None
    config = read.get(doc, (), dict)
    words = len(read.get(config, ("Entrypoint",), list, []))  # absent or null: none
    entrypoint = tuple(read.get(config, ("Entrypoint", i), str) for i in range(words)) or None
    return entrypoint, env_of(read, config, ("Env",)).get("LD_LIBRARY_PATH")


def _facts(args: argparse.Namespace, image: str) -> HostFacts:
    version = podman_version(args.podman_version)
    entrypoint, ld_path = image_config(image) if not args.no_inspect else (None, None)
    host = discover_host() if args.gpu_mode == "manual" else None
    return HostFacts(podman=version, image_entrypoint=entrypoint, image_ld_path=ld_path,
                     gpu_host=host)  # fmt: skip


def _noted(opts: DeployOptions, verdict: Verdict) -> DeployOptions:
    return DeployOptions(**{**vars(opts), "note": verdict.note})


def _store(args: argparse.Namespace, lock: Lock, name: str, verdict: Verdict) -> Path:
    """The store the unit mounts, its payloads checked (a target without any mounts none, nor
    one whose unit mounts their artifacts: deploy --artifacts checks those)."""
    env = dict(os.environ)
    if not lock.target(name).payloads or _mounts_artifacts(args, lock, name):
        return default_store(env)
    store = unit_store(args.store, verdict.store, env)
    check_payloads(lock, name, store, install=args.install is not None)
    return store


def _mounts_artifacts(args: argparse.Namespace, lock: Lock, name: str) -> bool:
    """deploy --artifacts on a podman that mounts them: the unit mounts no store."""
    if not args.artifacts:
        return False
    return why_not(podman_version(args.podman_version), lock, lock.target(name)) is None


def _served(lock: Lock, name: str) -> dict[str, str]:
    """What a smoke run must have served for this unit: the lock's serve and payload pins."""
    return served(lock, lock.target(name))


def _inputs(args: argparse.Namespace, name: str, opts: DeployOptions) -> DeployInputs:
    lock = load_lock(args.lock)
    state = state_dir(args, lock)
    report = (args.smoke_report or state / "smoke" / "smoke.json").expanduser()
    ext = external_target(lock, name)
    if ext is not None:
        image = ext.pinned()
        verdict = check_reference(report, name, image, served=_served(lock, name),
                                  force=args.force, external=True)  # fmt: skip
        return inputs_for_external(ext, _facts(args, image), _noted(opts, verdict))
    if args.image or args.published:
        return _published_inputs(args, lock, name, report, opts)
    pinned = pinned_image(state, name, args.engine)
    check_fingerprint(pinned, lock.fingerprints.get(name), lock=lock.path, force=args.force)
    verdict = check_built(report, pinned, served=_served(lock, name), force=args.force)
    store = _store(args, lock, name, verdict)
    facts = _facts(args, pinned.image)
    return inputs_for_target(lock, name, pinned, store, facts, _noted(opts, verdict))


def _published_inputs(
    args: argparse.Namespace, lock: Lock, name: str, report: Path, opts: DeployOptions
) -> DeployInputs:
    """--image/--published: pin ``ref@digest``; the smoke gate looks for that reference."""
    from lockpipe.cli.publish import image_for

    image = image_for(args, name)
    require_digest(image)  # before the gate, whose fix would name the tag
    verdict = check_reference(report, name, image, served=_served(lock, name), force=args.force)
    store = _store(args, lock, name, verdict)
    facts = _facts(args, image)
    return inputs_for_published(lock, name, image, store, facts, _noted(opts, verdict))


def verify(
    text: str, name: str, version: keys.Version, *, user: bool, companions: dict[str, str]
) -> None:
    """Podman's generator dry run where installed, then systemd-analyze verify.
    ``companions`` (file name -> text: the ``.artifact`` units) go in the dry run's folder
    beside the .container, as they are installed: quadlet resolves ``source=X.artifact``
    against the units it is given."""
    generator = find_generator()
    if generator is not None:
        with tempfile.TemporaryDirectory(prefix="lockpipe-quadlet-") as tmp:
            (Path(tmp) / f"{name}.container").write_text(text, encoding="utf-8")
            for filename, body in companions.items():
                (Path(tmp) / filename).write_text(body, encoding="utf-8")
            service = generator_dryrun(generator, Path(tmp), user=user, expect=f"{name}.service")
        with_them = "".join(f", {f}" for f in companions)
        result(f"podman's quadlet generator ({generator}) accepted {name}.container{with_them}")
    else:
        echo(f"podman {keys.show(version)}: no quadlet generator installed here; keys checked "
             "against lockpipe's table, systemd checks a plain podman run service")  # fmt: skip
        service = plain_service(parse_unit(text)).render()
    systemd_verify(service, name, user=user)
    result(f"systemd-analyze verify: {name}.service passes")


def _write(path: Path, text: str, option: str) -> None:
    """``path`` written atomically; an OSError (/proc/self, a read-only folder, a name past
    255 bytes) is one UsageError naming ``option``, the path and the fix."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"{option}: cannot write {path} ({exc.strerror or exc}); give a "
                         "folder that exists and is writable") from None  # fmt: skip


def do_deploy(args: argparse.Namespace) -> int:
    if args.wait_port is not None:
        waited = wait_port_clear(args.wait_port, args.port_timeout)
        echo(f"port {args.wait_port} is clear (waited {waited:.1f} s)")
        return 0
    if len(args.targets) != 1:
        raise UsageError("deploy takes one TARGET, e.g. lockpipe deploy frank-small")
    name = args.targets[0]
    if args.podman_version:  # a usage error comes before any lookup
        podman_version(args.podman_version)
    if args.start and args.install is None:
        raise UsageError("--start needs --install")
    # the unit's port wait counts whole seconds: 0.5 waits 1 (int() made it 0, no wait)
    opts = DeployOptions(gpu_mode=args.gpu_mode, bind=args.bind, health_cmd=args.health_cmd,
                         start_timeout=args.start_timeout,
                         port_wait=math.ceil(args.port_timeout))  # fmt: skip
    inputs = _inputs(args, name, opts)
    artifacts: dict[str, str] = {}
    if args.artifacts:  # deploy --artifacts REGISTRY/PREFIX (lockpipe/cli/deployart.py)
        from lockpipe.cli.deployart import render_units, with_artifacts

        inputs, mounts = with_artifacts(args.artifacts, load_lock(args.lock), name, inputs)
        artifacts = {f: u.render() for f, u in render_units(mounts).items()}
    text = render_quadlet(inputs).render()
    state = args.state or checkout_root(Path(args.lock)) / ".lockpipe"
    path = (args.out or Path(state) / "deploy").expanduser() / f"{name}.container"
    option = "--out" if args.out else "--state"
    _write(path, text, option)
    result(f"rendered {path}")  # what the verb made, and its checks below: results, on stdout
    for filename, body in artifacts.items():
        _write(path.with_name(filename), body, option)
        result(f"rendered {path.with_name(filename)}")
    user = os.geteuid() != 0
    if not args.no_verify:
        verify(text, name, inputs.podman, user=user, companions=artifacts)
    if args.install is not None:
        directory = Path(args.install) if args.install else default_dir(os.environ)
        done = install(text, name, directory.expanduser(), port=inputs.port,
                       port_timeout=args.port_timeout, user=user,
                       companions=artifacts)  # fmt: skip
        if done.stopped and not args.start:
            echo(f"starting {name}.service again, now on the new unit (the install stopped it)")
        if args.start or done.stopped:
            start(name, user=user)
    return 0
