"""``locks/preflight.json``: what was measured on a host, and model shapes to plan with.

``models.PAYLOAD``: the shape of a payload's model when its file is not in the store:
``{"gguf": {GGUF metadata}}`` or ``{"config": {config.json}}``, each with an ``origin``.
``targets.NAME``: the card it serves on, named assumptions and at most one calibration:

- ``llama_slots``: two idle measurements of the same server at different slot counts
  (``slot_context``, ``cache_types``, ``points``: ``[{"slots", "used_mib"}, …]``), from
  which the budget inequality takes per-slot and fixed memory: ``fixed + slots x per_slot
  <= card``;
- ``vllm_pool``: a pool vLLM reported (``kv_dtype``, ``max_model_len``, ``pool_tokens``),
  from which the non-KV reserve is solved, so the other dtypes are predicted from it.

Every value carries an ``origin``. A malformed file is a LockError naming the key.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lockpipe.errors import LockError
from lockpipe.jsonshape import Reader, loads
from lockpipe.preflight import vllm_kv
from lockpipe.spelling import hint, unknown_keys

DEFAULT_NAME = "preflight.json"  # next to the lock: locks/preflight.json
# Named assumptions, used only where no measurement says better (see docs/preflight.md).
# Named assumptions (docs/preflight.md): no code gives them before a server runs on the card;
# a calibration in preflight.json (what smoke measured) replaces them
DEFAULT_VLLM_RESERVE_MIB = 3072  # vLLM non-KV: activation peak, CUDA graphs, CUDA context
DEFAULT_LLAMA_COMPUTE_MIB = 1024  # llama.cpp compute buffers and CUDA context


@dataclass(frozen=True, kw_only=True)
class SlotPoint:
    slots: int
    used_mib: int


@dataclass(frozen=True, kw_only=True)
class LlamaSlots:
    slot_context: int
    cache_types: tuple[str, str]
    points: tuple[SlotPoint, ...]
    origin: Mapping[str, Any]

    @property
    def per_slot_mib(self) -> float:
        a, b = self.points[0], self.points[-1]
        return (b.used_mib - a.used_mib) / (b.slots - a.slots)

    @property
    def fixed_mib(self) -> float:
        a = self.points[0]
        return a.used_mib - a.slots * self.per_slot_mib

    def need_mib(self, slots: int) -> float:
        return self.fixed_mib + slots * self.per_slot_mib


@dataclass(frozen=True, kw_only=True)
class VllmPool:
    kv_dtype: str
    max_model_len: int
    pool_tokens: int
    origin: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class TargetPlan:
    card: str | None = None
    weights_bytes: int | None = None  # what the runtime loads, where the lock lacks sizes
    reserve_mib: int | None = None  # vLLM non-KV reserve (assumption)
    compute_mib: int | None = None  # llama.cpp compute buffers (assumption)
    image_archs: str | None = None  # CUDA architectures of an image the lock cannot say
    llama_slots: LlamaSlots | None = None
    vllm_pool: VllmPool | None = None


@dataclass(frozen=True, kw_only=True)
class ModelEntry:
    kind: str  # "gguf" or "config"
    data: Mapping[str, Any]
    origin: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class PreflightConfig:
    path: Path | None
    models: Mapping[str, ModelEntry] = field(default_factory=dict)
    targets: Mapping[str, TargetPlan] = field(default_factory=dict)

    def target(self, name: str) -> TargetPlan:
        return self.targets.get(name, TargetPlan())


def _reader(where: str) -> Reader:
    """Reads one level of the file; ``where``: the file and the key, for the messages."""
    return Reader(where=where, root="the entry", error=LockError)


def _need(doc: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    return _reader(where).get(doc, (key,), kind)


MAX_COUNT = 2**31 - 1  # the lock's bound on a context (lock/schema.py COUNT)


def _count(doc: Mapping[str, Any], key: str, where: str) -> int:
    """A whole number of tokens vLLM reported, 1 to MAX_COUNT: a max_model_len of 0 was a
    ZeroDivisionError's traceback when the pool was solved from it."""
    value: int = _need(doc, key, int, where)
    if not 1 <= value <= MAX_COUNT:
        raise LockError(
            f"{where}.{key}: {value:,} is no token count vLLM reports; give the {key} from "
            f"the measured server's log, 1 to {MAX_COUNT:,}"
        )
    return value


def _origin(doc: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    origin = doc.get("origin")
    if not isinstance(origin, dict) or not origin.get("source"):
        raise LockError(f"{where}.origin: say where the values come from (origin.source)")
    return origin


# Every key preflight.json may hold, per level: any other is a typo, refused with a hint.
TOP_KEYS = ("version", "models", "targets")
MODEL_KEYS = ("gguf", "config", "origin")
TARGET_KEYS = ("card", "weights_bytes", "reserve_mib", "compute_mib", "image_archs",
               "llama_slots", "vllm_pool", "origin")  # fmt: skip
SLOTS_KEYS = ("points", "slot_context", "cache_types", "origin")
POINT_KEYS = ("slots", "used_mib")
POOL_KEYS = ("kv_dtype", "max_model_len", "pool_tokens", "origin")
# A target's plain values and their JSON types (TargetPlan's fields).
PLAIN = {"card": str, "weights_bytes": int, "reserve_mib": int, "compute_mib": int,
         "image_archs": str}  # fmt: skip


def _strict(where: str, doc: Any, known: tuple[str, ...]) -> None:
    if isinstance(doc, dict) and (lines := unknown_keys(where, doc, known)):
        raise LockError("\n".join(lines))


def _target(doc: Mapping[str, Any], where: str) -> TargetPlan:
    _strict(where, doc, TARGET_KEYS)
    read = _reader(where)
    slots = pool = None
    if doc.get("llama_slots") is not None:
        s, w = read.get(doc, ("llama_slots",), dict), f"{where}.llama_slots"
        _strict(w, s, SLOTS_KEYS)
        listed = _need(s, "points", list, w)
        rows = [_reader(w).get(s, ("points", i), dict) for i in range(len(listed))]
        for p in rows:
            _strict(f"{w}.points", p, POINT_KEYS)
        points = tuple(
            SlotPoint(
                slots=_need(p, "slots", int, f"{w}.points"),
                used_mib=_need(p, "used_mib", int, f"{w}.points"),
            )
            for p in rows
        )
        if len(points) < 2 or len({p.slots for p in points}) < 2:
            raise LockError(f"{w}.points: two measurements at different slot counts are needed")
        _rising(points, f"{w}.points")
        types = _need(s, "cache_types", list, w)
        if not 1 <= len(types) <= 2 or not all(isinstance(t, str) for t in types):
            raise LockError(f"{w}.cache_types: give the K and V cache types, e.g. "
                            '["q8_0", "q8_0"] (one for both: ["f16"])')  # fmt: skip
        slots = LlamaSlots(
            slot_context=_need(s, "slot_context", int, w),
            cache_types=(types[0], types[-1]),
            points=points,
            origin=_origin(s, w),
        )
    if doc.get("vllm_pool") is not None:
        v, w = read.get(doc, ("vllm_pool",), dict), f"{where}.vllm_pool"
        _strict(w, v, POOL_KEYS)
        dtype = _need(v, "kv_dtype", str, w)
        if not vllm_kv.modelled(dtype):
            raise LockError(
                f"{w}.kv_dtype: {dtype!r} is not a KV dtype preflight sizes; give the "
                "--kv-cache-dtype the measured server ran with (bfloat16, fp8, auto, …)"
            )
        pool = VllmPool(
            kv_dtype=dtype,
            max_model_len=_count(v, "max_model_len", w),
            pool_tokens=_count(v, "pool_tokens", w),
            origin=_origin(v, w),
        )
    plain: dict[str, Any] = {k: read.get(doc, (k,), t) for k, t in PLAIN.items() if k in doc}
    if ({"weights_bytes", "reserve_mib", "compute_mib"} & set(plain)) and "origin" not in doc:
        raise LockError(f"{where}.origin: say where weights_bytes/reserve_mib come from")
    return TargetPlan(llama_slots=slots, vllm_pool=pool, **plain)


def _rising(points: tuple[SlotPoint, ...], where: str) -> None:
    """Each slot holds its own KV, so more slots use more memory: a falling (or flat) pair
    would give a negative (or zero) per-slot cost, and any slot count would pass."""
    ordered = sorted(points, key=lambda p: p.slots)
    for a, b in itertools.pairwise(ordered):
        if b.slots > a.slots and b.used_mib <= a.used_mib:
            raise LockError(
                f"{where}: {b.slots} slots use {b.used_mib:,} MiB, no more than "
                f"{a.slots} slot(s) at {a.used_mib:,} MiB; the measurements must rise with the "
                "slot count (fix: measure each with the slots idle, the same -c, -ctk and -ctv)"
            )


def check_names(
    cfg: PreflightConfig, *, targets: Collection[str], payloads: Collection[str], lock: Path
) -> None:
    """Every ``targets.X`` and ``models.Y`` of ``cfg`` names a target or payload of the lock.

    A name the lock lacks is never looked up, so its calibration or shape would be
    dropped without a word (a renamed target silently loses its measurements).
    """
    for key, names, what in (("targets", targets, "target"), ("models", payloads, "payload")):
        given = cfg.targets if key == "targets" else cfg.models
        for name in sorted(set(given) - set(names)):
            raise LockError(
                f"{cfg.path}: {key}.{name}: {lock} has no {what} {name}{hint(name, names)} "
                f"(fix: rename it to "
                f"one of the lock's {what}s, {', '.join(sorted(names))}, or remove it)"
            )


def parse(doc: Any, path: Path | None) -> PreflightConfig:
    """The configuration in ``doc``, checked: a value of another shape or type is a
    LockError naming the file and the key, never a traceback further on."""
    where = str(path or "preflight")
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise LockError(f'{where}: expected an object with "version": 1')
    _strict(where, doc, TOP_KEYS)
    read = Reader(where=where, root="the file", error=LockError)
    models = {}
    for name in read.get(doc, ("models",), dict, {}):
        m = read.get(doc, ("models", name), dict)
        _strict(f"{where}: models.{name}", m, MODEL_KEYS)
        kinds = [k for k in ("gguf", "config") if k in m]
        if len(kinds) != 1 or not isinstance(m[kinds[0]], dict):
            raise LockError(f"{where}: models.{name}: give exactly one of gguf or config")
        models[name] = ModelEntry(
            kind=kinds[0], data=m[kinds[0]], origin=_origin(m, f"{where}: models.{name}")
        )
    targets = {
        n: _target(read.get(doc, ("targets", n), dict), f"{where}: targets.{n}")
        for n in read.get(doc, ("targets",), dict, {})
    }
    return PreflightConfig(path=path, models=models, targets=targets)


def load(path: Path) -> PreflightConfig:
    """``path``, or an empty configuration when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return PreflightConfig(path=None)
    except (OSError, UnicodeDecodeError) as exc:  # a directory, no permission, not text
        raise LockError(f"{path}: cannot be read as preflight calibrations "
                        f"({type(exc).__name__}: {exc}); give the JSON file") from None  # fmt: skip
    try:
        doc = loads(text)
    except json.JSONDecodeError as exc:
        raise LockError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    except ValueError as exc:  # nested too deeply (jsonshape.TooDeep)
        raise LockError(f"{path}: not JSON ({exc})") from None
    return parse(doc, path)
