"""The serving shape a baseline was measured in: KV-cache dtype, context, parallel slots.

A throughput or acceptance figure holds only for the shape it was measured in: bf16 KV
and turboquant_k8v4 differ in kernels, memory and speed, and so do one slot and two. So
``locks/smoke.json`` files each target's baselines under a shape key, and a run is judged
only by the baselines of its own shape, the one its lock entry (``targets.NAME.serve``:
``kv_dtype``, ``context``, ``parallel``) declares.

The key: ``kv=KV_DTYPE,ctx=CONTEXT,par=PARALLEL``, in that order, with ``default`` for a
value the lock leaves to the runtime: ``kv=bfloat16,ctx=131072,par=2``,
``kv=q8_0,ctx=default,par=1``. A ``pp@N``/``tg@N`` baseline must fit its shape's context:
a prompt of N tokens cannot have been measured in a shorter one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lockpipe.lock.model import Serve

DEFAULT = "default"
EXAMPLE = "kv=bfloat16,ctx=131072,par=2"  # frank-small as locked
_KEY = re.compile(
    r"kv=([A-Za-z0-9][A-Za-z0-9_.-]*),ctx=([1-9][0-9]{0,9}|default),"
    r"par=([1-9][0-9]{0,9}|default)"
)  # ten digits hold the lock's 2**31-1; int() of 5000 digits was a ValueError's traceback
FORMAT = "kv=KV_DTYPE,ctx=CONTEXT,par=PARALLEL (default where the lock sets none)"


@dataclass(frozen=True)
class Shape:
    kv_dtype: str | None
    context: int | None
    parallel: int | None

    @property
    def key(self) -> str:
        def show(v: object) -> str:
            return DEFAULT if v is None else str(v)

        return f"kv={show(self.kv_dtype)},ctx={show(self.context)},par={show(self.parallel)}"


def shape_of(serve: Serve) -> Shape:
    """The shape a lock's serve entry declares."""
    return Shape(serve.kv_dtype, serve.context, serve.parallel)


def parse_key(text: str) -> Shape | None:
    """The shape ``text`` names, or None when it is not a key in the canonical form."""
    m = _KEY.fullmatch(text)  # not match with "$": it took "…,par=2\n", a key no run has
    if m is None:
        return None

    def num(v: str) -> int | None:
        return None if v == DEFAULT else int(v)

    kv = None if m.group(1) == DEFAULT else m.group(1)
    return Shape(kv, num(m.group(2)), num(m.group(3)))
