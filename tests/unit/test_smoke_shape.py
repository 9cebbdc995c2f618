"""Serving shapes: the key a baseline is filed under, from the lock's serve entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.lock.model import load_lock
from lockpipe.smoke.shape import EXAMPLE, Shape, parse_key, shape_of

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")


def test_each_committed_target_has_the_shape_its_serve_entry_declares() -> None:
    assert {n: shape_of(t.serve).key for n, t in LOCK.targets.items()} == {
        "frank-small": "kv=bfloat16,ctx=131072,par=2",  # bf16 KV, two 131,072-token sessions
        "llama-cpu": "kv=f16,ctx=8192,par=1",
        "llama-cuda": "kv=q8_0,ctx=default,par=1",  # --fit sizes the context
        "llama-cuda-mtp": "kv=f16,ctx=131072,par=1",  # Qwen3.8-27B -mtp, one slot
        "llama-cuda-slots": "kv=q8_0,ctx=262144,par=4",  # each of 4 slots the full window
        "frank-large": "kv=default,ctx=200192,par=2",  # external: HALOGEN_CTX, two slots
    }


@pytest.mark.parametrize(
    ("key", "shape"),
    [
        (EXAMPLE, Shape("bfloat16", 131072, 2)),
        ("kv=turboquant_k8v4,ctx=262144,par=2", Shape("turboquant_k8v4", 262144, 2)),
        ("kv=default,ctx=default,par=default", Shape(None, None, None)),
    ],
)
def test_a_key_round_trips(key: str, shape: Shape) -> None:
    assert parse_key(key) == shape
    assert shape.key == key


@pytest.mark.parametrize(
    "key",
    ["accept", "pp@67k", "kv=bf16", "ctx=262144,kv=bf16,par=2", "kv=bf16,ctx=256k,par=2",
     "kv=bf16,ctx=0262144,par=2", "kv=bf16, ctx=262144, par=2", "kv=,ctx=1,par=1"],
)  # fmt: skip
def test_anything_else_is_not_a_key(key: str) -> None:
    assert parse_key(key) is None
