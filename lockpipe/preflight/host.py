"""The card and its driver: a table of known cards, the host's own answer, CUDA's needs.

Card memory is ``memory.total`` as ``nvidia-smi`` reports it for each model. The driver
table is NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64), from
the CUDA Toolkit Release Notes (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/,
Table 3): the driver each toolkit release needs without minor-version compatibility,
which is what the ``nvidia/cuda`` images' ``NVIDIA_REQUIRE_CUDA=cuda>=X.Y`` asks for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lockpipe.cmd import QUERY_TIMEOUT, call
from lockpipe.errors import EngineError, EngineMissing, GpuAttachError, UsageError
from lockpipe.spelling import nearest


@dataclass(frozen=True, kw_only=True)
class Card:
    name: str
    memory_mib: int  # memory.total
    compute_cap: tuple[int, int]
    free_mib: int | None = None  # known only from the host (or --free-mib)
    driver: str | None = None

    @property
    def cc(self) -> str:
        return f"{self.compute_cap[0]}.{self.compute_cap[1]}"


# For --gpu NAME on a host without that card (nvidia-smi answers for the host's own GPU):
# memory.total as nvidia-smi reports it on each, which no code here can ask
CARDS: dict[str, Card] = {
    c.name: c
    for c in (
        Card(name="rtx3090", memory_mib=24576, compute_cap=(8, 6)),
        Card(name="rtx4090", memory_mib=24564, compute_cap=(8, 9)),
        Card(name="a100-40g", memory_mib=40960, compute_cap=(8, 0)),
        Card(name="a100-80g", memory_mib=81920, compute_cap=(8, 0)),
        Card(name="h100-80g", memory_mib=81559, compute_cap=(9, 0)),
        Card(name="h200", memory_mib=143771, compute_cap=(9, 0)),  # 141 GB HBM3e
        Card(name="l40s", memory_mib=46068, compute_cap=(8, 9)),
    )
}
# (major, minor, update) -> minimum Linux x86_64 driver (Table 3, "Toolkit Driver Version"):
# NVIDIA's release notes, a document, not code that could run here
CUDA_DRIVER: dict[tuple[int, int, int], str] = {
    (11, 8, 0): "520.61.05", (12, 0, 0): "525.60.13", (12, 1, 0): "530.30.02",
    (12, 2, 0): "535.54.03", (12, 3, 0): "545.23.06", (12, 4, 0): "550.54.14",
    (12, 5, 0): "555.42.02", (12, 6, 0): "560.28.03", (12, 8, 0): "570.26",
    (12, 9, 0): "575.51.03", (12, 9, 1): "575.57.08", (13, 0, 0): "580.65.06",
}  # fmt: skip
QUERY = (
    "--query-gpu=name,memory.total,memory.free,compute_cap,driver_version",
    "--format=csv,noheader,nounits",
)


# Words a person (or nvidia-smi's name) puts before the model: "NVIDIA GeForce RTX 3090".
_VENDOR_WORDS = re.compile(r"\b(nvidia|geforce|tesla|quadro)\b")


def _squash(text: str) -> str:
    """A card name with case, spaces, punctuation, vendor words and GB's B dropped."""
    text = _VENDOR_WORDS.sub(" ", text.lower())
    text = re.sub(r"(\d)\s*gb\b", r"\1g", text)
    return re.sub(r"[^a-z0-9]", "", text)


def card_named(name: str) -> Card:
    """The card ``name`` means: a known name in any case and spacing, with or without a
    vendor prefix ("RTX 3090", "nvidia rtx3090"), or the start or bare number of exactly
    one known name ("h100", "3090"); UsageError naming the candidates otherwise."""
    key = _squash(name)
    squashed = {_squash(c): c for c in CARDS}
    if key in squashed:
        return CARDS[squashed[key]]
    hits = [c for k, c in squashed.items() if key and (k.startswith(key) or
            (key.isdigit() and key in k))]  # fmt: skip
    if len(hits) == 1:
        return CARDS[hits[0]]
    if hits:
        raise UsageError(f"--gpu {name}: more than one card matches ({', '.join(hits)}); "
                         "name one of them")  # fmt: skip
    near = nearest(key, squashed)
    mean = f" (did you mean {squashed[near]}?)" if near else ""
    raise UsageError(f"--gpu {name}: unknown card{mean}; known: {', '.join(CARDS)}")


def parse_smi(text: str, index: int = 0) -> Card:
    """One card from ``nvidia-smi`` :data:`QUERY` output (the ``index``-th line)."""
    rows = [r for r in text.splitlines() if r.strip()]
    if not rows:
        raise GpuAttachError("nvidia-smi lists no GPU: the driver sees no card on this host")
    if not 0 <= index < len(rows):
        raise UsageError(
            f"--gpu-index {index}: nvidia-smi lists {len(rows)} GPU(s), 0 to {len(rows) - 1}"
        )
    parts = [p.strip() for p in rows[index].split(",")]
    try:
        name, total, free, cap, driver = parts[:5]
        major, minor = (int(x) for x in cap.split("."))
        return Card(
            name=name,
            memory_mib=int(total),
            compute_cap=(major, minor),
            free_mib=int(free),
            driver=driver,
        )
    except ValueError:
        raise GpuAttachError(f"nvidia-smi answered {rows[index]!r}; expected {QUERY[0]}") from None


def nvidia_smi(args: Sequence[str], *, otherwise: str) -> str:
    """nvidia-smi's output for ``args``, through lockpipe.cmd; GpuAttachError when it fails.

    ``otherwise``: the caller's way around a host without a working nvidia-smi, which the
    error offers after its own fix.
    """
    try:
        return call(["nvidia-smi", *args], quiet=True, timeout=QUERY_TIMEOUT)
    except EngineMissing:
        raise GpuAttachError(
            "nvidia-smi is not on PATH: this host has no NVIDIA driver tools, so its card "
            "cannot be read. Fix: install the NVIDIA driver (nvidia-smi comes with it) until "
            f"nvidia-smi lists the card, or {otherwise}"
        ) from None
    except EngineError as exc:
        raise GpuAttachError(
            f"nvidia-smi failed, so the GPU and its free memory are unknown: {exc}\n"
            f"fix: load the NVIDIA driver until nvidia-smi works on this host, or {otherwise}"
        ) from None


def query_host(index: int = 0) -> Card:
    """The host's GPU ``index``, asked of nvidia-smi (the one side effect here)."""
    return parse_smi(nvidia_smi(QUERY, otherwise="name the card: preflight --gpu CARD"), index)


# A driver version as nvidia-smi prints it (610.57.04): each digit run bounded, as int()
# refuses one past 4,300 digits with a ValueError.
DRIVER = re.compile(r"\d{1,6}(?:\.\d{1,6}){0,3}", re.ASCII)


def shown(text: str, limit: int = 40) -> str:
    """``text`` for a message: cut at ``limit`` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def check_driver(driver: str, where: str) -> str:
    """``driver`` when it is a version :data:`DRIVER` reads; else UsageError naming ``where``."""
    if not DRIVER.fullmatch(driver):
        raise UsageError(
            f"{where} {shown(driver)}: not a driver version such as 610.57.04 (nvidia-smi's "
            "driver_version: up to 4 dot-separated numbers of 1 to 6 digits)"
        )
    return driver


def cuda_version(ref: str) -> tuple[int, int, int] | None:
    """The CUDA version an image tag names: ``nvidia/cuda:12.9.1-…`` or ``…-cu129``."""
    tag = ref.rpartition(":")[2]
    if m := re.match(r"(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?(?!\d)", tag):
        return int(m[1]), int(m[2]), int(m[3] or 0)
    if m := re.search(r"cu(\d{2,3})(\d)\b", tag):
        return int(m[1]), int(m[2]), 0
    return None


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def driver_problem(driver: str, cuda: tuple[int, int, int]) -> str | None:
    """Why ``driver`` is too old for a CUDA ``cuda`` runtime, or None (unknown: None)."""
    known = [k for k in CUDA_DRIVER if k <= cuda]
    if not known:
        return None
    if not DRIVER.fullmatch(driver):  # nvidia-smi's answer, which --driver did not replace
        return f"driver {shown(driver)!r} is not a version such as 610.57.04"
    need = CUDA_DRIVER[max(known)]
    if _version(driver) < _version(need):
        v = ".".join(map(str, cuda))
        return f"driver {driver} is older than {need}, the minimum for CUDA {v}"
    return None


def arch_problem(archs: str, cap: tuple[int, int]) -> tuple[str | None, str | None]:
    """(failure, warning) for CMAKE_CUDA_ARCHITECTURES ``archs`` on a card of ``cap``.

    ``86`` is SASS and PTX for 8.6 (CMake), ``86-real`` SASS only, ``86-virtual`` PTX only.
    SASS X.y runs on X.z for z >= y; PTX X.y is JIT-compiled for any later card.
    """
    sass, ptx = [], []
    for item in re.split(r"[;,\s]+", archs.strip()):
        if m := re.fullmatch(r"(\d{1,3})(\d)(?:a|f)?(-real|-virtual)?", item, re.ASCII):
            arch = (int(m[1]), int(m[2]))
            if m[3] != "-virtual":
                sass.append(arch)
            if m[3] != "-real":
                ptx.append(arch)
        elif item[:1].isdigit():  # CMake's names (all, all-major, native) start with a letter
            return (
                f"CMAKE_CUDA_ARCHITECTURES item {shown(item)} is no CUDA architecture "
                "(such as 86, 90a or 89-real)",
                None,
            )
    if any(a[0] == cap[0] and a[1] <= cap[1] for a in sass):
        return None, None
    if any(a <= cap for a in ptx):
        return None, f"no SASS for sm_{cap[0]}{cap[1]}: kernels are JIT-compiled from PTX at start"
    return (
        f"the image is built for {shown(archs, 80)}, which cannot run on sm_{cap[0]}{cap[1]}",
        None,
    )
