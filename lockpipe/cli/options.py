"""Options shared by the verbs, and the environment variables behind them.

The pipeline's own variables (``LOCKPIPE_*``) are read here and nowhere else.
Below the command line only the engines' conventions (``DOCKER_HOST``,
``CONTAINER_HOST``, ``XDG_RUNTIME_DIR``), ``GITHUB_ACTIONS`` (log groups) and
the credentials in the environment handed to the payload stage are read.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from lockpipe.engines.base import GPU_MODES
from lockpipe.errors import UsageError
from lockpipe.fs import cache_home
from lockpipe.log import COLORS
from lockpipe.urls import redact_url, shown

if TYPE_CHECKING:
    from lockpipe.lock.model import Lock

DEFAULT_LOCK = Path("locks/digests.json")
SMOKE_NAME = "smoke.json"  # beside the lock, unless --expect
ENGINE_NAMES = ("buildah", "podman", "docker")  # lockpipe.engines.ENGINES, checked by a test


class Parser(argparse.ArgumentParser):
    """argparse exits 2 on bad usage; here 2 means an invalid lock, so usage exits 64."""

    def error(self, message: str) -> NoReturn:
        self.print_usage()
        self.exit(UsageError.return_code, f"{self.prog}: error: {message}\n")


class NoForce(argparse.Action):
    """``--force`` on a verb it changes nothing for: an error that says so."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        verb = parser.prog.rpartition(" ")[2]
        why = " (it never reuses a build)" if verb == "verify" else ""
        parser.error(
            f"{verb} has no --force{why}: drop it; --force belongs to build, lock, publish "
            "and deploy"
        )


def path(text: str) -> Path:
    """An argparse type: a path, never empty (``--store ''`` would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "an empty path would mean the current folder; give a path, or leave the option "
            "out for its default"
        )
    return Path(text)


def port(text: str) -> int:
    """An argparse type: a TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port (1-65535)")
    return value


MAX_PORT_WAIT = 3600  # seconds: a port held an hour after its server stopped is not clearing


def seconds(text: str) -> float:
    """An argparse type: how long to wait for a held port to clear, a finite number of
    seconds from 0 to :data:`MAX_PORT_WAIT`."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    if value > MAX_PORT_WAIT:
        raise argparse.ArgumentTypeError(
            f"{text!r} is over {MAX_PORT_WAIT} seconds, the longest port wait: a port held "
            "that long is not about to clear; find what holds it with ss -tanp sport = :PORT"
        )
    return value


# systemd reads a time into microseconds in a uint64 and refuses one whose seconds + 1 reach
# UINT64_MAX / USEC_PER_SEC (time-util.c, parse_time: -ERANGE); the unit's TimeoutStartSec
# is --start-timeout plus the longest port wait.
MAX_START_TIMEOUT = (2**64 - 1) // 10**6 - 2 - MAX_PORT_WAIT


def whole_seconds(text: str) -> int:
    """An argparse type: a whole number of seconds, 0 to :data:`MAX_START_TIMEOUT` (a unit's
    TimeoutStartSec, less the port wait)."""
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()):  # isdigit alone takes '²'
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds (0 or more)")
    value = digits.lstrip("0") or "0"  # int() of 5000 digits is a ValueError of its own
    if len(value) > len(str(MAX_START_TIMEOUT)) or int(value) > MAX_START_TIMEOUT:
        raise argparse.ArgumentTypeError(
            f"{shown(digits, 40)} is over {MAX_START_TIMEOUT:,} seconds, more than systemd "
            "reads as a TimeoutStartSec; give the seconds a model may take to load (e.g. 900)"
        )
    return int(value)


def whole(meaning: str) -> Callable[[str], int]:
    """An argparse type: a whole number, 0 or more; ``meaning`` names it in the refusal."""

    def parse(text: str) -> int:
        digits = text.strip()
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
            raise argparse.ArgumentTypeError(f"{shown(text, 40)} is not {meaning}")
        return int(digits)

    return parse


def model_len(text: str) -> int:
    """An argparse type: vLLM's ``--max-model-len`` as a whole number of tokens, with
    ``auto`` for -1 (``human_readable_int_or_auto``); a value vLLM refuses (0, -5) is
    judged by preflight, which says so."""
    value = text.strip()
    if value.lower() == "auto":
        return -1
    digits = value.removeprefix("-")
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of tokens: write it whole (128000 for 128k, "
            "131072 for 128K), or auto"
        )
    return int(value)


def mirror(text: str) -> str:
    """An argparse type: a mirror's URL, of a scheme a mirror is fetched by (without one,
    requests finds no adapter for it, and its error quoted the password)."""
    if text and not (text.lower().startswith(("http://", "https://")) or text.startswith("oci://")):
        raise argparse.ArgumentTypeError(
            f"{redact_url(text)!r} (--mirror or LOCKPIPE_MIRROR) has no scheme: give "
            "http://HOST, https://HOST or oci://REGISTRY/PREFIX (a user and password as "
            "http://USER:PASSWORD@HOST)"
        )
    return text


def _env(var: str) -> str | None:
    return os.environ.get(var) or None


def find_lock(here: Path | None = None, lock: Path = DEFAULT_LOCK) -> Path:
    """``lock`` (``locks/digests.json``) of the checkout ``here`` (default: the current
    folder) is in: the nearest folder at or above it that holds one, so ``cd images &&
    lockpipe plan`` reads the checkout's lock; the relative default when none does (its
    error says so)."""
    start = (here or Path.cwd()).resolve()
    for folder in (start, *start.parents):
        if (folder / lock).is_file():
            return folder / lock
    return lock


def common() -> Parser:
    p = Parser(add_help=False)
    lock = _env("LOCKPIPE_LOCK")
    p.add_argument("--lock", type=path, default=Path(lock) if lock else find_lock(),
                   help="the lock file (LOCKPIPE_LOCK; default locks/digests.json of the "
                   "checkout the current folder is in)")  # fmt: skip
    p.add_argument("--engine", choices=ENGINE_NAMES, default=_env("LOCKPIPE_ENGINE"),
                   help="buildah, podman or docker (LOCKPIPE_ENGINE; default: the first "
                   "that works)")  # fmt: skip
    p.add_argument("--mirror", type=mirror, default=_env("LOCKPIPE_MIRROR"),
                   help="base URL tried before upstream for every fetched file "
                   "(LOCKPIPE_MIRROR)")  # fmt: skip
    p.add_argument("--color", choices=COLORS, default="auto",
                   help="colour: auto (a terminal, unless NO_COLOR is set), always or "
                   "never")  # fmt: skip
    state = _env("LOCKPIPE_STATE")
    p.add_argument("--state", type=path, default=Path(state) if state else None,
                   help="where build records live (LOCKPIPE_STATE; default .lockpipe in the "
                   "lock's checkout)")  # fmt: skip
    p.add_argument("--cache", type=path,
                   default=Path(_env("LOCKPIPE_CACHE") or cache_home(os.environ) / "lockpipe"),
                   help="verified downloads by sha256 (LOCKPIPE_CACHE; default "
                   "~/.cache/lockpipe)")  # fmt: skip
    return p


def add_json_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--json FILE``: the verb's result as JSON too; ``-`` is stdout (tables to stderr)."""
    p.add_argument("--json", type=path, metavar="FILE",
                   help=f"also write {what} as JSON to FILE (- for stdout, which the "
                   "tables then leave to it, going to stderr)")  # fmt: skip


def add_doctor_options(p: argparse.ArgumentParser) -> None:
    store = _env("LOCKPIPE_STORE")
    p.add_argument("--store", type=path, default=Path(store) if store else None,
                   help="the payload store whose free space to check (LOCKPIPE_STORE; "
                   "default: the payloads verb's)")  # fmt: skip
    add_json_option(p, "every finding with its fix")


def add_plan_options(p: argparse.ArgumentParser) -> None:
    add_json_option(p, "each target's resolved plan")


def add_payload_options(p: argparse.ArgumentParser) -> None:
    store = _env("LOCKPIPE_STORE")
    p.add_argument("--store", type=path, default=Path(store) if store else None,
                   help="payload store (LOCKPIPE_STORE; default /var/lib/lockpipe/payloads "
                        "for root, else ~/.cache/lockpipe/store)")  # fmt: skip
    p.add_argument("--connections", type=int, default=16,
                   help="parallel connections, shared by the files at once (16)")  # fmt: skip
    p.add_argument("--verify", action="store_true", help="re-hash every file in the store")
    if p.prog.endswith(" payloads"):  # payloads publish --to REGISTRY/PREFIX (docs/payloads.md)
        p.add_argument("--to", default=None, metavar="REGISTRY/PREFIX",
                       help="with `payloads publish`: push the stored payloads there as OCI "
                       "artifacts (LOCKPIPE_PUBLISH_TO)")  # fmt: skip
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", action="store_true", help="no progress display")
    out.add_argument("--jsonl", action="store_true", help="progress as JSON lines, for CI")
    add_json_option(p, "the results" if p.prog.endswith(" payloads") else "the reports")


def add_smoke_options(p: argparse.ArgumentParser) -> None:
    add_payload_options(p)
    p.add_argument("--gpu", action="store_true",
                   help="GPU targets too; each first checks with nvidia-smi that the card "
                   "has the free memory it needs")  # fmt: skip
    p.add_argument("--gpu-mode", choices=GPU_MODES, default=_env("LOCKPIPE_GPU_MODE") or "cdi",
                   help="how the GPU reaches the container (LOCKPIPE_GPU_MODE; default "
                   "cdi, which needs nvidia-container-toolkit's CDI spec; manual on a host "
                   "without the toolkit)")  # fmt: skip
    smoke = _env("LOCKPIPE_SMOKE")
    p.add_argument("--expect", type=path, default=Path(smoke) if smoke else None,
                   help="what each target must answer (LOCKPIPE_SMOKE; default smoke.json "
                   "beside the lock)")  # fmt: skip
    p.add_argument("--port", type=port, default=None,
                   help="host port (default: a free one, with or without --gpu; never the "
                   "target's own, where its production server may listen)")  # fmt: skip
    p.add_argument("--port-timeout", type=seconds, default=90.0,
                   help="seconds to wait for a held port to clear (90)")  # fmt: skip
    p.add_argument("--out", type=path, default=None,
                   help="logs, smoke.json and smoke.junit.xml (default STATE/smoke)")  # fmt: skip
    add_image_options(p)


def add_preflight_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpu",
        metavar="CARD",
        help="plan for this card, e.g. rtx3090 (an unknown name lists the known ones); "
        "default: ask nvidia-smi",
    )
    p.add_argument(
        "--gpu-index", type=whole("a GPU index (0, 1, …)"), default=0, help="which host GPU (0)"
    )
    p.add_argument(
        "--free-mib",
        type=whole("a whole number of MiB (0 or more)"),
        help="free GPU memory to check against (MiB)",
    )
    p.add_argument("--driver", help="the host's NVIDIA driver version, e.g. 610.57.04")
    p.add_argument(
        "--preflight",
        type=path,
        help="calibrations and model shapes (default: preflight.json beside the lock, which "
        "may be absent; a path given here must exist)",
    )
    p.add_argument("--store", type=path, metavar="DIR",
                   help="payload store whose files give model shapes (must be a directory; "
                   "default: the payloads verb's store, used when it is there)")  # fmt: skip
    add_json_option(p, "the report")
    p.add_argument("--strict", action="store_true", help="warnings and UNKNOWN fail too")
    p.add_argument("--vllm-parser", metavar="DIR|off", default=_env("LOCKPIPE_VLLM_PARSER"),
                   help="vLLM's own serve-argument parser, as nox -s vllm-parser builds it "
                   "(LOCKPIPE_VLLM_PARSER; default CACHE/vllm-parser/VERSION); off, or "
                   "not built: lockpipe's extract reads the command, and the report says "
                   "so")  # fmt: skip
    what_if = p.add_argument_group(
        "what if (override the target's own values; one meant for another runtime of the run "
        "is named and skipped, one no target takes is refused)"
    )
    what_if.add_argument("--ctx-size", type=int, help="llama.cpp -c")
    what_if.add_argument("--parallel", type=int, help="llama.cpp --parallel")
    what_if.add_argument("--kv-cache-dtype", metavar="DTYPE",
                         help="vLLM --kv-cache-dtype; llama.cpp -ctk and -ctv (f16, bf16, "
                         "q8_0, q4_0, …)")  # fmt: skip
    what_if.add_argument(
        "--max-model-len",
        type=model_len,
        help="vLLM --max-model-len, in tokens; -1 or auto: fit to memory",
    )
    what_if.add_argument("--attention-backend", help="vLLM --attention-backend")
    what_if.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable the server will see (repeatable)",
    )


def add_deploy_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--artifacts", metavar="REGISTRY/PREFIX",
                   help="check the payloads' OCI artifacts there (payloads publish) and, on "
                   "podman 5.7+, mount them with .artifact units (experimental) instead of "
                   "the store")  # fmt: skip
    store = _env("LOCKPIPE_STORE")
    p.add_argument("--store", type=path, default=Path(store) if store else None,
                   help="payload store the unit mounts read-only at /store (LOCKPIPE_STORE; "
                   "default /var/lib/lockpipe/payloads for root, else "
                   "~/.cache/lockpipe/store)")  # fmt: skip
    p.add_argument("--gpu-mode", choices=("manual", "cdi"), default="cdi",
                   help="cdi: AddDevice=nvidia.com/gpu=all (needs nvidia-ctk cdi generate); "
                   "manual: device nodes and driver libraries, for hosts without the "
                   "toolkit (cdi)")  # fmt: skip
    p.add_argument("--podman-version", metavar="X.Y",
                   help="render for this podman's quadlet (default: podman --version "
                   "here)")  # fmt: skip
    p.add_argument("--no-inspect", action="store_true",
                   help="do not read the image's entrypoint and LD_LIBRARY_PATH with podman "
                   "image inspect (Entrypoint= is then always set)")  # fmt: skip
    p.add_argument("--bind", default="127.0.0.1",
                   help="host address PublishPort binds (127.0.0.1: loopback only)")  # fmt: skip
    p.add_argument("--health-cmd",
                   help="HealthCmd= run in the container (default: curl for vLLM, bash "
                   "/dev/tcp for llama.cpp)")  # fmt: skip
    p.add_argument("--start-timeout", type=whole_seconds, default=900,
                   help="seconds the model may take to load before /health answers "
                   "(900)")  # fmt: skip
    p.add_argument("--smoke-report", type=path,
                   help="smoke.json that gates the deploy (default "
                   "STATE/smoke/smoke.json)")  # fmt: skip
    p.add_argument("--out", type=path, help="where the rendered unit goes (default STATE/deploy)")
    p.add_argument("--no-verify", action="store_true",
                   help="skip podman's generator dry run and systemd-analyze verify")  # fmt: skip
    p.add_argument("--install", nargs="?", const="", metavar="DIR",
                   help="install the unit into DIR (default ~/.config/containers/systemd, "
                   "root: /etc/containers/systemd) once the serve port is clear")  # fmt: skip
    p.add_argument("--start", action="store_true",
                   help="with --install: systemctl [--user] daemon-reload, then start")  # fmt: skip
    p.add_argument("--wait-port", type=port, metavar="PORT",
                   help="only wait until no socket holds PORT (the unit's "
                   "ExecStartPre)")  # fmt: skip
    p.add_argument("--port-timeout", type=seconds, default=90.0,
                   help="seconds to wait for a held port to clear (90)")  # fmt: skip
    add_image_options(p)


def add_reproduce_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--across-engines", nargs="?", const="buildah,podman,docker", metavar="A,B,…",
                   help="build each target once with each engine (default buildah,podman,docker) "
                   "and compare the file trees, ignoring the tar encoding")  # fmt: skip


def add_image_options(p: argparse.ArgumentParser) -> None:
    """--image REF@sha256:… or --published: an image pushed by ``publish``, not a local build."""
    p.add_argument("--image", metavar="REF@sha256:…",
                   help="a published image by digest, pulled instead of the local build "
                   "record's")  # fmt: skip
    p.add_argument("--published", action="store_true",
                   help="the image images.json (beside the lock) records for the "
                   "target")  # fmt: skip


def add_publish_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", metavar="REGISTRY/PREFIX", default=_env("LOCKPIPE_PUBLISH_TO"),
                   help="where images go, as PREFIX/TARGET:KEY12 (LOCKPIPE_PUBLISH_TO; "
                   "loopback registries use plain HTTP)")  # fmt: skip


def add_verify_options(p: argparse.ArgumentParser) -> None:
    add_image_options(p)
    add_json_option(p, "the verdict")
    p.add_argument("--rebuild", action="store_true",
                   help="also rebuild here without cache and compare with the published "
                   "digest")  # fmt: skip


DEFAULT_GITHUB_API = "https://api.github.com"
DEFAULT_PYPI = "https://pypi.org"
REFRESH_KINDS = ("bases", "sources", "payloads", "pip")  # lockpipe.refresh.model.KINDS


def add_refresh_options(p: argparse.ArgumentParser) -> None:
    """refresh-digests: what to refresh, whether to write, where the report goes, which APIs.

    ``HF_ENDPOINT`` is read as huggingface_hub reads it; ``GITHUB_TOKEN`` and ``HF_TOKEN``
    are read when the refresh runs (lockpipe.cli.refresh), never shown as a default here.
    """
    p.add_argument(
        "targets",
        nargs="*",
        metavar="NAME",
        help="entries to refresh: any kind's name, KIND.NAME, or a target (the entries it "
        "builds from and serves; default: all)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="NAME",
        help="the same as NAME…, after other options",
    )
    p.add_argument("--kind", choices=REFRESH_KINDS, help="refresh only this table of the lock")
    p.add_argument(
        "--check", action="store_true", help="fail (exit 3) if anything would change; write nothing"
    )
    p.add_argument("--dry-run", action="store_true",
                   help="resolve and write the reports (--report-md, --report-json); never "
                   "the lock")  # fmt: skip
    p.add_argument(
        "--report-md",
        type=path,
        metavar="FILE",
        help="write the Markdown report (a pull request body) here",
    )
    p.add_argument("--report-json", "--json", type=path, metavar="FILE",
                   help="write the JSON report here (- for stdout, the lines then going to "
                   "stderr)")  # fmt: skip
    p.add_argument(
        "--github-api",
        default=_env("LOCKPIPE_GITHUB_API") or DEFAULT_GITHUB_API,
        help="GitHub's API (LOCKPIPE_GITHUB_API; default api.github.com; "
        "GITHUB_TOKEN is sent when set)",
    )
    p.add_argument(
        "--hub",
        default=(_env("HF_ENDPOINT") or "https://huggingface.co"),
        help="the Hugging Face Hub (HF_ENDPOINT; HF_TOKEN for gated repositories)",
    )
    p.add_argument(
        "--pypi",
        default=_env("LOCKPIPE_PYPI") or DEFAULT_PYPI,
        help="the package index's JSON API (LOCKPIPE_PYPI; default pypi.org)",
    )


def quiet() -> bool:
    """LOCKPIPE_QUIET=1 silences progress lines (errors still print)."""
    return os.environ.get("LOCKPIPE_QUIET") == "1"


# build-GROUP builds the target GROUP and its variants GROUP-* (llama-cuda, llama-cuda-mtp).
GROUPS = ("frank-small", "llama-cuda", "llama-cpu")


def state_dir(args: argparse.Namespace, loaded: Lock) -> Path:
    """--state, else ``.lockpipe`` in the checkout the lock belongs to (not the cwd)."""
    return Path(args.state).expanduser() if args.state else loaded.root / ".lockpipe"


def targets(args: argparse.Namespace, loaded: Lock) -> list[str]:
    """The targets named on the command line (or every one), each checked to exist."""
    names: list[str] = args.targets or sorted(loaded.targets)
    group = args.verb.removeprefix("build-")
    if group in GROUPS:
        members = [t for t in sorted(loaded.targets) if t == group or t.startswith(group + "-")]
        if not members:
            raise UsageError(f"{loaded.path}: no targets named {group} or {group}-*")
        names = args.targets or members
        wrong = [n for n in names if n not in members]
        if wrong:
            raise UsageError(
                f"{', '.join(wrong)}: not a {group} variant; choose from {', '.join(members)}"
            )
    for n in names:
        loaded.target(n)
    return names


# The report files a verb writes: none may be a file the run reads (the lock, images.json
# beside it, preflight.json or --preflight, smoke's expectations, --smoke-report) or another
# report of the same run: a --json naming the lock replaced it, under --dry-run too.
_REPORTS = (("json", "--json"), ("report_json", "--report-json"), ("report_md", "--report-md"))


def reports_apart(args: argparse.Namespace) -> None:
    """UsageError naming both options when a report file of ``args`` (or a file smoke
    writes into --out) is a file the run reads, or another of its reports; before any
    work, so nothing is written."""
    taken = _reads(args)
    for option, out in _smoke_writes(args):
        for name, there in taken:
            if _same_file(out, there):
                raise UsageError(
                    f"{option} would put {out.name} over {name} ({there}), which the run "
                    "reads; give --out a folder of its own"
                )
    taken += [(f"the {out.name} of {option}", out) for option, out in _smoke_writes(args)]
    for attr, option in _REPORTS:
        given = getattr(args, attr, None)
        if not isinstance(given, Path) or str(given) == "-":
            continue
        out = given.expanduser()
        for name, there in taken:
            if _same_file(out, there):
                raise UsageError(
                    f"{option} {out} is {name}, which the report would replace; give the "
                    "report a path of its own"
                )
        taken.append((option, out))


def _reads(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The files the verb of ``args`` reads, each with the option (or default) naming it."""
    lock = getattr(args, "lock", None)
    if not isinstance(lock, Path):
        return []
    lock = lock.expanduser()
    beside = lock.parent
    reads = [("--lock", lock), ("the images.json beside --lock", beside / "images.json")]
    if getattr(args, "verb", None) == "preflight":
        given = args.preflight
        reads.append(("--preflight", given.expanduser()) if isinstance(given, Path) else
                     ("the preflight.json beside --lock", beside / "preflight.json"))  # fmt: skip
    if getattr(args, "verb", None) == "smoke":
        given = args.expect
        reads.append(("--expect", given.expanduser()) if isinstance(given, Path) else
                     (f"the {SMOKE_NAME} beside --lock (smoke's expectations)",
                      beside / SMOKE_NAME))  # fmt: skip
    if isinstance(getattr(args, "smoke_report", None), Path):
        reads.append(("--smoke-report", args.smoke_report.expanduser()))
    return reads


def _smoke_writes(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """smoke's own reports, smoke.json and smoke.junit.xml in --out (default STATE/smoke)."""
    if getattr(args, "verb", None) != "smoke" or not isinstance(args.lock, Path):
        return []
    if isinstance(args.out, Path):
        option, out = f"--out {args.out}", args.out.expanduser()
    else:
        from lockpipe.lock.model import checkout_root

        state = Path(args.state).expanduser() if args.state else None
        option = f"--state {args.state}" if state else "the default --out (STATE/smoke)"
        out = (state or checkout_root(args.lock.expanduser()) / ".lockpipe") / "smoke"
    return [(option, out / SMOKE_NAME), (option, out / "smoke.junit.xml")]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one is not there yet: compare where they would be
        try:
            return a.resolve() == b.resolve()
        except (OSError, RuntimeError, ValueError):
            return False
