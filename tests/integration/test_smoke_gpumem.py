"""The GPU memory check end to end through lockpipe.cmd.call, with a FAKE nvidia-smi.

This host has no GPU, so a shell script named nvidia-smi, in a folder named
fake-nvidia-smi placed first on PATH, stands in for the driver's tool: it logs its
arguments and prints the CSV files next to it, in nvidia-smi's own format.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lockpipe.errors import GpuAttachError
from lockpipe.lock.model import load_lock
from lockpipe.smoke.gpucheck import ensure_gpu_memory
from lockpipe.smoke.gpumem import QUERY_CARDS, QUERY_HOLDERS

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")

FAKE_NVIDIA_SMI = """#!/bin/sh
# FAKE nvidia-smi, for tests only: no GPU here. Prints the CSV files beside it.
here=$(dirname "$0")
echo "$*" >> "$here/calls.log"
if [ -f "$here/driver-down" ]; then
  echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
  exit 9
fi
case "$1" in
  --query-gpu=*) cat "$here/cards.csv" ;;
  --query-compute-apps=*) cat "$here/apps.csv" ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
"""
BUSY_3090 = "0, NVIDIA GeForce RTX 3090, 24576, 11996, 12250, 8.6\n"
IDLE_3090 = "0, NVIDIA GeForce RTX 3090, 24576, 1, 24244, 8.6\n"
PRODUCTION = "2771, /usr/bin/python3, 11990\n"  # the seeds' frank-small, serving on 7771


@pytest.fixture
def fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "fake-nvidia-smi"
    folder.mkdir()
    script = folder / "nvidia-smi"
    script.write_text(FAKE_NVIDIA_SMI)
    script.chmod(0o755)
    (folder / "apps.csv").write_text("")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder


def test_a_busy_card_stops_a_vllm_smoke_before_it_starts(fake_smi: Path) -> None:
    (fake_smi / "cards.csv").write_text(BUSY_3090)
    (fake_smi / "apps.csv").write_text(PRODUCTION)
    with pytest.raises(GpuAttachError) as err:
        ensure_gpu_memory(LOCK, LOCK.target("frank-small"))
    message = str(err.value)
    # 0.92 x 24,576 MiB: vLLM 0.29.0's CacheConfig default, from the wheel
    assert "GPU 0 (NVIDIA GeForce RTX 3090): 12250 MiB free, frank-small needs 22610 MiB" in message
    assert "pid 2771 /usr/bin/python3: 11990 MiB" in message
    assert "lower --gpu-memory-utilization" in message
    calls = (fake_smi / "calls.log").read_text().splitlines()
    assert calls == [" ".join(QUERY_CARDS), " ".join(QUERY_HOLDERS)]
    assert calls[0] == ("--query-gpu=index,name,memory.total,memory.used,memory.free,"
                        "compute_cap --format=csv,noheader,nounits")  # fmt: skip


def test_an_idle_card_lets_both_runtimes_start(fake_smi: Path) -> None:
    (fake_smi / "cards.csv").write_text(IDLE_3090)
    vllm = ensure_gpu_memory(LOCK, LOCK.target("frank-small"))
    assert "24244 MiB free" in vllm and "22610 MiB" in vllm
    llama = ensure_gpu_memory(LOCK, LOCK.target("llama-cuda-mtp"))
    assert "24244 MiB free" in llama and "at least" in llama


def test_a_llama_cpp_target_larger_than_the_free_memory_is_refused(fake_smi: Path) -> None:
    (fake_smi / "cards.csv").write_text("0, NVIDIA GeForce RTX 3060, 12288, 6200, 5800, 8.6\n")
    (fake_smi / "apps.csv").write_text("4100, ollama, 6190\n")
    target = LOCK.target("llama-cuda")  # the model, its MTP assistant and its mmproj
    need = -(-sum(LOCK.payloads[p].size or 0 for p in target.payloads) // 2**20)  # MiB, up
    assert need > 5800
    with pytest.raises(GpuAttachError, match=rf"5800 MiB free, llama-cuda needs {need} MiB"):
        ensure_gpu_memory(LOCK, target)


def test_a_driver_that_does_not_answer_is_reported_with_its_output(fake_smi: Path) -> None:
    (fake_smi / "driver-down").touch()
    with pytest.raises(GpuAttachError, match="couldn't communicate with the NVIDIA driver"):
        ensure_gpu_memory(LOCK, LOCK.target("frank-small"))
