"""What a runtime reads from a model folder: the files a snapshot payload must hold.

Pure. vLLM resolves ``--model DIR`` the way transformers does: ``config.json``
names the architecture; the tokenizer is ``tokenizer.json`` (fast) or
``tokenizer.model`` (sentencepiece) with ``tokenizer_config.json``; the chat
template is ``chat_template.jinja`` or a key of ``tokenizer_config.json``; a
multimodal model's processor reads ``preprocessor_config.json`` or
``processor_config.json``; the weights are ``model.safetensors`` or the shards
that ``model.safetensors.index.json`` names. These are fixed names in those
loaders, so ``plan`` can list them before the Hub says what a repository holds.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class Need:
    """One thing the runtime reads, satisfied by any of ``names``."""

    what: str
    names: tuple[str, ...]

    def met_by(self, files: Collection[str]) -> bool:
        return any(n in files for n in self.names)


CONFIG = Need("model config", ("config.json",))
TOKENIZER = Need("tokenizer", ("tokenizer.json", "tokenizer.model"))
TOKENIZER_CONFIG = Need("tokenizer config", ("tokenizer_config.json",))
WEIGHTS = Need("weights", ("model.safetensors", "model.safetensors.index.json"))
PROCESSOR = Need("processor config", ("preprocessor_config.json", "processor_config.json"))
CHAT_TEMPLATE = Need("chat template", ("chat_template.jinja", "tokenizer_config.json"))


def needs(role: str, modalities: Collection[str]) -> tuple[Need, ...]:
    """What a snapshot in ``role`` must hold for a target serving ``modalities``.

    An MTP assistant is loaded by the target's speculative config: config and
    weights only (it shares the target's tokenizer).
    """
    if role == "mtp-assistant":
        return (CONFIG, WEIGHTS)
    out = (CONFIG, TOKENIZER, TOKENIZER_CONFIG, CHAT_TEMPLATE, WEIGHTS)
    return out + ((PROCESSOR,) if set(modalities) - {"text"} else ())


def unmet(role: str, modalities: Collection[str], files: Collection[str]) -> list[Need]:
    return [n for n in needs(role, modalities) if not n.met_by(files)]
