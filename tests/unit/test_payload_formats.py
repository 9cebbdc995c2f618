"""Header-only GGUF and safetensors checks, cross-checked against gguf-py and real files."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

from lockpipe.errors import FormatError
from lockpipe.lock.model import Format, Payload, Role, load_lock, parse_lock
from lockpipe.payloads import gguf as g
from lockpipe.payloads import safetensors as s
from lockpipe.payloads.checks import check_file, check_index, check_targets

LOCK = Path(__file__).parents[2] / "locks" / "digests.json"


def payload(filename: str, fmt: Format, role: Role = "model", **expect: Any) -> Payload:
    return Payload.one_file(
        name="p", repository="o/n", revision="a" * 40, filename=filename, size=1,
        sha256="b" * 64, role=role, format=fmt, expect=expect,
    )  # fmt: skip


def write_gguf(
    path: Path, arch: str, blocks: int, nextn: int = 0, meta_nextn: int | None = None
) -> Path:
    w = GGUFWriter(str(path), arch)
    w.add_block_count(blocks)
    if meta_nextn is not None:
        w.add_uint32(f"{arch}.nextn_predict_layers", meta_nextn)
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(300)])
    for i in range(blocks):
        w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((4, 32), dtype=np.float32))
    for i in range(blocks - nextn, blocks):
        w.add_tensor(f"blk.{i}.nextn.eh_proj.weight", np.zeros((2, 32), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_type_table_matches_gguf_py() -> None:
    for qtype, (block, size) in GGML_QUANT_SIZES.items():
        assert g.GGML_TYPES[qtype.value][1:] == (block, size), qtype.name


def test_mtp_model_needs_nextn_tensors_and_metadata(tmp_path: Path) -> None:
    ok = write_gguf(tmp_path / "m-mtp.gguf", "qwen3", 3, nextn=1, meta_nextn=1)
    assert (
        check_file(payload("m-mtp.gguf", "gguf", nextn_layers=1), ok, ok.stat().st_size).problems
        == []
    )
    plain = write_gguf(tmp_path / "plain.gguf", "qwen3", 3)
    problems = check_file(payload("x-mtp.gguf", "gguf"), plain, plain.stat().st_size).problems
    assert problems and "blk.N.nextn" in problems[0] and problems[0].startswith("payloads.p")


def test_mtp_assistant_counts_its_layers(tmp_path: Path) -> None:
    f = write_gguf(tmp_path / "a.gguf", "gemma4-assistant", 4)
    p = payload("a.gguf", "gguf", "mtp-assistant", arch="gemma4-assistant", nextn_layers=4)
    assert check_file(p, f, f.stat().st_size).problems == []
    p = payload("a.gguf", "gguf", "mtp-assistant", arch="gemma4", nextn_layers=2)
    assert len(check_file(p, f, f.stat().st_size).problems) == 2


def test_garbage_is_a_format_error_not_a_traceback(tmp_path: Path) -> None:
    f = tmp_path / "x.gguf"
    f.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + struct.pack("<Q", 1 << 40))
    with pytest.raises(FormatError, match=r"x\.gguf: not a readable GGUF file"):
        g.read_header(f)
    f.write_bytes(b"nope")
    with pytest.raises(FormatError, match="no GGUF magic"):
        g.read_header(f)


def test_a_long_string_array_is_skipped_exactly(tmp_path: Path) -> None:
    """A vocabulary is jumped over, not decoded: what follows it (metadata, the tensor table,
    the data offset) is read as gguf-py's own reader reads it, across the read-ahead window
    (a string longer than the window, strings straddling it), and a vocabulary cut short is
    a FormatError naming the array."""
    from gguf import GGUFReader

    path = tmp_path / "v.gguf"
    w = GGUFWriter(str(path), "llama")
    vocab = [f"tok{i}" * (i % 7) for i in range(g.WINDOW // 8)] + ["x" * (g.WINDOW + 5), "y"]
    w.add_array("tokenizer.ggml.tokens", vocab)
    w.add_uint32("after.vocab", 7)
    w.add_tensor("blk.0.attn_q.weight", np.zeros((4, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    header = g.read_header(path)
    real = GGUFReader(path)
    assert header.arrays["tokenizer.ggml.tokens"] == (8, len(vocab))
    assert header.metadata["after.vocab"] == 7
    assert [(t.name, t.offset) for t in header.tensors] == [
        (t.name, t.data_offset - real.data_offset) for t in real.tensors
    ]
    assert header.data_start == real.data_offset
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: g.WINDOW // 2])
    with pytest.raises(FormatError, match=r"tokenizer\.ggml\.tokens"):
        g.read_header(cut)


def write_st(path: Path, tensors: dict[str, tuple[str, list[int], int, int]], data: int) -> Path:
    head = {
        n: {"dtype": d, "shape": sh, "data_offsets": [b, e]} for n, (d, sh, b, e) in tensors.items()
    }
    raw = json.dumps(head).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * data)
    return path


def test_safetensors_layout_and_dtypes(tmp_path: Path) -> None:
    good = write_st(
        tmp_path / "a.safetensors", {"a": ("BF16", [2, 2], 0, 8), "b": ("BF16", [4], 8, 16)}, 16
    )
    assistant = payload("a.safetensors", "safetensors", "mtp-assistant")
    assert check_file(assistant, good, good.stat().st_size).problems == []
    quant = write_st(
        tmp_path / "q.safetensors", {"a": ("I32", [2], 0, 8), "b": ("BF16", [4], 8, 16)}, 16
    )
    [problem] = check_file(assistant, quant, quant.stat().st_size).problems
    assert "1 tensors in I32" in problem and "cannot draft" in problem
    gap = write_st(
        tmp_path / "g.safetensors", {"a": ("F32", [2], 0, 8), "b": ("F32", [1], 12, 16)}, 20
    )
    problems = s.layout_problems(s.read_header(gap), gap.stat().st_size)
    assert any("a gap" in m for m in problems) and any("file holds 20" in m for m in problems)


def test_index_must_match_its_shards(tmp_path: Path) -> None:
    shard = write_st(tmp_path / "s1.safetensors", {"a": ("F32", [1], 0, 4)}, 4)
    facts = check_file(payload("model-1.safetensors", "safetensors"), shard, shard.stat().st_size)
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(
        json.dumps({"weight_map": {"a": "model-1.safetensors", "b": "model-1.safetensors"}})
    )
    p = payload("model.safetensors.index.json", "json")
    [problem] = check_index(p, index, {"model-1.safetensors": facts})
    assert "1 mapped tensors absent" in problem
    assert "does not list" in check_index(p, index, {})[0]


def test_targets_of_the_real_lock_use_their_payloads_rightly() -> None:
    lock = load_lock(LOCK)
    assert check_targets(lock, sorted(lock.targets), {}) == []


def test_a_llama_target_that_serves_images_must_pass_an_mmproj() -> None:
    lock = load_lock(LOCK)
    doc = json.loads(LOCK.read_text())
    cmd = doc["targets"]["llama-cuda"]["serve"]["command"]
    i = cmd.index("--mmproj")
    del cmd[i : i + 2]
    doc["targets"]["llama-cuda"]["payloads"].remove("gemma-4-12b-mmproj-bf16")
    broken = parse_lock(doc, lock.path, lock.root)
    (problem,) = check_targets(broken, ["llama-cuda"], {})
    assert problem.startswith("targets.llama-cuda.serve.modalities has ['audio', 'vision']")
    assert "--mmproj {payload:NAME}" in problem
