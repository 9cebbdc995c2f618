"""``python -m lockpipe preflight`` on a lock or a ``locks/preflight.json`` with one bad
value: a verdict or one error line naming the value, never a traceback.

Each case was found by mutating the shipped files one value at a time and running the
CLI (issue 18): before its fix, each one ended in a Python traceback, and a block count of
2**40 made preflight take 12 GB until the kernel killed it. The vLLM parser is off
(``LOCKPIPE_VLLM_PARSER=off``), so the extract reads the command: no network, no torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import CheckFailed, FormatError, LockError

REPO = Path(__file__).resolve().parents[2]
Doc = dict[str, Any]


def _preflight(
    tmp_path: Path, edit_lock: Callable[[Doc], None] = lambda d: None,
    edit_preflight: Callable[[Doc], None] = lambda d: None, *targets: str,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    (tmp_path / "locks").mkdir()
    (tmp_path / "images").symlink_to(REPO / "images")
    (tmp_path / "store").mkdir()
    for name, edit in (("digests", edit_lock), ("preflight", edit_preflight)):
        doc = json.loads((REPO / "locks" / f"{name}.json").read_text())
        edit(doc)
        (tmp_path / "locks" / f"{name}.json").write_text(json.dumps(doc))
    env = {**os.environ, "LOCKPIPE_VLLM_PARSER": "off"}
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "preflight", "--lock",
         str(tmp_path / "locks" / "digests.json"), "--gpu", "rtx3090", "--store",
         str(tmp_path / "store"), "--cache", str(tmp_path / "cache"), *targets],
        env=env, capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip


def _command(doc: Doc, target: str) -> list[str]:
    command: list[str] = doc["targets"][target]["serve"]["command"]
    return command


def _one_error(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == code, out.stdout + out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    for w in words:
        assert w in line, line


def test_a_cache_type_llama_cpp_lacks_is_a_failed_check(tmp_path: Path) -> None:
    """'-ctv' lost its value, so '-c' is read as the V type: llama-server refuses it
    ("Unsupported cache type", common/arg.cpp); it was a KeyError in the KV sizing."""

    def drop_v_type(doc: Doc) -> None:
        command = _command(doc, "llama-cuda-slots")
        del command[command.index("--cache-type-v") + 1]

    out = _preflight(tmp_path, drop_v_type, lambda d: None, "llama-cuda-slots")
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == CheckFailed.return_code, out.stdout + out.stderr
    assert "--cache-type-v -c is not a b10069 cache type" in out.stdout, out.stdout


def test_a_head_size_the_quantized_cache_cannot_block_is_a_failed_check(
    tmp_path: Path,
) -> None:
    """llama_init_from_model refuses a V cache type whose block does not divide the head
    size (src/llama-context.cpp "does not divide n_embd_head_v"); it was a ValueError."""

    def odd_heads(doc: Doc) -> None:
        doc["models"]["gemma-4-12b-q4_k_m"]["gguf"]["gemma4.attention.value_length"] = 240

    out = _preflight(tmp_path, lambda d: None, odd_heads, "llama-cuda-slots")
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == CheckFailed.return_code, out.stdout + out.stderr
    assert "does not divide head size 240" in out.stdout, out.stdout


def test_a_vllm_number_the_extract_cannot_read_is_one_error(tmp_path: Path) -> None:
    def empty_length(doc: Doc) -> None:
        command = _command(doc, "frank-small")
        command[command.index("--max-model-len") + 1] = ""

    out = _preflight(tmp_path, empty_length, lambda d: None, "frank-small")
    _one_error(out, LockError.return_code, "targets.frank-small.serve.command",
               "--max-model-len ''", "nox -s vllm-parser")  # fmt: skip


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["models"]["qwen3.8-27b-iq3_s-mtp"]["gguf"].__setitem__(
            "qwen35.block_count", 513), "llama.cpp loads at most 512 layers"),
        (lambda d: d["models"]["gemma-4-12b-qat-w4a16"]["config"]["text_config"].__setitem__(
            "layer_types", 1.5), "layer_types is a number"),
        (lambda d: d["models"]["gemma-4-12b-qat-w4a16"]["config"]["text_config"].__setitem__(
            "num_hidden_layers", 2**30), "num_hidden_layers 1,073,741,824"),
    ],
)  # fmt: skip
def test_a_model_shape_of_another_kind_is_one_error(
    edit: Callable[[Doc], None], words: str, tmp_path: Path
) -> None:
    out = _preflight(tmp_path, lambda d: None, edit)
    _one_error(out, FormatError.return_code, words)


def test_a_calibration_dtype_preflight_cannot_size_is_one_error(tmp_path: Path) -> None:
    def unknown_dtype(doc: Doc) -> None:
        doc["targets"]["frank-small"]["vllm_pool"]["kv_dtype"] = "x"

    out = _preflight(tmp_path, lambda d: None, unknown_dtype, "frank-small")
    _one_error(out, LockError.return_code, "frank-small.vllm_pool.kv_dtype", "'x'")
