"""Format-aware checks, run on a file after its sha256 matched and before it is linked.

Each payload's ``expect`` object in the lock says what its header must show.
The keys, and the defaults that apply without them, are documented in
docs/payloads.md and in :data:`EXPECT_KEYS`. Every check reads headers only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lockpipe.jsonshape import loads
from lockpipe.lock.model import Lock, Payload
from lockpipe.payloads import gguf, safetensors

EXPECT_KEYS = {
    "arch": "GGUF general.architecture (default for role mmproj: clip)",
    "block_count": "GGUF <arch>.block_count",
    "tensor_count": "GGUF: the number of tensors",
    "nextn_layers": "GGUF MTP layers: <arch>.nextn_predict_layers and the blk.N.nextn.* layers",
    "modalities": "['vision', 'audio']: the encoders an mmproj must have",
    "dtypes": "safetensors: every tensor's dtype is one of these (mtp-assistant default: BF16)",
    "model_type": "snapshot: config.json's model_type (gemma4_assistant: vLLM's Gemma 4 MTP)",
    "quantization": "snapshot: {format, bits}: config.json's quantization_config "
    "(format compressed-tensors: quant_method, every config_groups.*.weights.num_bits)",
}
_GGUF_KEYS = ("arch", "block_count", "tensor_count", "nextn_layers", "modalities")
_MTP_NAME = re.compile(r"[-_.]mtp([-_.]|$)")
# No model has a billion layers, and int() refuses a number of more than 4300 digits.
_NEXTN = re.compile(r"blk\.(\d{1,9})\.nextn\.")


@dataclass
class Facts:
    """What a payload's header showed, for the target-level checks."""

    problems: list[str] = field(default_factory=list)
    modalities: set[str] = field(default_factory=set)
    tensors: set[str] = field(default_factory=set)  # safetensors names, for index checks


def check_file(payload: Payload, path: Path, size: int) -> Facts:
    """Check ``path`` (the bytes of ``payload``) against the format and ``expect``."""
    where = f"payloads.{payload.name}"
    facts = Facts(unknown_keys(payload))
    if payload.format == "gguf":
        _gguf(payload, path, size, facts)
    elif payload.format == "safetensors":
        check_safetensors(payload, path, size, facts)
    elif payload.filename.lower().endswith(".json"):
        try:
            loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            facts.problems.append(f"{where}: {path} is not JSON ({exc})")
    if payload.format not in ("gguf", "safetensors"):
        facts.problems += [  # no header was read: an expect that needs one is not met
            f"{where}.expect.{k}: a GGUF check, but the payload's format is "
            f"{payload.format!r}, so no GGUF header was read; set payloads.{payload.name}.format "
            "to gguf, or name the file .gguf"
            for k in payload.expect
            if k in _GGUF_KEYS
        ]
    facts.problems = [p if p.startswith(where) else f"{where}: {p}" for p in facts.problems]
    return facts


def unknown_keys(payload: Payload) -> list[str]:
    return [
        f"payloads.{payload.name}.expect.{k}: unknown key; known keys: {', '.join(EXPECT_KEYS)}"
        for k in payload.expect
        if k not in EXPECT_KEYS
    ]


def _expect(what: str, want: Any, got: Any, key: str) -> list[str]:
    if want is None or want == got:
        return []
    return [f"{what} is {got!r}, expect.{key} wants {want!r}"]


def _gguf(payload: Payload, path: Path, size: int, facts: Facts) -> None:
    h = gguf.read_header(path)
    out, exp, meta = facts.problems, payload.expect, h.metadata
    if h.data_end() > size:
        out.append(f"tensors extend to byte {h.data_end():,}, the file has {size:,}: truncated")
    arch = h.arch or "?"
    default_arch = "clip" if payload.role == "mmproj" else None
    out += _expect("general.architecture", exp.get("arch", default_arch), h.arch, "arch")
    out += _expect(
        f"{arch}.block_count",
        exp.get("block_count"),
        meta.get(f"{arch}.block_count"),
        "block_count",
    )
    out += _expect("the tensor count", exp.get("tensor_count"), len(h.tensors), "tensor_count")
    nextn_meta = meta.get(f"{arch}.nextn_predict_layers")
    layers = {int(m[1]) for t in h.tensors if (m := _NEXTN.match(t.name))}
    want = exp.get("nextn_layers")
    if payload.role == "mtp-assistant":
        # A draft model is all MTP: its layers are the nextn layers unless it says otherwise.
        got = nextn_meta if nextn_meta is not None else meta.get(f"{arch}.block_count")
        out += _expect(f"{arch}.nextn_predict_layers (or block_count)", want, got, "nextn_layers")
    elif want is not None or _MTP_NAME.search(Path(payload.filename).stem.lower()):
        if not nextn_meta or not layers:
            out.append(
                f"an -mtp model needs {arch}.nextn_predict_layers and blk.N.nextn.* "
                f"tensors; found {nextn_meta!r} and {len(layers)} layers with them"
            )
        elif nextn_meta != len(layers):
            out.append(
                f"{arch}.nextn_predict_layers is {nextn_meta}, but {len(layers)} layers "
                "carry blk.N.nextn.* tensors"
            )
        out += _expect(f"{arch}.nextn_predict_layers", want, nextn_meta, "nextn_layers")
    if payload.role == "mmproj":
        facts.modalities = {m for m in ("vision", "audio") if meta.get(f"clip.has_{m}_encoder")}
        if not facts.modalities:
            out.append("an mmproj without clip.has_vision_encoder or clip.has_audio_encoder")
        missing = set(exp.get("modalities", [])) - facts.modalities
        if missing:
            out.append(f"expect.modalities wants {sorted(missing)}, the projector lacks them")


def check_safetensors(payload: Payload, path: Path, size: int, facts: Facts) -> None:
    """Header, layout and ``expect.dtypes`` of one safetensors file; its tensors into facts."""
    h = safetensors.read_header(path)
    facts.problems += safetensors.layout_problems(h, size)
    facts.tensors = {t.name for t in h.tensors}
    default = ["BF16"] if payload.role == "mtp-assistant" else None
    allowed = payload.expect.get("dtypes", default)
    if allowed is not None:
        wrong: dict[str, int] = {}
        for t in h.tensors:
            if t.dtype not in allowed:
                wrong[t.dtype] = wrong.get(t.dtype, 0) + 1
        if wrong:
            found = ", ".join(f"{n} tensors in {d}" for d, n in sorted(wrong.items()))
            why = " (vLLM cannot draft with a quantized assistant)" if default else ""
            facts.problems.append(f"expect.dtypes allows {allowed}, found {found}{why}")


def check_index(index: Payload, path: Path, shards: Mapping[str, Facts]) -> list[str]:
    """A ``model.safetensors.index.json`` must map exactly the tensors of its shards.

    ``shards`` maps each shard filename in the same repository and revision to
    the facts of its check.
    """
    return index_problems(f"payloads.{index.name}", index.filename, path, shards, "the lock")


def index_problems(
    where: str, name: str, path: Path, shards: Mapping[str, Facts], lister: str
) -> list[str]:
    """The problems of the index ``name`` (its path in the repository, bytes at ``path``).

    ``shards``: the facts of each safetensors file that ``lister`` lists, by path.
    """
    try:
        weight_map = loads(path.read_text(encoding="utf-8"))["weight_map"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        weight_map = None
    # An explicit check, not an assert: `python -O` drops asserts, and a list here
    # would then end in a traceback instead of this message.
    if not isinstance(weight_map, dict) or not all(isinstance(s, str) for s in weight_map.values()):
        return [
            f"{where}: {path} has no weight_map object of tensor name to shard filename; "
            "the index is not a safetensors index: check its filename and sha256 in the lock"
        ]
    out = []
    folder = str(Path(name).parent)
    for shard in sorted(set(weight_map.values())):
        full = shard if folder == "." else f"{folder}/{shard}"
        if full not in shards:
            out.append(
                f"{where}: the index names shard {full!r}, which {lister} does not list; "
                "add it with its size and sha256 (the Hub's tree lists them)"
            )
            continue
        mapped = {t for t, s in weight_map.items() if s == shard}
        if mapped != shards[full].tensors:
            extra, lost = mapped - shards[full].tensors, shards[full].tensors - mapped
            out.append(
                f"{where}: shard {full!r}: {len(extra)} mapped tensors absent from it, "
                f"{len(lost)} of its tensors unmapped (e.g. {sorted(extra | lost)[:3]})"
            )
    return out


def check_targets(lock: Lock, names: list[str], facts: Mapping[str, Facts]) -> list[str]:
    """Each target's command uses its payloads in the right roles; images need an mmproj."""
    out = []
    for t in (lock.targets[n] for n in names):
        cmd = list(t.serve.command)
        used = {m for arg in cmd for m in re.findall(r"\{payload(?:-dir)?:([^}]+)\}", arg)}
        out += [
            f"targets.{t.name}.serve.command uses {{payload:{u}}}, not in its payloads"
            for u in sorted(used - set(t.payloads))
        ]
        files = {m for arg in cmd for m in re.findall(r"\{payload:([^}]+)\}", arg)}
        out += [
            f"targets.{t.name}.serve.command passes {{payload:{u}}}, but payloads.{u} is a "
            f"snapshot folder: write {{payload-dir:{u}}}"
            for u in sorted(files)
            if u in lock.payloads and lock.payloads[u].snapshot
        ]
        after = {flag: cmd[i + 1] for i, flag in enumerate(cmd[:-1])}
        mmproj = re.fullmatch(r"\{payload:([^}]+)\}", after.get("--mmproj", ""))
        listed = [p for p in t.payloads if lock.payloads[p].role == "mmproj"]
        if mmproj and lock.payloads.get(mmproj[1], None) is not None:
            if lock.payloads[mmproj[1]].role != "mmproj":
                out.append(f"targets.{t.name}: --mmproj gets {mmproj[1]}, whose role is not mmproj")
        elif t.serve.runtime == "llama.cpp" and listed:
            out.append(f"targets.{t.name}: lists mmproj {listed[0]} but never passes --mmproj")
        # llama.cpp serves images and audio only through a projector (vLLM's models
        # carry their encoders): a target that says it serves them must pass one.
        wants = set(t.serve.modalities) - {"text"}
        if wants and t.serve.runtime == "llama.cpp":
            if not mmproj:
                out.append(
                    f"targets.{t.name}.serve.modalities has {sorted(wants)}, which llama.cpp "
                    "serves only with --mmproj {payload:NAME} of an mmproj payload"
                )
            elif mmproj[1] in facts and not wants <= facts[mmproj[1]].modalities:
                out.append(
                    f"targets.{t.name}: serves {sorted(wants)}, but {mmproj[1]} has encoders "
                    f"for {sorted(facts[mmproj[1]].modalities)} only"
                )
    return out
