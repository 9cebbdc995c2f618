"""The README, docs and the GPU workflow only name sessions and verbs that exist."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import nox.registry
import yaml

from lockpipe.cli.main import VERBS

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _sessions() -> frozenset[str]:
    spec = importlib.util.spec_from_file_location("noxfile", REPO / "noxfile.py")
    assert spec and spec.loader
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return frozenset(nox.registry.get())


def _named_sessions(text: str) -> set[str]:
    """Session names after each ``nox -s``, up to the first option or ``--``."""
    names = set()
    for tail in re.findall(r"nox -s ([^\n`|]+)", text):
        for word in tail.split():
            if word.startswith("-") or not re.fullmatch(r"[\w-]+", word):
                break
            names.add(word)
    return names


def test_every_session_the_docs_name_exists() -> None:
    sessions = _sessions()
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        missing = _named_sessions(doc.read_text()) - sessions
        assert not missing, f"{doc.name} names sessions that do not exist: {missing}"


def test_every_verb_is_a_session_and_back() -> None:
    assert set(VERBS) <= _sessions()
    # lint is both; tests and unit run pytest; constraints re-pins lockpipe's own deps;
    # vllm-parser builds vLLM's own serve-argument parser for preflight
    assert _sessions() - set(VERBS) == {"tests", "unit", "constraints", "vllm-parser"}


def test_gpu_workflow_runs_on_the_gpu_label_and_names_real_sessions() -> None:
    text = (REPO / ".github/workflows/gpu-smoke.yml").read_text()
    flow = yaml.safe_load(text)
    job = flow["jobs"]["smoke"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert _named_sessions(text) <= _sessions()
    assert any("--gpu" in step.get("run", "") for step in job["steps"])
    for step in job["steps"]:
        if "uses" in step:
            assert re.search(r"@[0-9a-f]{40}$", step["uses"]), f"{step['uses']} is not pinned"
