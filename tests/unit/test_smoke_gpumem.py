"""GPU free memory before a --gpu smoke: nvidia-smi's CSV, each runtime's need, the message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lockpipe.errors import GpuAttachError, SmokeError
from lockpipe.lock.model import load_lock
from lockpipe.smoke.gpucheck import ensure_gpu_memory
from lockpipe.smoke.gpumem import (
    Card,
    Holder,
    Need,
    need_of,
    parse_cards,
    parse_holders,
    shortage,
    vllm_option,
)

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")

# nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free,compute_cap
#            --format=csv,noheader,nounits, on a host like the seeds' (production running:
# frank-small's 1-slot idle footprint, 11,996 MiB) plus a second, idle card.
CARDS = """\
0, NVIDIA GeForce RTX 3090, 24576, 11996, 12250, 8.6
1, NVIDIA GeForce RTX 3060, 12288, 1, 12037, 8.6
"""
# nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits
HOLDERS = """\
2771, /usr/bin/python3, 11990
3012, llama-server, [N/A]
"""


def card(index: int, name: str, total: int, used: int | None, free: int) -> Card:
    return Card(index=index, name=name, total_mib=total, used_mib=used, free_mib=free,
                compute_cap="8.6")  # fmt: skip


RTX3090 = card(0, "NVIDIA GeForce RTX 3090", 24576, 11996, 12250)
FRANK_HOLDERS = [Holder(2771, "/usr/bin/python3", 11990), Holder(3012, "llama-server", None)]


def test_cards_parse_from_real_format_csv() -> None:
    assert parse_cards(CARDS) == [
        RTX3090, card(1, "NVIDIA GeForce RTX 3060", 12288, 1, 12037),
    ]  # fmt: skip


def test_a_card_without_a_used_figure_still_parses() -> None:
    (card,) = parse_cards("0, NVIDIA A100-SXM4-80GB, 81920, [N/A], 81049, 8.0\n")
    assert (card.used_mib, card.free_mib) == (None, 81049)


@pytest.mark.parametrize(
    "text",
    ["0, NVIDIA GeForce RTX 3090, 24576, 1, [N/A], 8.6\n", "0, RTX 3090, 24576\n",
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", ""],
)  # fmt: skip
def test_unusable_card_output_is_an_error_quoting_it(text: str) -> None:
    with pytest.raises(GpuAttachError, match="nvidia-smi --query-gpu"):
        parse_cards(text)


def test_holders_parse_with_unknown_sizes_and_none_at_all() -> None:
    assert parse_holders(HOLDERS) == FRANK_HOLDERS
    assert parse_holders("") == []
    assert parse_holders("No running processes found\n") == []
    with pytest.raises(
        GpuAttachError, match="printed 'pid, name', not pid, process name, used MiB"
    ):
        parse_holders("pid, name\n")


@pytest.mark.parametrize(
    ("command", "value"),
    [
        (("vllm", "serve", "m"), None),
        (("vllm", "serve", "m", "--gpu-memory-utilization", "0.85"), "0.85"),
        (("vllm", "serve", "m", "--gpu-memory-utilization=0.5"), "0.5"),
    ],
)
def test_vllm_options_are_read_in_both_spellings(command: tuple[str, ...], value: str) -> None:
    assert vllm_option(command, "--gpu-memory-utilization") == value


def _vllm(*extra: str) -> Need:
    t = LOCK.target("frank-small")
    serve = dataclasses.replace(t.serve, command=(*t.serve.command, *extra))
    return need_of(dataclasses.replace(t, serve=serve), LOCK.payloads)


def test_vllm_needs_its_utilization_of_each_card_and_defaults_to_the_wheels() -> None:
    need = _vllm()  # vLLM 0.29.0's CacheConfig: Field(default=0.92, gt=0, le=1), not 0.9
    assert (need.utilization, need.cards) == (0.92, 1)
    assert need.mib(RTX3090) == 22610  # 0.92 x 24,576, rounded up
    assert _vllm("--gpu-memory-utilization", "0.45").mib(RTX3090) == 11060
    assert _vllm("--tensor-parallel-size", "2").cards == 2


@pytest.mark.parametrize("value", ["0", "1.5", "most"])
def test_a_utilization_vllm_would_refuse_names_the_lock_key(value: str) -> None:
    with pytest.raises(SmokeError, match=r"targets\.frank-small\.serve\.command.*0 < it <= 1"):
        _vllm("--gpu-memory-utilization", value)


def test_vllm_short_of_memory_names_card_figures_holders_and_the_fix() -> None:
    message = shortage("frank-small", _vllm(), [RTX3090], FRANK_HOLDERS)
    assert message is not None
    assert "GPU 0 (NVIDIA GeForce RTX 3090): 12250 MiB free, frank-small needs 22610 MiB" in message
    assert "--gpu-memory-utilization 0.92 x 24576 MiB" in message
    assert "pid 2771 /usr/bin/python3: 11990 MiB" in message
    assert "pid 3012 llama-server: size unknown" in message
    assert "stop them" in message and "lower --gpu-memory-utilization" in message


def test_vllm_with_enough_free_memory_passes() -> None:
    idle = dataclasses.replace(RTX3090, used_mib=1, free_mib=24244)
    assert shortage("frank-small", _vllm(), [idle], []) is None


def test_vllm_tensor_parallel_needs_as_many_cards() -> None:
    message = shortage("frank-small", _vllm("-tp", "2"), [RTX3090], [])
    assert message is not None and "needs 2 GPUs (--tensor-parallel-size 2)" in message
    assert "nvidia-smi lists 1" in message


def test_llama_cpp_needs_at_least_its_payloads_and_says_it_is_a_lower_bound() -> None:
    need = need_of(LOCK.target("llama-cuda"), LOCK.payloads)
    assert need.utilization is None
    # model + MTP assistant + mmproj, from the lock
    assert need.payload_bytes == 7121861440 + 465109248 + 175115840
    small = card(0, "NVIDIA GeForce RTX 3060", 12288, 6000, 6000)
    message = shortage("llama-cuda", need, [small], [Holder(7, "ollama", 5990)])
    assert message is not None
    assert "6000 MiB free, llama-cuda needs 7403 MiB" in message
    assert "lower bound" in message and "pid 7 ollama: 5990 MiB" in message
    roomy = dataclasses.replace(small, free_mib=12037)
    assert shortage("llama-cuda", need, [roomy], []) is None


def test_a_host_without_nvidia_smi_is_told_it_has_no_driver_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing here: nvidia-smi cannot be found
    with pytest.raises(GpuAttachError, match="no NVIDIA driver tools"):
        ensure_gpu_memory(LOCK, LOCK.target("frank-small"))


def test_llama_cpp_counts_the_free_memory_of_every_card_together() -> None:
    """llama.cpp splits its layers over all the cards it sees (-ngl 999, no --split-mode none)."""
    need = need_of(LOCK.target("llama-cuda"), LOCK.payloads)  # 7403 MiB
    two = [card(i, "NVIDIA GeForce RTX 3060", 12288, 8300, 3800) for i in (0, 1)]
    assert shortage("llama-cuda", need, two, []) is None  # 7600 MiB together
    tight = [dataclasses.replace(c, free_mib=3000) for c in two]
    message = shortage("llama-cuda", need, tight, [])
    assert message is not None and "GPUs 0, 1 together: 6000 MiB free" in message
    assert "run nvidia-smi as root" in message  # no holder listed: say why they may be hidden


@pytest.mark.parametrize("value", ["\u00b2", "1" * 5000, "0", "-2"])
def test_a_tensor_parallel_size_that_is_no_count_names_the_lock_key(value: str) -> None:
    """'²' passed str.isdigit() and 5,000 digits passed too: int() then raised ValueError."""
    with pytest.raises(SmokeError, match=r"--tensor-parallel-size .* is not a count of GPUs"):
        _vllm("--tensor-parallel-size", value)
