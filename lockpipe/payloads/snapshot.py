"""Checks on a whole snapshot folder: is it a model a runtime can load with ``--model DIR``?

Two stages. :func:`missing_files` runs before any download, on the lock alone:
the files :mod:`lockpipe.payloads.contract` says the runtime reads for the
payload's role and its targets' modalities. :func:`check_snapshot` runs once
every file matched its pin: config.json names an architecture and model type,
a model has a chat template, every safetensors file is sound and the index
maps exactly the tensors of its shards, and ``expect`` (model_type,
quantization, dtypes) holds. Headers and small JSON files only.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from lockpipe.errors import FormatError
from lockpipe.jsonshape import loads
from lockpipe.lock.model import Lock, Payload
from lockpipe.payloads.checks import Facts, check_safetensors, index_problems, unknown_keys
from lockpipe.payloads.contract import unmet

# The JSON files the runtime reads settings from: parsed on every run (small). Others,
# such as a 30 MB tokenizer.json, are vouched for by their hash alone.
READ_JSON = {
    "config.json", "tokenizer_config.json", "chat_template.json", "generation_config.json",
    "preprocessor_config.json", "processor_config.json", "special_tokens_map.json",
}  # fmt: skip
FIX_FILES = "add it to the lock with its size and hash (the Hub's tree API lists them)"


def modalities_of(lock: Lock, payload: Payload) -> set[str]:
    """What the targets that use ``payload`` serve (``text`` when none does)."""
    users = [t for t in lock.targets.values() if payload.name in t.payloads]
    out: set[str] = {m for t in users for m in t.serve.modalities}
    return out or {"text"}


def missing_files(payload: Payload, modalities: Collection[str]) -> list[str]:
    """The files the runtime reads that the lock's ``files`` lack, each with the fix."""
    where = f"payloads.{payload.name}"
    if payload.format != "safetensors":
        return [
            f"{where}: a snapshot payload is a safetensors model folder (format "
            f"{payload.format!r}); list a single GGUF or JSON file with filename instead"
        ]
    listed = {f.path for f in payload.files}
    serves = ", ".join(sorted(modalities))
    return [
        f"{where}.files: no {' or '.join(need.names)}: the runtime reads the {need.what} of "
        f"this {payload.role} (its targets serve {serves}); {FIX_FILES}"
        for need in unmet(payload.role, modalities, listed)
    ]


def check_snapshot(payload: Payload, files: Mapping[str, Path]) -> Facts:
    """Check the verified files of a snapshot (repository path -> bytes on disk)."""
    where = f"payloads.{payload.name}"
    facts = Facts(unknown_keys(payload))
    docs: dict[str, Any] = {}
    for name, path in sorted(files.items()):
        if name in READ_JSON:
            try:
                docs[name] = loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError) as exc:
                facts.problems.append(f"{where}.files.{name}: not JSON ({exc})")
    config = docs.get("config.json")
    if "config.json" in docs:
        facts.problems += _config(where, config, payload.expect)
    if payload.role == "model":
        facts.problems += _chat_template(where, files, docs)
    shards: dict[str, Facts] = {}
    for name, path in sorted(files.items()):
        if name.endswith(".safetensors"):
            shards[name] = Facts()
            try:
                check_safetensors(payload, path, path.stat().st_size, shards[name])
            except FormatError as exc:
                shards[name].problems.append(str(exc))
            facts.problems += [f"{where}.files.{name}: {p}" for p in shards[name].problems]
            facts.tensors |= shards[name].tensors
    lister = f"{where}.files"
    for name in sorted(n for n in files if n.endswith(".safetensors.index.json")):
        facts.problems += index_problems(where, name, files[name], shards, lister)
    return facts


def _config(where: str, config: Any, expect: Mapping[str, Any]) -> list[str]:
    at = f"{where}.files.config.json"
    if not isinstance(config, dict):
        return [f"{at}: not a JSON object; the folder is not a transformers model"]
    out = []
    arch = config.get("architectures")
    if not (isinstance(arch, list) and arch and all(isinstance(a, str) for a in arch)):
        out.append(
            f"{at}: no `architectures` list, so vLLM cannot pick a model class; "
            "check the repository and revision"
        )
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        out.append(f"{at}: no `model_type`; check the repository and revision")
    want = expect.get("model_type")
    if want is not None and model_type != want:
        out.append(
            f"{at}: model_type is {model_type!r}, expect.model_type wants {want!r}: "
            "the lock pins another model than the one meant, or the expectation is wrong"
        )
    if "quantization" in expect:
        out += _quantization(at, config.get("quantization_config"), expect["quantization"])
    return out


def _quantization(at: str, qc: Any, want: Any) -> list[str]:
    """``expect.quantization`` ``{format, bits}`` against config.json's quantization_config."""
    if not isinstance(want, dict) or not set(want) <= {"format", "bits"}:
        return [f"{at}: expect.quantization must be an object of format and bits, e.g. "
                '{"format": "compressed-tensors", "bits": 4}']  # fmt: skip
    if not isinstance(qc, dict):
        return [f"{at}: no quantization_config, expect.quantization wants {want}: "
                "the snapshot holds unquantized weights; pin the quantized repository"]  # fmt: skip
    out = []
    method = qc.get("quant_method")
    if "format" in want and method != want["format"]:
        out.append(f"{at}: quantization_config.quant_method is {method!r}, "
                   f"expect.quantization.format wants {want['format']!r}")  # fmt: skip
    if "bits" in want:
        groups = qc.get("config_groups")
        groups = groups if isinstance(groups, dict) else {}
        weights = {
            n: g.get("weights") or {} if isinstance(g, dict) else {} for n, g in groups.items()
        }
        odd = [n for n, w in weights.items() if not isinstance(w, dict)]
        if odd:  # a list or a number where vLLM reads an object: it fails to load too
            return [*out, f"{at}: quantization_config.config_groups.{odd[0]}.weights is "
                    f"{type(weights[odd[0]]).__name__}, not an object with num_bits; the "
                    "config.json is malformed: pin another revision of the repository"]  # fmt: skip
        bits = {n: w.get("num_bits") for n, w in weights.items()}
        if not bits:
            out.append(f"{at}: quantization_config has no config_groups with weights.num_bits; "
                       f"expect.quantization.bits wants {want['bits']}")  # fmt: skip
        wrong = {n: b for n, b in bits.items() if b != want["bits"]}
        if bits and wrong:
            out.append(f"{at}: weights.num_bits is {wrong} in quantization_config.config_groups, "
                       f"expect.quantization.bits wants {want['bits']}")  # fmt: skip
    return out


def _chat_template(where: str, files: Mapping[str, Path], docs: Mapping[str, Any]) -> list[str]:
    """A model must carry a chat template: the file, or a key in tokenizer_config.json."""
    if "chat_template.jinja" in files:
        return []
    for name in ("tokenizer_config.json", "chat_template.json"):
        doc = docs.get(name)
        if isinstance(doc, dict) and doc.get("chat_template"):
            return []
    return [
        f"{where}.files: no chat template: neither chat_template.jinja nor a chat_template key "
        "in tokenizer_config.json (or chat_template.json), so chat requests fail; add "
        f"chat_template.jinja to the lock if the repository has it ({FIX_FILES})"
    ]
