"""The sizing flags of a ``llama-server`` command line, and what they ask for; pure.

Defaults are b10069's (``common/common.h``, ``common/arg.cpp``, ``tools/server/server.cpp``):
``-c`` 0 (the trained window), ``--parallel`` -1 for the server (auto: 4 slots and a
unified cache), cache types f16, ``-fa`` auto, ``--fit`` on, ``-ub`` 512, ``-b`` 2048.
``-c N`` (N > 0) is kept by ``--fit`` ("context size set by user -> no change",
``common/fit.cpp``); ``-c 0`` asks for the trained window and stops ``--fit`` shrinking it;
no ``-c`` lets ``--fit`` shrink the *total* context (to 4096 at least) to fit free
memory, which the slots then share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lockpipe.errors import FormatError, UsageError
from lockpipe.lock.llama_argv import option, refused
from lockpipe.preflight.llama import KV_TYPES

# Typed from the pinned tree (preflight runs before it is fetched; C++, not runnable here)
AUTO_SLOTS = 4  # server.cpp: n_parallel auto -> 4, kv_unified true (tree-checked)
_VALUED = {"-c": "ctx", "--ctx-size": "ctx", "-np": "parallel", "--parallel": "parallel",
           "-ctk": "type_k", "--cache-type-k": "type_k", "-ctv": "type_v",
           "--cache-type-v": "type_v", "-fa": "flash", "--flash-attn": "flash",
           "-fit": "fit", "--fit": "fit", "-ub": "ubatch", "--ubatch-size": "ubatch",
           "-b": "batch", "--batch-size": "batch"}  # fmt: skip
_SWITCHES = ("-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified", "--swa-full")


@dataclass(frozen=True, kw_only=True)
class LlamaArgs:
    ctx: int | None = None  # None: no -c given
    parallel: int = -1
    type_k: str = "f16"
    type_v: str = "f16"
    flash: str = "auto"
    fit: bool = True
    unified: bool | None = None  # None: the default for the slot count
    ubatch: int = 512
    batch: int = 2048
    swa_full: bool = False

    def __post_init__(self) -> None:
        if self.parallel == 0:  # common/arg.cpp: "invalid value for n_parallel"
            raise FormatError("--parallel 0: llama-server refuses it; give -1 (auto) or 1 or more")
        if self.ctx is not None and self.ctx < 0:
            raise FormatError(f"-c {self.ctx}: a context is 0 (the trained window) or more")

    @property
    def slots(self) -> int:
        return AUTO_SLOTS if self.parallel < 0 else self.parallel

    @property
    def kv_unified(self) -> bool:
        return self.parallel < 0 if self.unified is None else self.unified

    @property
    def n_ubatch(self) -> int:
        return min(self.batch, self.ubatch)

    def intent(self, trained: int | None) -> tuple[str, str]:
        """(short name, explanation) of how the context is chosen."""
        if self.ctx:
            return "explicit", f"-c {self.ctx}: an explicit context; --fit leaves it as it is"
        if self.ctx == 0:
            return "trained", f"-c 0: the trained window ({trained}); --fit may not shrink it"
        if self.fit:
            return "fit", (
                "no -c: --fit sizes the TOTAL context to free memory (>= 4096) and the "
                f"{self.slots} slot(s) share it"
            )
        return "trained", f"no -c and --fit off: the trained window ({trained})"


def parse(command: Sequence[str]) -> LlamaArgs:
    found: dict[str, object] = {}
    tokens = list(command)
    for i, raw in enumerate(tokens):
        t = option(raw)  # --ctx_size is --ctx-size (llama_argv: common/arg.cpp:672-675)
        if (bad := refused(raw, (*_VALUED, *_SWITCHES))) is not None:
            raise FormatError(
                f"{raw}: llama-server has no --opt=value form and stops with 'invalid "
                f"argument'; write {bad} {raw.partition('=')[2]}"
            )
        value = tokens[i + 1] if i + 1 < len(tokens) else ""  # a value is read as given
        name = _VALUED.get(t)
        if name in ("ctx", "parallel", "ubatch", "batch"):
            try:
                found[name] = int(value)
            except ValueError:
                raise FormatError(f"{t} {value!r}: llama-server wants a whole number") from None
        elif name in ("type_k", "type_v"):
            found[name] = value.lower()
        elif name == "flash":
            found[name] = {"1": "on", "true": "on", "0": "off", "false": "off"}.get(value, value)
        elif name == "fit":
            found[name] = value in ("on", "1", "true")
        elif t in _SWITCHES[:4]:
            found["unified"] = "no" not in t
        elif t == "--swa-full":
            found["swa_full"] = True
    return LlamaArgs(**found)  # type: ignore[arg-type]


def with_overrides(
    args: LlamaArgs, *, ctx: int | None, parallel: int | None, kv_type: str | None = None
) -> LlamaArgs:
    """The what-if shape ``--ctx-size``/``--parallel``/``--kv-cache-dtype`` ask for.

    ``kv_type`` sets both ``-ctk`` and ``-ctv``; a name llama.cpp does not spell (vLLM's
    ``fp8``, ``bfloat16``) is a UsageError listing the ones it does.
    """
    if ctx is not None:
        args = replace(args, ctx=ctx)
    if parallel is not None:
        args = replace(args, parallel=parallel)
    if kv_type is not None:
        if kv_type.lower() not in KV_TYPES:
            raise UsageError(
                f"--kv-cache-dtype {kv_type}: not a llama.cpp cache type (-ctk/-ctv); "
                f"one of {', '.join(KV_TYPES)}"
            )
        args = replace(args, type_k=kv_type.lower(), type_v=kv_type.lower())
    return args
