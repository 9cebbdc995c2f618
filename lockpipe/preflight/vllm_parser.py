"""A ``vllm serve`` command as vLLM's own argument parser reads it, from the pinned wheel.

The parser is vLLM's code, not a copy: ``FlexibleArgumentParser`` with the ``serve``
subcommand, then ``AsyncEngineArgs.from_cli_args`` (:mod:`.vllm_parse_child`, run in a
Python that has torch, with the wheel's ``.py`` tree on its path and
``VLLM_TARGET_DEVICE=cpu``). So flags, choices, dtype names and JSON options are vLLM's.
Importing it takes seconds (torch, transformers), so one run parses every command asked.

Where the parser cannot run (its environment is not built, or turned off), the caller
says so and reads the command with :mod:`.vllm_args`, lockpipe's extract.

The environment, ``CACHE/vllm-parser/VERSION`` (``nox -s vllm-parser`` builds it, see
:mod:`.vllm_parser_env`): ``venv/`` (torch and what the parser imports, hash-pinned in
``constraints/vllm-parser-VERSION[-pyX.Y].txt``, the set of the Python that built it),
``tree/`` (the wheel's ``.py`` files) and ``env.json`` (which wheel, by sha256, the tree
came from).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from lockpipe import cmd
from lockpipe.errors import EngineError
from lockpipe.jsonshape import Reader, loads
from lockpipe.lock.schema import PLACEHOLDER
from lockpipe.preflight import vllm_args
from lockpipe.preflight.verdict import Check, Figure
from lockpipe.preflight.vllm_args import VllmArgs
from lockpipe.preflight.whatif import Overrides

CHILD = Path(__file__).with_name("vllm_parse_child.py")
MARKER = "env.json"
OFF = "off"
WHERE = "FlexibleArgumentParser serve + AsyncEngineArgs.from_cli_args"


@dataclass(frozen=True, kw_only=True)
class ParserEnv:
    version: str
    python: Path
    tree: Path
    wheel: str  # the wheel file the tree was extracted from
    sha256: str
    torch: str | None = None  # installed in the venv (env.json; None: built before it said)
    torch_pin: str | None = None  # the wheel's own Requires-Dist, e.g. "==2.14.0"

    @property
    def torch_note(self) -> str:
        """Which torch the parser runs on, and whether the wheel pins that one."""
        if self.torch is None:
            return "torch not recorded (env.json predates it: nox -s vllm-parser records it)"
        if self.torch_pin is None:
            return f"torch {self.torch}"
        plain = self.torch.split("+", 1)[0]
        same = self.torch_pin.startswith("==") and self.torch_pin[2:] == plain
        return f"torch {self.torch}" + (
            f" (the wheel pins torch{self.torch_pin})" if not same else ""
        )

    @property
    def wheel_path(self) -> Path:
        """The wheel itself, beside the tree (its compiled extensions' names are faked)."""
        return self.tree.parent / self.wheel


@dataclass(frozen=True, kw_only=True)
class Accepted:
    argv: tuple[str, ...]
    engine: Mapping[str, Any]  # vllm_parse_child.FIELDS of the parsed AsyncEngineArgs
    env: ParserEnv
    validation: Mapping[str, Any] | None = None  # vllm_validate_child's answer, when asked
    seconds: float  # the whole run: import and every parse


@dataclass(frozen=True, kw_only=True)
class Refused:
    argv: tuple[str, ...]
    message: str  # vLLM's own
    env: ParserEnv
    seconds: float


@dataclass(frozen=True, kw_only=True)
class Unavailable:
    reason: str
    fix: str


Parsed = Accepted | Refused | Unavailable
Runner = Callable[[Sequence[str], Mapping[str, str]], str]


def env_dir(cache: Path, version: str) -> Path:
    return cache / "vllm-parser" / version


def find_env(where: Path, version: str, wheel: Mapping[str, Any]) -> ParserEnv | Unavailable:
    """The parser environment at ``where``, if it holds vLLM ``version`` from ``wheel``.

    ``wheel`` is the wheel the preflight rules were extracted from (``data/vllm-X.json``):
    a tree from another build would judge with other code than the rules.
    """
    fix = f"nox -s vllm-parser -- {version} (builds {where}), or LOCKPIPE_VLLM_PARSER=DIR"
    try:
        text = (where / MARKER).read_text(encoding="utf-8")
    except FileNotFoundError:
        return Unavailable(reason=f"vLLM {version}'s parser is not built ({where})", fix=fix)
    except (OSError, ValueError) as exc:
        return Unavailable(reason=f"{where / MARKER} is unreadable ({exc})", fix=fix)
    try:  # JSON of another shape ("x", []) was an AttributeError's traceback
        read = Reader(where=str(where / MARKER), root="the marker", error=EngineError)
        marker = read.parse(text)
    except EngineError as exc:
        return Unavailable(reason=f"{exc} (not what the build writes)", fix=fix)
    env = ParserEnv(
        version=str(marker.get("vllm")),
        python=where / "venv" / "bin" / "python",
        tree=where / "tree",
        wheel=str(marker.get("wheel")),
        sha256=str(marker.get("sha256")),
        torch=marker.get("torch"),
        torch_pin=marker.get("torch_pin"),
    )
    if env.version != version or env.sha256 != wheel.get("sha256"):
        return Unavailable(
            reason=f"{where} holds vLLM {env.version} from {env.wheel} (sha256 "
            f"{env.sha256[:12]}), not {version} from {wheel.get('file')} (the rules' wheel)",
            fix=fix,
        )
    if not env.python.is_file() or not (env.tree / "vllm").is_dir():
        return Unavailable(reason=f"{where} lacks venv/bin/python or tree/vllm", fix=fix)
    return env


def stand_in(command: Sequence[str]) -> tuple[str, ...]:
    """The serve command as vLLM's ``main`` sees it: without the program name, each
    ``{payload:NAME}``/``{payload-dir:NAME}`` standing for ``/store/NAME``."""
    argv = command[1:] if command and command[0] == "vllm" else command
    return tuple(PLACEHOLDER.sub(lambda m: f"/store/{m.group(2)}", a) for a in argv)


def asked(command: Sequence[str], over: Overrides) -> tuple[str, ...]:
    """The command with the what-ifs as flags after the target's own (the last one wins in
    argparse); ``--attention-backend auto`` is passed as such (vLLM accepts ``auto``)."""
    extra: list[str] = []
    if over.kv_dtype:
        extra += ["--kv-cache-dtype", over.kv_dtype]
    if over.attention_backend:
        extra += ["--attention-backend", over.attention_backend]
    if over.max_model_len is not None:
        extra += ["--max-model-len", str(over.max_model_len)]
    return (*command, *extra)


def _call(argv: Sequence[str], env: Mapping[str, str]) -> str:
    return cmd.call(argv, env=env, quiet=True)


def parse(
    env: ParserEnv,
    commands: Sequence[Sequence[str]],
    *,
    run: Runner = _call,
    validate: Sequence[Mapping[str, Any] | None] | None = None,
) -> list[Parsed]:
    """Each command (a lock's serve command, placeholders allowed) through vLLM's parser,
    in one run of :mod:`.vllm_parse_child`; all Unavailable when that run fails.
    ``validate``: per command, the facts :mod:`.vllm_validate` built for vLLM's own backend
    and page functions (None: not asked), answered in ``Accepted.validation``."""
    argvs = [stand_in(c) for c in commands]
    child_env = {  # not this host's VLLM_*: the server sees its image's and the lock's
        **{k: v for k, v in os.environ.items() if not k.startswith("VLLM_")},
        "PYTHONPATH": str(env.tree),
        "VLLM_TARGET_DEVICE": "cpu",  # no CUDA platform is probed: this host has no GPU
        "VLLM_LOGGING_LEVEL": "ERROR",
    }
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lockpipe-vllm-parse-") as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        payload: dict[str, Any] = {"commands": [list(a) for a in argvs]}
        if validate is not None:
            payload["validate"] = [
                {**v, "wheel": str(env.wheel_path)} if v else None for v in validate
            ]
        request.write_text(json.dumps(payload), encoding="utf-8")
        try:  # -P: the child's own folder (lockpipe/preflight) must not shadow a module
            run([str(env.python), "-P", str(CHILD), str(request), str(result)], child_env)
            doc = loads(result.read_text(encoding="utf-8"))
        except (EngineError, OSError, ValueError) as exc:
            tail = str(exc).strip().splitlines()[-1:] or ["no output"]
            gone = Unavailable(
                reason=f"vLLM {env.version}'s parser did not run ({tail[0]})",
                fix=f"rebuild it: nox -s vllm-parser -- {env.version} (python {env.python})",
            )
            return [gone for _ in argvs]
    seconds = time.monotonic() - start
    out: list[Parsed] = []
    for argv, r in zip(argvs, doc.get("results", []), strict=True):
        if r.get("accepted"):
            out.append(
                Accepted(
                    argv=argv,
                    engine=r["engine"],
                    env=env,
                    seconds=seconds,
                    validation=r.get("validation"),
                )
            )
        else:
            out.append(Refused(argv=argv, message=str(r["message"]), env=env, seconds=seconds))
    return out


def as_vllm_args(engine: Mapping[str, Any], base: VllmArgs) -> VllmArgs:
    """``base`` (the extract's reading) with every field vLLM's parse gives replaced by it.

    vLLM's ``None`` for ``async_scheduling`` is "decided later" (config/vllm.py turns it on,
    MTP included), so the extract's default stays. Only the fields this VllmArgs has.
    """
    spec = engine.get("speculative_config")
    # -ac/--attention-config: its backend alone (the rest are kernel knobs preflight never reads)
    config = engine.get("attention_config") or {}
    forced = config.get("backend") if isinstance(config, dict) else None
    values: dict[str, Any] = {
        "kv_dtype": engine.get("kv_cache_dtype", base.kv_dtype),
        "max_model_len": engine.get("max_model_len"),
        "max_num_seqs": engine.get("max_num_seqs"),
        "utilization": engine.get("gpu_memory_utilization", base.utilization),
        "backend": engine.get("attention_backend"),
        "block_size": engine.get("block_size"),
        "batched_tokens": engine.get("max_num_batched_tokens"),
        "skip_layers": tuple(engine.get("kv_cache_dtype_skip_layers") or ()),
        "speculative": spec if isinstance(spec, dict) else {},
        "attention_config": {"backend": forced} if forced else {},
    }
    if isinstance(engine.get("async_scheduling"), bool):
        values["async_scheduling"] = engine["async_scheduling"]
    have = {f.name for f in fields(VllmArgs)}
    return replace(base, **{k: v for k, v in values.items() if k in have})


def differences(vllm: VllmArgs, extract: VllmArgs) -> list[str]:
    """Where lockpipe's extract reads the command otherwise than vLLM's parser (a field the
    extract leaves None is not given: vLLM's default then applies, from the rules)."""
    return [
        f"{f.name}: extract {getattr(extract, f.name)!r}, vLLM {getattr(vllm, f.name)!r}"
        for f in fields(VllmArgs)
        if getattr(extract, f.name) is not None
        and getattr(extract, f.name) != getattr(vllm, f.name)
    ]


def check(parsed: Parsed, target: str) -> Check | None:
    """The ``serve-args`` check: vLLM's parser accepted or refused the command; None when
    it did not run (then :func:`figure` says the extract read it)."""
    if isinstance(parsed, Unavailable):
        return None
    by = (
        f"vLLM {parsed.env.version}'s own parser ({WHERE}, {parsed.env.wheel}; "
        f"{parsed.env.torch_note})"
    )
    if isinstance(parsed, Refused):
        return Check(
            name="serve-args",
            status="fail",
            detail=f"{by} refuses the serve command: {parsed.message}",
            fix=f"correct targets.{target}.serve.command in the lock (or the what-if)",
        )
    return Check(name="serve-args", status="pass", detail=f"{by} accepts the serve command")


def figure(parsed: Parsed | None, used: VllmArgs) -> Figure:
    """Who read the serve command: vLLM's parser (and where the extract reads the same
    argv otherwise) or the extract, and why vLLM's parser did not."""
    if parsed is None:
        return Figure(
            name="serve command",
            value="read by lockpipe's extract",
            note="vllm_args.py; vLLM's own parser is not run by this caller",
        )
    if isinstance(parsed, Unavailable):
        return Figure(
            name="serve command",
            value="read by lockpipe's extract",
            note=f"vllm_args.py, a copy: {parsed.reason}; fix: {parsed.fix}",
        )
    differ = []
    if isinstance(parsed, Accepted):
        differ = differences(used, vllm_args.parse_args(parsed.argv))
    verb = "parsed" if isinstance(parsed, Accepted) else "refused"
    note = f"{WHERE}, {parsed.env.torch_note}, {parsed.seconds:.0f} s"
    if differ:
        note += "; the extract would read " + "; ".join(differ)
    return Figure(name="serve command", value=f"{verb} by vLLM {parsed.env.version}", note=note)
