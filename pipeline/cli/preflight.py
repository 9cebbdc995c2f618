"""``lockpipe preflight``: will each target's serving shape fit its card? Nothing is started.

Exit 0 when no target fails (warnings and UNKNOWN model shapes allowed; ``--strict`` fails
on them too), 1 when one does (as ``smoke`` does when a check fails), and a PipelineError's
code when the inputs themselves are wrong.
"""

from __future__ import annotations

import argparse
import os

from pipeline.cli.options import targets
from pipeline.errors import CHECK_FAILED_RUN, GpuAttachError, UsageError
from pipeline.lock.model import load_lock
from pipeline.log import echo
from pipeline.payloads.store import default_store
from pipeline.preflight import config, external, host, plan, report


def _card(args: argparse.Namespace) -> tuple[host.Card | None, str]:
    """The card named by --gpu, else the host's; else None and why nvidia-smi gave none."""
    if args.gpu:
        card = host.card_named(args.gpu)
    else:
        try:
            card = host.query_host(args.gpu_index)
        except GpuAttachError as exc:  # no nvidia-smi, or it failed
            return None, str(exc)
    return host.Card(
        name=card.name,
        memory_mib=card.memory_mib,
        compute_cap=card.compute_cap,
        free_mib=args.free_mib if args.free_mib is not None else card.free_mib,
        driver=args.driver or card.driver,
    ), ""


def do_preflight(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    cfg = config.load(args.preflight or args.lock.parent / config.DEFAULT_NAME)
    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env {item}: expected NAME=VALUE")
        env[name] = value
    over = plan.Overrides(
        ctx_size=args.ctx_size,
        parallel=args.parallel,
        env=env,
        kv_dtype=args.kv_cache_dtype,
        attention_backend=args.attention_backend,
        max_model_len=args.max_model_len,
    )
    store = args.store or default_store(os.environ)
    card, no_card = _card(args)
    if no_card:
        echo(f"preflight: no host card ({no_card.splitlines()[0]}); each target is judged "
             "on the card preflight.json names for it", style="yellow")  # fmt: skip
    reports = []
    for name in targets(args, loaded):
        target = loaded.target(name)
        if target.external is not None:
            reports.append(external.external_report(target))
            continue
        gpu = target.build_args.get("GGML_CUDA", "ON").upper() != "OFF"
        named = cfg.target(name).card
        this = card or (host.card_named(named) if named else None)
        if gpu and this is None:
            raise UsageError(
                f"{name}: no card to judge it on, and none on this host: {no_card}\n"
                f"fix: pass --gpu CARD ({', '.join(host.CARDS)}), or set targets.{name}.card "
                "in preflight.json"
            )
        shape = plan.model_shape(loaded, cfg, target, store if store.is_dir() else None)
        reports.append(plan.evaluate(loaded, cfg, target, this, shape, over))
    report.show(reports)
    if args.json:
        report.write_json(args.json, reports)
        echo(f"preflight: report written to {args.json}")
    unknown = [r.target for r in reports if r.verdict == "unknown"]
    if unknown:
        echo(f"preflight: {', '.join(unknown)}: model shape unknown, not judged", style="magenta")
    bad = {"fail", "warn", "unknown"} if args.strict else {"fail"}
    failed = [r.target for r in reports if r.verdict in bad]
    if failed:
        echo(f"preflight: {', '.join(failed)} would not fit as locked", style="red")
        return CHECK_FAILED_RUN
    return 0
