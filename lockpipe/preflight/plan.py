"""One lock target in, one :class:`TargetReport` out.

The model's shape comes from the payload in the store when it is there (the GGUF header,
or the snapshot's ``config.json``), else from ``locks/preflight.json``; the card from
``--gpu NAME`` or the host. Everything after :func:`model_shape` (which reads files) is
pure: the same inputs give the same report.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from lockpipe.errors import FormatError, LockError, UsageError
from lockpipe.fs import read_utf8
from lockpipe.jsonshape import Reader
from lockpipe.lock.model import Lock, Target
from lockpipe.payloads import store as payload_store
from lockpipe.payloads.gguf import read_header
from lockpipe.preflight import (
    host,
    llama_args,
    plan_llama,
    plan_vllm,
    recurrent,
    vllm_args,
    vllm_parser,
    vllm_release,
    vllm_validate,
)
from lockpipe.preflight.config import ModelEntry, PreflightConfig, TargetPlan
from lockpipe.preflight.shape import ModelShape, from_gguf, from_hf_config
from lockpipe.preflight.verdict import Check, Figure, TargetReport, checked
from lockpipe.preflight.whatif import Overrides


def model_shape(
    lock: Lock, cfg: PreflightConfig, target: Target, store: Path | None
) -> ModelShape | None:
    """The shape of the target's model payload: the stored file first, then preflight.json.

    None when neither has it: preflight then says UNKNOWN for the target rather than
    judge it on numbers nobody measured (see :func:`unknown_check`).
    """
    payload = next(
        (lock.payloads[p] for p in target.payloads if lock.payloads[p].role == "model"), None
    )
    if payload is None:
        raise FormatError(f"targets.{target.name}: no payload with role model")
    entry = cfg.models.get(payload.name)
    if store is not None and payload.revision:
        path = payload_store.payload_path(store, payload)
        if payload.format == "gguf" and path.is_file():
            header = read_header(path)
            shape = from_gguf(header.metadata, source=str(path), long_arrays=list(header.arrays))
            drift = disagreements(entry, "gguf", header.metadata, unread=set(header.arrays))
            return replace(shape, disagrees=drift)
        config = path / "config.json"
        if payload.snapshot and config.is_file():
            doc = Reader(where=str(config), root="config.json", error=FormatError,
                         fix="fetch the payload again (lockpipe payloads)").parse(
                config.read_bytes())  # fmt: skip
            shape = from_hf_config(doc, source=str(config))
            return replace(shape, disagrees=disagreements(entry, "config", doc))
    if entry is None:
        return None
    source = f"{cfg.path}: models.{payload.name}"
    if entry.kind == "gguf":
        return from_gguf(entry.data, source=source)
    return from_hf_config(entry.data, source=source)


def disagreements(
    entry: ModelEntry | None,
    kind: str,
    real: Mapping[str, Any],
    unread: Collection[str] = (),
) -> tuple[str, ...]:
    """The keys of a models entry whose values the real GGUF header or config.json contradicts.

    An entry is a transcript kept for when the file is not here; once it is, the file wins
    and every key it contradicts is named. A key the file lacks counts as contradicted; one
    in ``unread`` (a GGUF array too long for the header reader to keep) is not compared.
    """
    if entry is None or entry.kind != kind:
        return ()
    return _diff({k: v for k, v in entry.data.items() if k not in unread}, real, "")


def _diff(said: Mapping[str, Any], real: Mapping[str, Any], prefix: str) -> tuple[str, ...]:
    out: list[str] = []
    for key, value in said.items():
        name, actual = f"{prefix}{key}", real.get(key)
        if isinstance(value, Mapping) and isinstance(actual, Mapping):
            out += _diff(value, actual, f"{name}.")
        elif not _same(value, actual):
            out.append(f"{name}: the entry says {value!r}, the file {actual!r}")
    return tuple(out)


def _same(said: Any, real: Any) -> bool:
    """Equal, floats within float32's precision (a GGUF stores f32, JSON a decimal)."""
    numbers = isinstance(said, (int, float)) and isinstance(real, (int, float))
    if numbers and (isinstance(said, float) or isinstance(real, float)):
        return math.isclose(said, real, rel_tol=1e-6, abs_tol=1e-12)
    if isinstance(said, list) and isinstance(real, list):
        return len(said) == len(real) and all(map(_same, said, real))
    return bool(said == real)


def disagreement_check(cfg: PreflightConfig, payload: str, shape: ModelShape) -> Check:
    return Check(
        name="model-entry",
        status="warn",
        detail=f"models.{payload} disagrees with the file ({shape.source}): "
        + "; ".join(shape.disagrees),
        fix=f"correct models.{payload} in {cfg.path or 'locks/preflight.json'} from the "
        "file (the figures above come from the file)",
    )


def unknown_check(lock: Lock, cfg: PreflightConfig, target: Target) -> Check:
    """The UNKNOWN verdict of a target whose model shape no stored header or entry gives."""
    payload = next(p for p in target.payloads if lock.payloads[p].role == "model")
    return Check(
        name="model-shape",
        status="unknown",
        detail=f"the model shape of payloads.{payload} (layers, KV heads, head sizes, "
        "sliding window, trained context) is unknown: no KV, slot or budget figure can "
        "be computed",
        fix=f"pin the model's GGUF header: run `nox -s payloads -- {payload}` then "
        f"preflight reads it (--store), or add models.{payload} to "
        f"{cfg.path or 'locks/preflight.json'} from the real header",
    )


def weights_bytes(lock: Lock, cfg: PreflightConfig, target: Target) -> int | None:
    """What the runtime loads: preflight.json's ``weights_bytes``, else the lock's sizes."""
    if (w := cfg.target(target.name).weights_bytes) is not None:
        return w
    sizes = [f.size for p in target.payloads for f in lock.payloads[p].files]
    return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


def draft_arch(lock: Lock, target: Target) -> str | None:
    """The GGUF architecture of the target's MTP assistant (``expect.arch``, which the
    payload check holds to the file's header), for the context it makes on the card."""
    drafts = [lock.payloads[p] for p in target.payloads if lock.payloads[p].role == "mtp-assistant"]
    arch = drafts[0].expect.get("arch") if len(drafts) == 1 else None
    return arch if isinstance(arch, str) else None


def host_checks(lock: Lock, cfg: PreflightConfig, target: Target, card: host.Card) -> list[Check]:
    runtime = "VLLM_BASE" if target.serve.runtime == "vllm" else "RUNTIME_BASE"
    ref = lock.bases[target.bases[runtime]].ref if runtime in target.bases else ""
    cuda = host.cuda_version(ref)
    out = []
    if card.driver and cuda:
        out.append(
            checked(
                "driver",
                host.driver_problem(card.driver, cuda),
                f"driver {card.driver} runs CUDA {'.'.join(map(str, cuda))} ({ref})",
                "upgrade the host driver (NVIDIA's table in docs/preflight.md)",
            )
        )
    archs = target.build_args.get("CMAKE_CUDA_ARCHITECTURES") or cfg.target(target.name).image_archs
    if archs:
        fail, warn = host.arch_problem(archs, card.compute_cap)
        if warn:
            out.append(Check(name="arch", status="warn", detail=warn))
        else:
            out.append(
                checked(
                    "arch",
                    fail,
                    f"the image's sm {archs} runs on {card.cc}",
                    f"CMAKE_CUDA_ARCHITECTURES={card.compute_cap[0]}{card.compute_cap[1]}",
                )
            )
    return out


def _llama(
    target: Target,
    plan: TargetPlan,
    card: host.Card | None,
    shape: ModelShape,
    weights: int | None,
    over: Overrides,
    draft_arch: str | None = None,
) -> tuple[list[Check], list[Figure], dict[str, Any]]:
    args = llama_args.parse(target.serve.command)
    try:  # the what-ifs: --parallel 0 or a negative -c is the command line's fault
        args = llama_args.with_overrides(
            args, ctx=over.ctx_size, parallel=over.parallel, kv_type=over.llama_kv_type()
        )
    except (UsageError, FormatError) as exc:
        raise UsageError(f"{target.name} (llama.cpp) as asked: {exc}") from None
    t = plan_llama.LlamaTarget(
        args=args,
        build_args=target.build_args,
        declared_context=None if over.ctx_size else target.serve.context,
        shape=shape,
        card=card,
        plan=plan,
        weights_bytes=weights,
        spec=recurrent.speculative(target.serve.command),
        draft_arch=draft_arch,
    )
    checks, cells = plan_llama.slot_checks(t)
    checks += plan_llama.type_checks(t)
    if any(c.name == "cache-type" and c.status == "fail" for c in checks):
        # llama_init_from_model refuses the context before it allocates: nothing to size
        return checks, [], {}
    more, figures, numbers = plan_llama.budget(t, cells)
    return checks + more, figures, numbers


def read_dockerfile_env(lock: Lock, target: Target) -> dict[str, str]:
    """The ``ENV`` the target's Dockerfile sets (vLLM reads them at start); none without one."""
    dockerfile = lock.root / target.context / target.dockerfile
    return (
        vllm_args.dockerfile_env(read_utf8(dockerfile, LockError)) if dockerfile.is_file() else {}
    )


def _vllm_target(
    lock: Lock,
    target: Target,
    plan: TargetPlan,
    card: host.Card,
    shape: ModelShape,
    weights: int | None,
    over: Overrides,
    by_vllm: vllm_parser.Parsed | None = None,
) -> plan_vllm.VllmTarget:
    """The target's facts: its command as vLLM's parser read it (else the extract), the
    rules of its VLLM_VERSION, and what vLLM's own backend functions said of its layers."""
    args = extract_args(target, over)
    version = target.build_args.get("VLLM_VERSION", "?")
    validation: vllm_validate.Validation | vllm_validate.NotRun | None = None
    if isinstance(by_vllm, vllm_parser.Accepted):
        args = vllm_parser.as_vllm_args(by_vllm.engine, args)
        validation = vllm_validate.read(by_vllm.validation, version)
    elif isinstance(by_vllm, vllm_parser.Unavailable):
        validation = vllm_validate.NotRun(
            reason=f"vLLM's own functions run where its parser does: {by_vllm.reason}"
        )
    env = read_dockerfile_env(lock, target)
    return plan_vllm.VllmTarget(
        args=args,
        facts=vllm_release.rules_of(lock, version),
        shape=shape,
        card=card,
        plan=plan,
        weights_bytes=weights,
        env={**env, **target.serve.env, **over.env},  # the image's, the lock's, the what-if's
        declared_parallel=target.serve.parallel,
        validation=validation,
    )


def extract_args(target: Target, over: Overrides) -> vllm_args.VllmArgs:
    """The serve command as lockpipe's extract reads it, with the what-ifs applied."""
    parsed = vllm_args.parse_args(target.serve.command)
    return replace(
        parsed,
        kv_dtype=over.kv_dtype or parsed.kv_dtype,
        backend=over.attention_backend or parsed.backend,
        max_model_len=parsed.max_model_len if over.max_model_len is None else over.max_model_len,
    )


def validation_request(
    lock: Lock,
    cfg: PreflightConfig,
    target: Target,
    card: host.Card | None,
    shape: ModelShape | None,
    over: Overrides,
) -> dict[str, Any] | None:
    """What vLLM's own backend and page functions are asked about this vLLM target's layers
    (:mod:`.vllm_validate`), from the extract's reading; None where nothing can be asked."""
    if target.serve.runtime != "vllm" or card is None or shape is None or not shape.kv_layers:
        return None
    t = _vllm_target(lock, target, cfg.target(target.name), card, shape, None, over)
    return plan_vllm.validation_request(t)


def _vllm(
    name: str, t: plan_vllm.VllmTarget, by_vllm: vllm_parser.Parsed | None
) -> tuple[list[Check], list[Figure], dict[str, Any]]:
    if t.args.unread and not isinstance(by_vllm, (vllm_parser.Accepted, vllm_parser.Refused)):
        raise LockError(
            f"targets.{name}.serve.command: {', '.join(t.args.unread)}: lockpipe's extract "
            "reads plain numbers only, and vLLM's own parser did not run to read it. Write "
            "a plain number, or build the parser (nox -s vllm-parser -- VERSION) so vLLM "
            "reads or refuses it"
        )
    said = vllm_parser.check(by_vllm, name) if by_vllm else None
    checks, figures, numbers = plan_vllm.evaluate(t)
    read = vllm_parser.figure(by_vllm, t.args)
    numbers["serve_command"] = f"{read.value} ({read.note})"
    return ([said] if said else []) + checks, [read, *figures], numbers


def evaluate(
    lock: Lock,
    cfg: PreflightConfig,
    target: Target,
    card: host.Card | None,
    shape: ModelShape | None,
    over: Overrides,
    by_vllm: vllm_parser.Parsed | None = None,
) -> TargetReport:
    """The report of one target on ``card`` (None: a CPU build, or no card known).

    ``shape`` None (unknown): the host checks only, and an UNKNOWN verdict. ``by_vllm``:
    a vLLM target's serve command (as asked) through vLLM's own parser
    (:mod:`.vllm_parser`); None when the caller did not run it, and the extract reads it.
    """
    plan, weights = cfg.target(target.name), weights_bytes(lock, cfg, target)
    cpu = target.build_args.get("GGML_CUDA", "ON").upper() == "OFF"
    gpu = None if cpu else card
    checks: list[Check]
    figures: list[Figure]
    numbers: dict[str, Any]
    if shape is None:
        checks, figures, numbers = [unknown_check(lock, cfg, target)], [], {}
    elif target.serve.runtime == "llama.cpp":
        checks, figures, numbers = _llama(
            target, plan, gpu, shape, weights, over, draft_arch(lock, target)
        )
    elif gpu is None:
        raise UsageError(f"targets.{target.name}: a vLLM target needs a card (--gpu CARD)")
    else:
        t = _vllm_target(lock, target, plan, gpu, shape, weights, over, by_vllm)
        checks, figures, numbers = _vllm(target.name, t, by_vllm)
    if gpu is not None:
        checks = host_checks(lock, cfg, target, gpu) + checks
    if shape is not None and shape.disagrees:
        model = next(p for p in target.payloads if lock.payloads[p].role == "model")
        checks.insert(0, disagreement_check(cfg, model, shape))
    name = "CPU" if gpu is None else f"{gpu.name} ({gpu.memory_mib:,} MiB, sm {gpu.cc})"
    return TargetReport(
        target=target.name,
        runtime=target.serve.runtime,
        card=name,
        figures=(
            Figure(name="model", value=shape.name, note=shape.source)
            if shape
            else Figure(name="model", value="UNKNOWN", note="no stored header, no models entry"),
            *figures,
        ),
        checks=tuple(checks),
        numbers=numbers,
    )
