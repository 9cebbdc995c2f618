"""``lockpipe VERB`` (``python -m lockpipe VERB``): parse, dispatch, errors to exit codes.

Each verb names the module that implements it; that module is imported only
when its verb runs. Every LockpipeError ends here as one line and its code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from lockpipe.cli import demo_options, options, propose_options
from lockpipe.errors import BROKEN_PIPE, INTERRUPTED, Interrupted, LockpipeError
from lockpipe.log import console, set_color, set_quiet, set_results_to_stderr

# verb: ("module:function", help)
VERBS: dict[str, tuple[str, str]] = {
    "demo": ("demo:do_demo", "the whole pipeline on a small CPU target, offline: Debian bases, "
             "llama.cpp and a Gemma GGUF from PyPI through a loopback mirror; build, payloads, "
             "smoke, deploy (rendered), timed"),
    "plan": ("check:do_plan", "print the fully resolved build plan of each target"),
    "doctor": ("doctor:do_doctor", "say what works on this host and what does not (engines, "
               "services, registries, the Hub, GPU and CDI, quadlet, store space), with fixes"),
    "build": ("build:do_build", "build every target (or those named)"),
    "build-frank-small": ("build:do_build", "build the vLLM frank-small image"),
    "build-llama-cuda": ("build:do_build", "build the llama.cpp CUDA variants (or those named)"),
    "build-llama-cpu": ("build:do_build", "build llama.cpp without CUDA"),
    "reproduce": ("build:do_reproduce", "build each target cached and clean, and compare"),
    "lint": ("check:do_lint", "check every Dockerfile against the pinning rules"),
    "lock": ("check:do_lock", "bring pip hashes and drift fingerprints up to date (after review)"),
    "refresh-digests": ("refresh:do_refresh", "re-resolve every pin upstream (bases, llama.cpp, "
                        "the Hub; newer pip releases reported) and write one reviewable change"),
    "payloads": ("fetch:do_payloads", "fetch and verify the payloads of the lock (or NAME…)"),
    "smoke": ("serve:do_smoke", "run each built image with its payloads and check it serves"),
    "preflight": ("preflight:do_preflight", "check each target's KV cache and memory against "
                  "its card, before anything starts"),
    "deploy": ("deploy:do_deploy", "render, check and install a podman quadlet for one "
               "smoke-tested target"),
    "publish": ("publish:do_publish", "push each built image by digest with its provenance "
                "(--to REGISTRY/PREFIX); record it in images.json"),
    "upgrade": ("upgrade:do_upgrade", "apply one proposed upgrade (NAME VERSION): move the "
                "entry, derive what depends on it, relock; one reviewable change"),
    "verify": ("publish:do_verify", "check a published image against its provenance and the "
               "lock (--image REF@sha256:… or --published)"),
    "completion": ("completion:do_completion", "print a bash completion script: "
                   'eval "$(lockpipe completion bash)"'),
}  # fmt: skip
# What --force overrides, for the verbs that have it.
FORCE: dict[str, str] = {
    **dict.fromkeys(
        ("build", "build-frank-small", "build-llama-cuda", "build-llama-cpu"),
        "rebuild even when the build record is current",
    ),
    "lock": "derive every requirements file again, not only those whose version moved",
    "deploy": "install even when the smoke record or the fingerprint says otherwise (warns)",
    "publish": "push even when the registry already has this build",
}
EXTRA_OPTIONS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "plan": options.add_plan_options,
    "doctor": options.add_doctor_options,
    "demo": demo_options.add_demo_options,
    "payloads": options.add_payload_options,
    "smoke": options.add_smoke_options,
    "preflight": options.add_preflight_options,
    "deploy": options.add_deploy_options,
    "reproduce": options.add_reproduce_options,
    "publish": options.add_publish_options,
    "verify": options.add_verify_options,
    "refresh-digests": propose_options.add_propose_options,
    "upgrade": propose_options.add_upgrade_options,
}
# The verbs whose work is downloading: an interrupted run keeps what it wrote and the
# next run resumes (payloads fetches; smoke fetches each target's payloads first).
# Other verbs say so only when a download of theirs was cut (Interrupted.resumable:
# a build's source archive); refresh-digests never resumes an unpinned archive.
DOWNLOAD_VERBS = frozenset({"payloads", "smoke"})
OWN_LOCK_DEFAULT = frozenset({"demo"})


def parse(argv: Sequence[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parser() -> argparse.ArgumentParser:
    """lockpipe's whole command line: every verb and its options (completion reads it too)."""
    parser = options.Parser(
        prog="lockpipe",
        description="Turn one lock file into reproducible GPU serving images and verified "
        "model payloads.",
    )
    parser.add_argument("--version", action="version", version=f"lockpipe {_version()}")
    sub = parser.add_subparsers(
        dest="verb", required=True, metavar="VERB", parser_class=options.Parser
    )
    common = options.common()
    for verb, (_, help_text) in VERBS.items():
        # demo's --lock defaults to the demo lock: a parent of its own, not the shared one
        parent = options.common() if verb in OWN_LOCK_DEFAULT else common
        p = sub.add_parser(verb, parents=[parent], help=help_text, description=help_text)
        if verb in FORCE:
            p.add_argument("--force", action="store_true", help=FORCE[verb])
        else:  # refused by name, not as an unknown argument
            p.add_argument("--force", action=options.NoForce, help=argparse.SUPPRESS)
        if verb == "lock":
            p.add_argument("--check", action="store_true", help="fail on drift instead of writing")
            p.set_defaults(targets=[])
        elif verb == "refresh-digests":
            options.add_refresh_options(p)
        elif verb == "upgrade":
            p.set_defaults(targets=[])
        elif verb == "completion":
            p.add_argument("shell", choices=("bash",), help="the shell to complete for")
            p.add_argument("--names", action="store_true", help=argparse.SUPPRESS)
            p.set_defaults(targets=[])
        else:
            p.add_argument("targets", nargs="*", metavar="TARGET")
        if verb in EXTRA_OPTIONS:
            EXTRA_OPTIONS[verb](p)
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, through its metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lockpipe")
    except PackageNotFoundError:  # run from a tree that was never installed
        return "(not installed)"


def run(argv: Sequence[str]) -> int:
    return dispatch(parse(argv))


def dispatch(args: argparse.Namespace) -> int:
    options.reports_apart(args)  # a --json over the lock replaced it, --dry-run too
    module, _, function = VERBS[args.verb][0].partition(":")
    verb: Callable[[argparse.Namespace], int] = getattr(
        importlib.import_module(f"lockpipe.cli.{module}"), function
    )
    return verb(args)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def interrupt_message(verb: str | None, exc: KeyboardInterrupt) -> str:
    """``interrupted``, whether running again resumes, then one line per thing cleaned up."""
    cleaned = exc.removed if isinstance(exc, Interrupted) else []
    resumable = verb in DOWNLOAD_VERBS or (isinstance(exc, Interrupted) and exc.resumable)
    head = "interrupted"
    if resumable:
        head += "; run again to resume (downloads keep what was written)"
    return "\n".join([head, *(f"  {line}" for line in cleaned)])


def main(argv: list[str] | None = None) -> int:
    # A CI cancel or `kill` sends SIGTERM: treat it as Ctrl-C, so smoke containers are
    # removed, download journals flushed and builds stopped by the same cleanup.
    signal.signal(signal.SIGTERM, _interrupt)
    set_quiet(options.quiet())
    set_results_to_stderr(False)  # a --json - or --jsonl of an earlier in-process call
    verb = None
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        verb = args.verb
        set_color(args.color)
        return dispatch(args)
    except LockpipeError as exc:
        console.print(f"error: {exc}", style="bold red", markup=False, highlight=False)
        return exc.return_code
    except KeyboardInterrupt as exc:
        console.print(interrupt_message(verb, exc), style="red", markup=False, highlight=False)
        return INTERRUPTED
    except BrokenPipeError:  # `lockpipe plan | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
