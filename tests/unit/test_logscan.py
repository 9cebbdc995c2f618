"""Boot-log scanning against real vLLM 0.29.0 and llama.cpp b10069 lines (tests/data/logs).

The fixtures are rendered from the pinned sources; a ``# path:line ...`` comment above each
line names the call that emits it, and ``expect=NAME`` the fatal pattern the scan must report.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lockpipe.smoke.logscan import BENIGN, FATAL, Finding, scan, verdict

# The pattern smoke used before logscan.py: kept here to show what it got wrong.
BAD_LOG_LINES = re.compile(
    r"Traceback \(most recent call last\)|CUDA error|not supported|falling back|"
    r"fall back to|NotImplementedError|out of memory",
    re.IGNORECASE,
)

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
FIXTURES = {"vllm": "vllm", "llama.cpp": "llamacpp"}


def cases(name: str) -> list[tuple[str, str]]:
    """(comment, line) for every log line of a fixture; the comment is the last one above it."""
    comment, out = "", []
    for line in (LOGS / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            comment = line
        elif line.strip():
            assert len(comment) > 2, f"{name}: {line!r} has no source comment"
            out.append((comment, line))
    return out


def expected(comment: str) -> str:
    found = re.search(r"expect=(\S+)", comment)
    assert found, comment
    return found.group(1)


def test_old_regex_flags_at_least_30_real_vllm_lines_that_the_scan_passes() -> None:
    benign = cases("vllm-benign.txt")
    flagged = [line for _, line in benign if BAD_LOG_LINES.search(line)]
    assert len(flagged) == 121  # 119 logger calls + the backend survey + a DEBUG traceback
    assert len({comment for comment, line in benign if line in flagged}) >= 30
    for line in flagged:
        assert scan("vllm", line) == [], line


@pytest.mark.parametrize("runtime", sorted(FIXTURES))
def test_no_benign_line_is_reported(runtime: str) -> None:
    name = f"{FIXTURES[runtime]}-benign.txt"
    text = "\n".join(line for _, line in cases(name))
    assert scan(runtime, text) == []


@pytest.mark.parametrize("runtime", sorted(FIXTURES))
def test_every_line_the_old_regex_flagged_is_named_by_a_benign_pattern(runtime: str) -> None:
    for comment, line in cases(f"{FIXTURES[runtime]}-benign.txt"):
        if BAD_LOG_LINES.search(line):
            pattern = verdict(runtime, line)
            assert pattern is not None and pattern.kind == "benign", (comment, line)


@pytest.mark.parametrize("runtime", sorted(FIXTURES))
def test_every_fatal_line_is_reported_with_its_pattern_and_fix(runtime: str) -> None:
    patterns = {p.name: p for p in FATAL[runtime]}
    for comment, line in cases(f"{FIXTURES[runtime]}-fatal.txt"):
        name = expected(comment)
        got = scan(runtime, line)
        fix = patterns[name].explain
        assert got == [Finding(line_no=1, line=line.strip(), pattern=name, fix=fix)], comment


@pytest.mark.parametrize("runtime", sorted(FIXTURES))
def test_every_pattern_is_exercised_by_a_fixture(runtime: str) -> None:
    prefix = FIXTURES[runtime]
    fatal = {expected(comment) for comment, _ in cases(f"{prefix}-fatal.txt")}
    shared = {"traceback"} if runtime == "llama.cpp" else set()  # Python, so tested under vllm
    assert {p.name for p in FATAL[runtime]} - shared == fatal
    benign = {verdict(runtime, line) for _, line in cases(f"{prefix}-benign.txt")}
    assert set(BENIGN[runtime]) <= benign


@pytest.mark.parametrize("runtime", sorted(FIXTURES))
def test_patterns_are_named_once_explained_and_cited(runtime: str) -> None:
    patterns = [*FATAL[runtime], *BENIGN[runtime]]
    assert len({p.name for p in patterns}) == len(patterns)
    assert {p.kind for p in FATAL[runtime]} == {"fatal"}
    assert {p.kind for p in BENIGN[runtime]} == {"benign"}
    for p in patterns:
        assert p.explain and re.search(r"\.(py|cpp|c|cu|h)\b|CPython|torch|Triton", p.source), p


def test_the_seeds_vllm_crash_loop() -> None:
    """Unknown VLLM_ATTENTION_BACKEND, Gemma4 forces TRITON_ATTN, which rejects the KV dtype.

    The port retry, the sampler fallback and the DEBUG backend survey (which also says
    'kv_cache_dtype not supported') pass; the traceback's lines repeat the record prefix.
    """
    got = scan("vllm", (LOGS / "vllm-crashloop.log").read_text(encoding="utf-8"))
    assert [(f.line_no, f.pattern) for f in got] == [
        (1, "unknown-env-var"),
        (6, "engine-core-died"),
        (7, "traceback"),
        (12, "kv-cache-dtype-unsupported"),
        (13, "engine-core-died"),
    ]
    assert "--attention-backend" in got[0].fix


def test_a_llamacpp_build_without_fa_for_a_mixed_quantized_kv_cache() -> None:
    """-ctk q8_0 -ctv q5_1 on a CUDA build without GGML_CUDA_FA_ALL_QUANTS: FA moves to the CPU.

    The fused Gated Delta Net probe that is turned off the same way passes.
    """
    got = scan("llama.cpp", (LOGS / "llamacpp-fa-quant-kv.log").read_text(encoding="utf-8"))
    assert [(f.line_no, f.pattern) for f in got] == [
        (4, "flash-attn-unsupported"),
        (5, "flash-attn-unsupported"),
        (6, "kv-quant-needs-fa"),
        (7, "context-init-failed"),
        (8, "context-init-failed"),
    ]
    assert "GGML_CUDA_FA_ALL_QUANTS" in got[2].fix


def test_a_benign_pattern_wins_over_a_fatal_one() -> None:
    retry = (
        "WARNING 11-29 23:41:57 [parallel.py:686] Address already in use. Retrying with a new port."
    )
    assert scan("vllm", retry) == []
    assert [f.pattern for f in scan("vllm", "OSError: [Errno 98] Address already in use")] == [
        "address-in-use"
    ]


def test_colour_codes_and_crlf_continuations_are_handled() -> None:
    """ColoredFormatter wraps level and time in ANSI codes; NewLineFormatter joins with \\r\\n."""
    head = "(EngineCore pid=7) \x1b[31mERROR\x1b[0m \x1b[90m11-29 23:42:07\x1b[0m [core.py:1374] "
    log = f"{head}EngineCore failed to start.\r\n{head}Traceback (most recent call last):\r\n"
    got = scan("vllm", log)
    assert [(f.line_no, f.pattern) for f in got] == [(1, "engine-core-died"), (2, "traceback")]
    assert "\x1b" not in got[0].line


def test_a_healthy_line_and_an_empty_log_report_nothing() -> None:
    assert scan("vllm", "") == []
    assert scan("llama.cpp", "srv  llama_server: model loaded\n\n") == []


def test_an_unknown_runtime_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown runtime 'sglang'"):
        scan("sglang", "Traceback (most recent call last):")
