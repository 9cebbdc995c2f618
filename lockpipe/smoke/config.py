"""What each target's smoke run must see: ``locks/smoke.json``.

Kept apart from the lock on purpose: these are expectations, not build inputs,
so tuning a prompt or a baseline never changes a fingerprint or a build key.
Per target: ``ready_seconds``, ``generation`` (prompts and the words each answer
must hold), optional ``image`` and ``audio`` checks, and ``probes`` with a
``tolerance``: throughput and spec-decode baselines, each under the serving shape it was
measured in (``"probes": {"kv=bfloat16,ctx=131072,par=2": {"pp@67k": {…}}}``, see
:mod:`lockpipe.smoke.shape`), read by metrics.load_baselines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lockpipe.errors import MetricsError, SmokeConfigError
from lockpipe.fs import read_utf8
from lockpipe.smoke.metrics import Probe, load_baselines
from lockpipe.spelling import unknown_keys

# Every key smoke.json may hold, per level: any other is a typo, refused with a hint
# (``"ready_secs": 5`` would otherwise be ignored and the default wait used).
TOP_KEYS = ("version", "targets")
TARGET_KEYS = ("ready_seconds", "generation", "image", "audio", "probes", "tolerance",
               "origin", "host")  # fmt: skip
GENERATION_KEYS = ("prompt", "expect", "max_tokens")
MEDIA_KEYS = {"rgb": ("prompt", "expect", "rgb"), "say": ("prompt", "expect", "say")}
PROBE_KEYS = ("value", "unit", "tolerance")
MAX_READY = 24 * 3600  # seconds: a day; a model that loads for longer is not "starting"
MAX_TOKENS = 1 << 20  # more than any served context


def _strict(where: str, raw: Any, known: tuple[str, ...]) -> None:
    if isinstance(raw, dict) and (lines := unknown_keys(where, raw, known)):
        raise SmokeConfigError("\n".join(lines))


@dataclass(frozen=True)
class Generation:
    prompt: str
    expect: tuple[str, ...]
    max_tokens: int = 16


@dataclass(frozen=True, kw_only=True)
class MediaCheck:
    prompt: str
    expect: tuple[str, ...]
    rgb: tuple[int, int, int] | None = None  # image: a solid square of this colour
    say: str | None = None  # audio: espeak-ng speaks this


@dataclass(frozen=True, kw_only=True)
class SmokeSpec:
    target: str
    ready_seconds: float
    generations: tuple[Generation, ...]
    image: MediaCheck | None
    audio: MediaCheck | None
    baselines: Mapping[str, Mapping[str, Probe]]  # serving shape key -> probe -> baseline

    @property
    def probe_names(self) -> tuple[str, ...]:
        """Every probe a run measures: those of any shape, in the order first written."""
        return tuple(dict.fromkeys(p for probes in self.baselines.values() for p in probes))

    def baseline(self, shape: str) -> Mapping[str, Probe] | None:
        """The baselines measured in ``shape`` (a key), or None when none were."""
        return self.baselines.get(shape)


def _words(where: str, raw: Any) -> tuple[str, ...]:
    """The words an answer must hold; SmokeConfigError naming ``where`` when malformed.
    An empty or blank word is refused: every answer holds it, even ``''``, so the check
    would pass whatever the server said."""
    if not isinstance(raw, list) or not raw or not all(isinstance(w, str) for w in raw):
        raise SmokeConfigError(f"{where}: must be a non-empty list of words")
    for i, word in enumerate(raw):
        if not word.strip():
            raise SmokeConfigError(
                f"{where}[{i}]: must be a word the answer holds, not {_shown(word)} "
                "(every answer holds an empty or blank word, so it would prove nothing)"
            )
    return tuple(raw)


def _number(where: str, raw: Any, *, whole: bool, most: float, what: str) -> float:
    """``raw`` as a number above 0 and at most ``most`` (a whole one if ``whole``), or
    SmokeConfigError naming ``where``: NaN, a string, a list or ``true`` is none."""
    kinds = (int,) if whole else (int, float)
    if type(raw) not in kinds or not (0 < raw <= most) or not math.isfinite(raw):
        kind = "a whole number" if whole else "a number"
        raise SmokeConfigError(
            f"{where}: must be {kind} of {what} above 0, at most {most:,.0f}; not {_shown(raw)}"
        )
    return float(raw) if not whole else int(raw)


def _shown(raw: Any) -> str:
    """``raw`` as the file wrote it, cut to a line's worth."""
    text = json.dumps(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _generation(where: str, raw: Any) -> Generation:
    _strict(where, raw, GENERATION_KEYS)
    if not isinstance(raw, dict) or not isinstance(raw.get("prompt"), str):
        raise SmokeConfigError(f'{where}: needs {{"prompt": "...", "expect": ["word", ...]}}')
    tokens = raw.get("max_tokens", 16)
    return Generation(
        raw["prompt"],
        _words(f"{where}.expect", raw.get("expect")),
        int(_number(f"{where}.max_tokens", tokens, whole=True, most=MAX_TOKENS, what="tokens")),
    )


def _media(where: str, raw: Any, key: str) -> MediaCheck | None:
    if raw is None:
        return None
    _strict(where, raw, MEDIA_KEYS[key])
    if not isinstance(raw, dict) or not isinstance(raw.get("prompt"), str) or key not in raw:
        raise SmokeConfigError(f'{where}: needs "prompt", "expect" and "{key}"')
    value = raw[key]
    if key == "rgb" and not (
        isinstance(value, list) and len(value) == 3
        and all(type(c) is int and 0 <= c <= 255 for c in value)
    ):  # fmt: skip
        raise SmokeConfigError(
            f"{where}.rgb: must be three integers 0-255, not {json.dumps(value)}"
        )
    if key == "say" and not (isinstance(value, str) and value.strip()):
        raise SmokeConfigError(f"{where}.say: must be the words to speak, not {_shown(value)}")
    return MediaCheck(
        prompt=raw["prompt"],
        expect=_words(f"{where}.expect", raw.get("expect")),
        rgb=(value[0], value[1], value[2]) if key == "rgb" else None,
        say=value if key == "say" else None,
    )


def load_smoke(path: Path) -> dict[str, SmokeSpec]:
    """Every target's SmokeSpec; SmokeConfigError naming the file and key when malformed
    (a missing file, a missing ``probes`` and an unknown key among them: exit 15)."""
    try:
        probes = load_baselines(path)  # also checks version, targets and each probe
    except MetricsError as exc:  # the same file: its faults are the smoke config's
        raise SmokeConfigError(str(exc)) from None
    doc = json.loads(read_utf8(path, SmokeConfigError))  # load_baselines read it already
    _strict(str(path), doc, TOP_KEYS)
    out = {}
    for name, raw in doc["targets"].items():
        where = f"{path}: targets.{name}"
        _strict(where, raw, TARGET_KEYS)
        for key, shape in raw["probes"].items():
            for probe, values in shape.items():
                _strict(f"{where}.probes.{key}.{probe}", values, PROBE_KEYS)
        gens = raw.get("generation")
        if not isinstance(gens, list) or not gens:
            raise SmokeConfigError(f"{where}.generation: needs at least one prompt")
        ready = raw.get("ready_seconds", 300)
        out[name] = SmokeSpec(
            target=name,
            ready_seconds=_number(
                f"{where}.ready_seconds", ready, whole=False, most=MAX_READY, what="seconds"
            ),
            generations=tuple(
                _generation(f"{where}.generation[{i}]", g) for i, g in enumerate(gens)
            ),
            image=_media(f"{where}.image", raw.get("image"), "rgb"),
            audio=_media(f"{where}.audio", raw.get("audio"), "say"),
            baselines=probes.get(name, {}),
        )
    return out
