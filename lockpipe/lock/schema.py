"""The JSON Schema of ``locks/digests.json``, version 1.

Structure only: types, required keys and value shapes. Cross-references
(a target naming a base that does not exist) are checked in ``validate.py``.
Every number is bounded, so no value in a valid lock overflows a time_t, a
file offset or Python's datetime.
Pinned values (digest, commit, sha256) are optional on purpose: an entry
that is not yet known stays unpinned, and whatever needs it says so.
"""

from __future__ import annotations

import re
from typing import Any

SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
COMMIT = {"type": "string", "pattern": "^[0-9a-f]{40}$"}
NAME = "^[a-z0-9][a-z0-9._-]*$"
# A payload in a serve command: ``{payload:NAME}`` (its file) or ``{payload-dir:NAME}`` (its
# folder); group 1 is ``-dir`` or None, group 2 the payload's name.
PLACEHOLDER = re.compile(r"\{payload(-dir)?:(" + NAME.strip("^$") + r")\}")
PLATFORM = "^[a-z0-9]+/[a-z0-9]+(/[a-z0-9]+)?$"
MAX_EPOCH = 253402300799  # 9999-12-31T23:59:59Z: inside time_t, and datetime can show it
MAX_SIZE = 2**63 - 1  # a file offset (off_t)
COUNT = {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
ORIGIN = {
    "type": "object",
    "required": ["source", "seen"],
    "properties": {
        "source": {"type": "string", "minLength": 1},
        "seen": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
        "note": {"type": "string"},
    },
    "additionalProperties": False,
}


def _table(entry: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": NAME}, "additionalProperties": entry}


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": required,
        "properties": props,
        "additionalProperties": False,
    }


BASE = _obj(
    ["ref"],
    ref={"type": "string", "minLength": 1},
    digest=DIGEST,
    platform={"type": "string", "pattern": PLATFORM},
    # refresh-digests records each platform's child digest and the image's version label
    platforms=_table(DIGEST) | {"propertyNames": {"pattern": PLATFORM}},
    version_label={"type": "string"},
    origin=ORIGIN,
)
PIP = _obj(["file", "sha256"], file={"type": "string"}, sha256=SHA256, origin=ORIGIN)
SOURCE = _obj(
    ["repository"],
    repository={"type": "string", "minLength": 1},
    commit=COMMIT,
    url={"type": "string", "pattern": "^https?://"},
    sha256=SHA256,
    tree_sha256=SHA256,  # the extracted tree (lockpipe.refresh.archive): same content, other bytes
    follow={"type": "string", "minLength": 1},  # what refresh-digests moves to (docs/refresh.md)
    root={"type": "string"},
    origin=ORIGIN,
)
GIT_SHA1 = {"type": "string", "pattern": "^[0-9a-f]{40}$"}
PAYLOAD_FILE = _obj(
    [], size={"type": "integer", "minimum": 0, "maximum": MAX_SIZE}, sha256=SHA256,
    git_sha1=GIT_SHA1,
)  # fmt: skip
PAYLOAD = {
    **_obj(
        ["repository", "role"],
        repository={"type": "string", "pattern": "^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"},
        revision=COMMIT,
        filename={"type": "string", "minLength": 1},
        size={"type": "integer", "minimum": 1, "maximum": MAX_SIZE},
        sha256=SHA256,
        files={"type": "object", "minProperties": 1, "additionalProperties": PAYLOAD_FILE},
        role={"enum": ["model", "mtp-assistant", "mmproj"]},
        format={"enum": ["gguf", "safetensors", "json"]},
        expect={"type": "object"},
        # the Hub branch refresh-digests follows (default main; docs/refresh.md)
        follow={"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._/-]*$"},
        origin=ORIGIN,
    ),
    # One file (filename, size, sha256), or a snapshot folder (files: path -> pins).
    "oneOf": [
        {"required": ["filename"], "not": {"required": ["files"]}},
        {"required": ["files"], "not": {"anyOf": [{"required": [k]} for k in
                                                  ("filename", "size", "sha256")]}},
    ],
}  # fmt: skip
SERVE = _obj(
    ["runtime", "port"],  # command: required of built targets (TARGET below)
    runtime={"enum": ["vllm", "llama.cpp", "halogen"]},
    command={"type": "array", "items": {"type": "string"}, "minItems": 1},
    port={"type": "integer", "minimum": 1, "maximum": 65535},
    # environment of the serving container (an external image reads its shape from it)
    env=_table({"type": "string"}) | {"propertyNames": {"pattern": "^[A-Z_][A-Z0-9_]*$"}},
    context=COUNT,
    parallel=COUNT,
    kv_dtype={"type": "string"},
    model={"type": "string"},
    modalities={
        "type": "array",
        "items": {"enum": ["text", "vision", "audio"]},
        "uniqueItems": True,
        "minItems": 1,
    },
)
# An image built elsewhere (frank-large): pinned by digest, never built here. The digest
# may be absent (only its host knows it); every consumer then says how to pin it.
EXTERNAL = _obj(
    ["image"],
    # a repository without tag or digest: the digest goes in digest
    image={"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]*(:[0-9]+)?(/[a-z0-9][a-z0-9._-]*)+$"},
    digest=DIGEST,
    origin=ORIGIN,
)
_BUILT_ONLY = ("context", "dockerfile", "tag", "bases", "source", "pip", "payloads",
               "build_args", "allow_copy")  # fmt: skip
TARGET = _obj(
    ["serve"],
    external=EXTERNAL,
    origin=ORIGIN,
    context={"type": "string", "pattern": r"^images/(?!\.\.?$)[a-z0-9._-]+$"},  # not . nor ..
    dockerfile={"type": "string"},
    tag={"type": "string", "minLength": 1},
    bases={"type": "object", "additionalProperties": {"type": "string"}, "minProperties": 1},
    source={"type": "string"},
    pip={"type": "array", "items": {"type": "string"}},
    payloads={"type": "array", "items": {"type": "string"}},
    build_args={"type": "object", "additionalProperties": {"type": "string"}},
    allow_copy={"type": "boolean"},
    serve=SERVE,
) | {
    "oneOf": [  # built here (a context, a tag, bases, a command), or external
        {
            "required": ["context", "tag", "bases"],
            "not": {"required": ["external"]},
            "properties": {"serve": {"required": ["command"]}},
        },
        {"required": ["external"], "not": {"anyOf": [{"required": [k]} for k in _BUILT_ONLY]}},
    ]
}
LOCK_SCHEMA: dict[str, Any] = _obj(
    ["version", "source_date_epoch", "bases", "targets"],
    version={"const": 1},
    source_date_epoch={"type": "integer", "minimum": 0, "maximum": MAX_EPOCH},
    bases=_table(BASE),
    pip=_table(PIP),
    sources=_table(SOURCE),
    payloads=_table(PAYLOAD),
    targets=_table(TARGET),
    fingerprints={"type": "object", "additionalProperties": SHA256},
)
