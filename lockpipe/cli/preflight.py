"""``lockpipe preflight``: will each target's serving shape fit its card? Nothing is started.

Exit 0 when no target fails (warnings and UNKNOWN model shapes allowed; ``--strict`` fails
on them too), 16 (CheckFailed's code) when one does, as ``smoke`` when a check fails, and a
LockpipeError's code when the inputs themselves are wrong: those are refused before
anything is judged.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lockpipe.cli.options import targets
from lockpipe.errors import CheckFailed, GpuAttachError, LockError, LockpipeError, UsageError
from lockpipe.fs import STDOUT
from lockpipe.lock.model import Lock, Target, load_lock
from lockpipe.log import echo
from lockpipe.payloads.store import default_store
from lockpipe.preflight import (
    config,
    external,
    host,
    plan,
    report,
    vllm_parser,
    vllm_release,
    vllm_rules,
)
from lockpipe.preflight.shape import ModelShape
from lockpipe.preflight.verdict import TargetReport
from lockpipe.preflight.whatif import Overrides
from lockpipe.spelling import hint


def _card(args: argparse.Namespace) -> tuple[host.Card | None, str]:
    """The card named by --gpu, else the host's; else None and why nvidia-smi gave none."""
    if args.driver:
        host.check_driver(args.driver, "--driver")
    if args.gpu:
        card = host.card_named(args.gpu)
    else:
        try:
            card = host.query_host(args.gpu_index)
        except GpuAttachError as exc:  # no nvidia-smi, or it failed
            return None, str(exc)
    return _as_asked(args, card), ""


def _as_asked(args: argparse.Namespace, card: host.Card) -> host.Card:
    """``card`` with --free-mib and --driver where given: on the --gpu card, the host's,
    or, with no host card, the one preflight.json names for a target."""
    return host.Card(
        name=card.name,
        memory_mib=card.memory_mib,
        compute_cap=card.compute_cap,
        free_mib=args.free_mib if args.free_mib is not None else card.free_mib,
        driver=args.driver or card.driver,
    )


def _overrides(args: argparse.Namespace) -> Overrides:
    """The what-if options; an empty one is refused, not dropped (--kv-cache-dtype '' ran
    with the target's own value and no word that the option was ignored)."""
    for option, value, want in (("--kv-cache-dtype", args.kv_cache_dtype, "a DTYPE, e.g. q8_0"),
                                ("--attention-backend", args.attention_backend,
                                 "a backend, e.g. FLASH_ATTN")):  # fmt: skip
        if value is not None and not value.strip():
            raise UsageError(f"{option} {value!r}: an empty value; give {want}, or leave "
                             f"{option} out for the target's own")  # fmt: skip
    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env {item}: expected NAME=VALUE")
        if not name.strip():
            raise UsageError(f"--env {item!r}: the NAME is empty; give NAME=VALUE, e.g. "
                             "--env VLLM_USE_V1=1")  # fmt: skip
        env[name] = value
    return Overrides(
        ctx_size=args.ctx_size,
        parallel=args.parallel,
        env=env,
        kv_dtype=args.kv_cache_dtype,
        attention_backend=args.attention_backend,
        max_model_len=args.max_model_len,
    )


def _config(args: argparse.Namespace, loaded: Lock) -> config.PreflightConfig:
    """locks/preflight.json (or --preflight), checked against the lock it describes."""
    default = args.lock.parent / config.DEFAULT_NAME
    if args.preflight is not None and not _is(args.preflight, Path.is_file, "--preflight"):
        why = "no such file" if not args.preflight.exists() else "not a file"
        raise UsageError(
            f"--preflight {args.preflight}: {why}; give the calibrations file, or leave "
            f"--preflight out for the lock's ({default})"
        )
    cfg = config.load(args.preflight or default)
    config.check_names(cfg, targets=loaded.targets, payloads=loaded.payloads, lock=loaded.path)
    for name, plan_ in sorted(cfg.targets.items()):
        try:
            if plan_.card is not None:
                host.card_named(plan_.card)
        except UsageError:  # the table's own lookup, reported against the file
            raise LockError(
                f"{cfg.path}: targets.{name}.card: {plan_.card!r} is not a known card; "
                f"one of {', '.join(host.CARDS)}"
            ) from None
    return cfg


def _is(path: Path, kind: Callable[[Path], bool], option: str) -> bool:
    """``kind(path)`` (Path.is_file, Path.is_dir); a path stat refuses is a UsageError."""
    try:
        return kind(path)
    except OSError as exc:  # a name past 255 bytes: Errno 36 from stat, on Python 3.11
        raise UsageError(f"{option} {path}: not a usable path ({exc.strerror or exc}); give "
                         "one whose every name is at most 255 bytes") from None  # fmt: skip


def _store(args: argparse.Namespace) -> Path:
    """--store, which must be a directory; else the default, which may be absent."""
    if args.store is None:
        return default_store(os.environ)
    if not _is(args.store, Path.is_dir, "--store"):
        raise UsageError(
            f"--store {args.store}: not a directory; give the payload store `nox -s payloads` "
            f"fills, or leave --store out for {default_store(os.environ)}"
        )
    return Path(args.store)


def _parser_env(
    args: argparse.Namespace, loaded: Lock, version: str
) -> vllm_parser.ParserEnv | vllm_parser.Unavailable:
    """Where vLLM ``version``'s parser is (--vllm-parser, else under --cache), if usable."""
    if args.vllm_parser == vllm_parser.OFF:
        return vllm_parser.Unavailable(
            reason="vLLM's parser is turned off (--vllm-parser off, LOCKPIPE_VLLM_PARSER)",
            fix="leave --vllm-parser out",
        )
    where = Path(args.vllm_parser) if args.vllm_parser else vllm_parser.env_dir(args.cache, version)
    return vllm_parser.find_env(where, version, vllm_release.rules_of(loaded, version)["wheel"])


def _vllm_parses(
    args: argparse.Namespace,
    loaded: Lock,
    targets: Sequence[Target],
    over: Overrides,
    asks: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> dict[str, vllm_parser.Parsed]:
    """Each vLLM target's serve command, as asked, through its version's own parser: one
    run per version; Unavailable (and a line saying so) where that parser cannot run.
    ``asks``: per target, what vLLM's own backend and page functions are asked in the same
    run (:func:`lockpipe.preflight.plan.validation_request`)."""
    groups: dict[str, list[Target]] = {}
    for t in targets:
        if t.serve.runtime == "vllm" and t.external is None:
            groups.setdefault(t.build_args.get("VLLM_VERSION", "?"), []).append(t)
    out: dict[str, vllm_parser.Parsed] = {}
    for version, group in groups.items():
        names = ", ".join(t.name for t in group)
        found = _parser_env(args, loaded, version)
        if isinstance(found, vllm_parser.ParserEnv):
            commands = [vllm_parser.asked(t.serve.command, over) for t in group]
            validate = [(asks or {}).get(t.name) for t in group]
            parsed = vllm_parser.parse(found, commands, validate=validate)
            out.update(zip((t.name for t in group), parsed, strict=True))
        else:
            out.update((t.name, found) for t in group)
        gone = [p for p in (out[t.name] for t in group) if isinstance(p, vllm_parser.Unavailable)]
        if gone:
            echo(f"preflight: vLLM {version}'s own parser did not read the serve command of "
                 f"{names}; lockpipe's extract did: {gone[0].reason} (fix: {gone[0].fix})",
                 style="yellow")  # fmt: skip
        else:
            echo(f"preflight: vLLM {version}'s own parser read the serve command of {names}")
    return out


def _refuse_typos(targets: Sequence[Target], over: Overrides) -> None:
    """A what-if value a target's runtime lacks, and no other target of the run takes,
    is a typo (``--kv-cache-dtype q5_9``): a usage error, before anything is judged."""
    offered: dict[str, tuple[str, list[str]]] = {}  # vLLM target -> (version, its dtypes)
    for t in targets:
        if t.serve.runtime == "vllm" and t.external is None:
            version = t.build_args.get("VLLM_VERSION", "?")
            try:
                facts = vllm_rules.release(version)
            except LockpipeError:  # no rules for this version: its own check says so
                continue
            offered[t.name] = (version, list(facts.get("kv_cache_dtypes") or ()))
    vllm = {d for _, dtypes in offered.values() for d in dtypes}
    llama_run = any(t.serve.runtime == "llama.cpp" for t in targets)
    for t in targets:
        if (why := over.refused(t.serve.runtime, vllm)) is not None:
            raise UsageError(f"{t.name}: {why}")
        version, dtypes = offered.get(t.name, ("", []))
        kv = over.kv_dtype
        if kv and dtypes and kv not in dtypes and not (llama_run and over.llama_kv_type()):
            raise UsageError(
                f"{t.name}: --kv-cache-dtype {kv}: vLLM {version} offers no such KV cache "
                f"dtype{hint(kv, dtypes)}; its dtypes are {', '.join(dtypes)}"
            )


def _failures(reports: Sequence[TargetReport], strict: bool, over: Overrides) -> str:
    """One line: which target fails, on which checks, as locked or as asked."""
    parts = []
    for r in reports:
        word = {"fail": "fails", "warn": "warns", "unknown": "is unknown"}.get(r.verdict)
        if word and (r.verdict == "fail" or strict):
            names = dict.fromkeys(c.name for c in r.checks if c.status == r.verdict)
            parts.append(f"{r.target} {word} ({', '.join(names)})")
    asked = over.asked()
    how = f"as asked ({' '.join(asked)})" if asked else "as locked"
    tail = "; --strict fails warnings and UNKNOWN too" if strict else ""
    return f"preflight: {how}, {'; '.join(parts)}{tail}"


def _judged_on(
    args: argparse.Namespace,
    loaded: Lock,
    cfg: config.PreflightConfig,
    card: host.Card | None,
    no_card: str | None,
    store: Path,
    name: str,
) -> tuple[host.Card | None, ModelShape | None] | None:
    """The card a target is judged on and its model's shape (None for an external image)."""
    target = loaded.target(name)
    if target.external is not None:
        return None
    gpu = target.build_args.get("GGML_CUDA", "ON").upper() != "OFF"
    named = cfg.target(name).card
    this = card or (_as_asked(args, host.card_named(named)) if named else None)
    if gpu and this is None:
        raise UsageError(
            f"{name}: no card to judge it on, and none on this host: {no_card}\n"
            f"fix: pass --gpu CARD ({', '.join(host.CARDS)}), or set targets.{name}.card "
            "in preflight.json"
        )
    return this, plan.model_shape(loaded, cfg, target, store if store.is_dir() else None)


def do_preflight(args: argparse.Namespace) -> int:
    if args.json is not None:
        report.check_json_path(args.json)
    over = _overrides(args)
    loaded = load_lock(args.lock)
    cfg = _config(args, loaded)
    store = _store(args)
    card, no_card = _card(args)
    if no_card:
        echo(f"preflight: no host card ({no_card.splitlines()[0]}); each target is judged "
             "on the card preflight.json names for it", style="yellow")  # fmt: skip
    reports = []
    names = targets(args, loaded)
    _refuse_typos([loaded.target(n) for n in names], over)
    judged = {n: _judged_on(args, loaded, cfg, card, no_card, store, n) for n in names}
    asks = {
        n: plan.validation_request(loaded, cfg, loaded.target(n), on[0], on[1], over)
        for n, on in judged.items()
        if on is not None
    }
    parses = _vllm_parses(args, loaded, [loaded.target(n) for n in names], over, asks)
    for name in names:
        target = loaded.target(name)
        ignored, why = over.not_for(target.serve.runtime)
        if ignored:
            verb = "does" if len(ignored) == 1 else "do"
            echo(f"preflight: {name}: {', '.join(ignored)} {verb} not apply to it ({why}); "
                 "judged without", style="yellow")  # fmt: skip
        if target.external is not None:
            reports.append(external.external_report(target))
            continue
        this, shape = judged[name] or (None, None)
        reports.append(plan.evaluate(loaded, cfg, target, this, shape, over, parses.get(name)))
    report.show(reports)
    if args.json:
        report.write_json(args.json, reports, strict=args.strict)
        if args.json != STDOUT:
            echo(f"preflight: report written to {args.json}")
    unknown = [r.target for r in reports if r.verdict == "unknown"]
    if unknown:
        echo(f"preflight: {', '.join(unknown)}: model shape unknown, not judged", style="magenta")
    if report.overall(reports, strict=args.strict) == "fail":
        echo(_failures(reports, args.strict, over), style="red")
        return CheckFailed.return_code
    return 0
