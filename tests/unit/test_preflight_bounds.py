"""Malformed shapes and flags preflight must refuse with its own error, not a traceback or a
wrong PASS (issue 18): nested GGUF arrays, head sizes and head counts of 0, speculative flags
llama-server would refuse."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import CheckFailed, FormatError, LockError
from lockpipe.payloads.gguf import read_header
from lockpipe.preflight import recurrent
from lockpipe.preflight.shape import from_gguf, from_hf_config
from tests.frank_small import run_preflight

REPO = Path(__file__).resolve().parents[2]


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def nested_gguf(path: Path, depth: int) -> Path:
    """One key whose value is an array of arrays ``depth`` levels deep (one item each)."""
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _gguf_string("k") + struct.pack("<I", 9)
    body += struct.pack("<IQ", 9, 1) * (depth - 1) + struct.pack("<IQ", 4, 1) + struct.pack("<I", 7)
    path.write_bytes(body)
    return path


@pytest.mark.parametrize("depth", [2, 5000])
def test_an_array_of_arrays_is_refused_as_llama_cpp_refuses_it(tmp_path: Path, depth: int) -> None:
    """ggml/src/gguf.cpp reads one array level ("key '%s' has invalid GGUF type" for an
    array of arrays); 5,000 levels (60 KB) were a RecursionError in every header reader."""
    f = nested_gguf(tmp_path / "nested.gguf", depth)
    with pytest.raises(FormatError) as err:
        read_header(f)
    assert str(f) in str(err.value) and "'k' holds arrays" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_plain_array_still_reads(tmp_path: Path) -> None:
    f = nested_gguf(tmp_path / "flat.gguf", 1)
    assert read_header(f).metadata["k"] == [7]


def test_hidden_size_below_the_head_count_is_a_format_error() -> None:
    """head = 16 // 32 = 0: pages of 0 bytes, then ZeroDivisionError in vllm_kv."""
    config = {"num_hidden_layers": 2, "num_attention_heads": 32, "hidden_size": 16,
              "head_dim": None}  # fmt: skip
    with pytest.raises(FormatError, match="hidden_size 16 // num_attention_heads 32"):
        from_hf_config(config, source="config.json")


def _llama_meta(**over: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "general.architecture": "llama",
        "llama.block_count": 2,
        "llama.embedding_length": 64,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
    }
    for k, v in over.items():
        key = f"llama.{k.replace('__', '.')}"
        if v is None:
            meta.pop(key)
        else:
            meta[key] = v
    return meta


def test_a_plain_gguf_shape_still_reads() -> None:
    s = from_gguf(_llama_meta(), source="x.gguf")
    assert [(x.kv_heads, x.head_k, x.head_v) for x in s.layers] == [(2, 16, 16)] * 2


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"attention__head_count_kv": 0}, "llama.attention.head_count_kv is 0"),
        ({"attention__head_count_kv": [2, 0]}, "head_count_kv is 0 for layer 1"),
        (
            {
                "attention__head_count": 0,
                "attention__head_count_kv": 0,
                "attention__key_length": 16,
                "attention__value_length": 16,
            },
            "llama.attention.head_count is 0",
        ),
        ({"embedding_length": 2}, "head size of 0"),
    ],
)
def test_zero_heads_or_head_sizes_in_a_gguf_are_refused(over: dict[str, Any], key: str) -> None:
    """Taken before: 0 B of KV per token and a PASS. llama.cpp reads head_count 0 as a
    model without attention and a layer's head_count_kv 0 as a recurrent layer
    (src/llama-model.cpp), neither sized here."""
    with pytest.raises(FormatError, match=key):
        from_gguf(_llama_meta(**over), source="x.gguf")


@pytest.mark.parametrize("value", ["²", "1" + "0" * 5000, "2147483648", "-1", " 3"])
def test_spec_draft_n_max_is_a_bounded_ascii_count(value: str) -> None:
    """'²' passed str.isdigit() and int() raised ValueError; 5,000 digits hit Python's
    int-digits limit; past INT_MAX llama-server's std::stoi refuses it."""
    with pytest.raises(LockError, match="--spec-draft-n-max"):
        recurrent.speculative(["llama-server", "--spec-draft-n-max", value])


def test_spec_draft_n_max_reads_up_to_int_max() -> None:
    for value, n in (("16", 16), ("0016", 16), ("2147483647", 2**31 - 1)):
        assert recurrent.speculative(["--spec-draft-n-max", value]).draft_n_max == n


def _mtp_lock(root: Path, *extra: str) -> Path:
    (root / "locks").mkdir(parents=True)
    (root / "images").symlink_to(REPO / "images")
    doc = json.loads((REPO / "locks" / "digests.json").read_text())
    doc["targets"]["llama-cuda-mtp"]["serve"]["command"] += list(extra)
    path = root / "locks" / "digests.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    shutil.copy(REPO / "locks" / "preflight.json", root / "locks" / "preflight.json")
    return path


@pytest.mark.parametrize(
    ("flag", "shown"), [("-ctkd", "-ctkd"), ("-ctvd", "-ctvd"), ("--spec-draft-type-k", "-ctkd")]
)
def test_an_unknown_draft_cache_type_fails_as_an_unknown_ctk_does(
    tmp_path: Path, flag: str, shown: str
) -> None:
    """-ctkd q5_9 was lowered and sized unchecked: a KeyError in llama.row_bytes."""
    lock = _mtp_lock(tmp_path / "lock", flag, "Q5_9")
    code, by = run_preflight(
        tmp_path, "--gpu", "rtx3090", "--vllm-parser", "off", "llama-cuda-mtp", lock=lock
    )
    report = by["llama-cuda-mtp"]
    (check,) = [c for c in report["checks"] if c["name"] == "cache-type" and c["status"] == "fail"]
    assert code == CheckFailed.return_code and report["verdict"] == "fail"
    assert check["detail"].startswith(f"{shown} q5_9 is not a b10069 cache type")
    assert "did you mean q5_" in check["detail"] and "q5_0" in check["fix"]


def test_rollback_snapshots_that_fill_the_card_name_spec_draft_n_max(tmp_path: Path) -> None:
    """100,000,000 draft tokens keep as many snapshots of the recurrent state (about 15 PB):
    the fix said "a smaller quant or a bigger card", neither of which helps."""
    lock = _mtp_lock(tmp_path / "lock", "--spec-draft-n-max", "100000000")
    code, by = run_preflight(
        tmp_path, "--gpu", "rtx3090", "--vllm-parser", "off", "llama-cuda-mtp", lock=lock
    )
    budget = next(c for c in by["llama-cuda-mtp"]["checks"] if c["name"] == "budget")
    assert code == CheckFailed.return_code and budget["status"] == "fail"
    assert "the recurrent state alone" in budget["detail"]
    assert budget["fix"].startswith("a lower --spec-draft-n-max (100,000,000 rollback snapshots")
    assert "bigger card" not in budget["fix"]
