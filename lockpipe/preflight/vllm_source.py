"""Extract what preflight needs to know about a vLLM release from its wheel, statically.

``python -m lockpipe.preflight.vllm_source WHEEL > lockpipe/preflight/data/vllm-X.json``

Nothing is imported from the wheel (it needs torch and a GPU); its sources are parsed
with :mod:`ast`:

- ``vllm/envs.py``: the keys of ``environment_variables`` (what ``validate_environ`` knows;
  any other ``VLLM_*`` variable is "Unknown vLLM environment variable detected" and ignored);
- ``vllm/config/cache.py``: the ``CacheDType`` literal (``--kv-cache-dtype`` choices);
- ``vllm/v1/attention/backends/registry.py``: ``AttentionBackendEnum`` members
  (``--attention-backend`` choices) and each backend's class; from each class: its
  ``supported_kv_cache_dtypes``, whether ``supports_sliding_window`` returns True, and
  its kernel block sizes, following base classes within the wheel; and its own
  ``supports_head_size`` (the first in its class chain, annotations dropped) with the
  ``get_supported_head_sizes`` list the base class's rule reads, which
  :func:`lockpipe.preflight.vllm_rules.head_size_ok` runs on the card's facts;
- ``vllm/vllm_flash_attn/flash_attn_interface.py``: for each FlashAttention version, whether
  its kernels are in the wheel (the ``_vllm_faN_C`` extension its ``try`` imports, or the
  ``cute/interface.py`` it looks for) and the compute capabilities ``_is_faN_supported``
  accepts (``has_device_capability(N)``, ``is_device_capability_family(N)``);
- ``vllm/model_executor/models/config.py``: ``Gemma4Config``'s largest head size for FA4;
- ``vllm/config/cache.py``: ``CacheConfig``'s literal field defaults (``gpu_memory_utilization``
  is what ``--gpu-memory-utilization`` means when the command does not give it).

The output records the wheel's file name and sha256 and each source file's sha256.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ENVS = "vllm/envs.py"
CACHE = "vllm/config/cache.py"
REGISTRY = "vllm/v1/attention/backends/registry.py"
FLASH = "vllm/vllm_flash_attn/flash_attn_interface.py"
BACKEND = "vllm/v1/attention/backend.py"
MODEL_CONFIGS = "vllm/model_executor/models/config.py"


class Wheel:
    def __init__(self, path: Path) -> None:
        self.path, self.zip = path, zipfile.ZipFile(path)
        self.read_files: dict[str, str] = {}

    def source(self, member: str) -> ast.Module:
        data = self.zip.read(member)
        self.read_files[member] = hashlib.sha256(data).hexdigest()
        return ast.parse(data)


def env_names(tree: ast.Module) -> list[str]:
    for node in ast.walk(tree):
        target: ast.expr | None = None
        if isinstance(node, (ast.AnnAssign, ast.Assign)):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
        value = getattr(node, "value", None)
        named = isinstance(target, ast.Name) and target.id == "environment_variables"
        if named and isinstance(value, ast.Dict):
            return sorted(_strings(value.keys))
    raise SystemExit(f"{ENVS}: no environment_variables dict")


def literal_values(tree: ast.Module, name: str) -> list[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            sub = node.value
            if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Tuple):
                return _strings(sub.slice.elts)
    raise SystemExit(f"no Literal named {name}")


def _strings(nodes: Sequence[ast.expr | None]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name), None)


def registry(tree: ast.Module) -> dict[str, str | None]:
    """AttentionBackendEnum member -> class path (None for CUSTOM and ViT-only tags)."""
    enum = _class(tree, "AttentionBackendEnum")
    assert enum is not None
    out: dict[str, str | None] = {}
    for stmt in enum.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            path = value.value if isinstance(value, ast.Constant) else None
            out[stmt.targets[0].id] = path if isinstance(path, str) and path else None
    return out


def _imported_from(tree: ast.Module, name: str) -> str | None:
    """The wheel member a ``from vllm.x import name`` in ``tree`` points at."""
    for node in tree.body:
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and any(a.name == name for a in node.names)
        ):
            return node.module.replace(".", "/") + ".py"
    return None


def _returns_true(fn: ast.FunctionDef) -> bool | None:
    rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(rets) == 1 and isinstance(rets[0].value, ast.Constant):
        return bool(rets[0].value.value)
    return None  # computed: not decidable statically


def backend(wheel: Wheel, path: str) -> dict[str, Any]:
    """What a backend class (and its bases in the wheel) declares."""
    facts: dict[str, Any] = {"class": path}
    module, _, cls = path.rpartition(".")
    member = module.replace(".", "/") + ".py"
    found: dict[str, Any] = {}
    reached_base = False
    while cls:
        tree = wheel.source(member)
        node = _class(tree, cls)
        if node is None:
            break
        for stmt in node.body:
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and stmt.target.id == "supported_kv_cache_dtypes"
                and isinstance(stmt.value, ast.List)
            ):
                found.setdefault("kv_cache_dtypes", _strings(stmt.value.elts))
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name == "supports_sliding_window":
                    found.setdefault("sliding_window", _returns_true(stmt))
                if stmt.name == "supports_kv_cache_dtype":
                    found.setdefault("kv_cache_dtype_rule", ast.unparse(stmt).split("\n", 1)[1])
                if stmt.name == "get_supported_kernel_block_sizes":
                    found.setdefault("kernel_block_sizes", ast.unparse(stmt).split("return ")[-1])
                if stmt.name == "supports_head_size":
                    found.setdefault("head_size_rule", _plain_function(stmt))
                if stmt.name == "get_supported_head_sizes":
                    found.setdefault("supported_head_sizes", _returned_ints(stmt))
        base = node.bases[0] if node.bases else None
        cls = base.id if isinstance(base, ast.Name) else ""
        if cls == "AttentionBackend":
            reached_base = True
            break
        member = _imported_from(tree, cls) or member
    facts["kv_cache_dtypes"] = found.get("kv_cache_dtypes")
    # AttentionBackend.supports_sliding_window returns False; a chain not followed: unknown
    facts["sliding_window"] = found.get("sliding_window", False if reached_base else None)
    if "kv_cache_dtype_rule" in found:
        facts["kv_cache_dtype_rule"] = found["kv_cache_dtype_rule"].strip()
    facts["kernel_block_sizes"] = found.get("kernel_block_sizes")
    if reached_base:  # AttentionBackend's own rule and list (v1/attention/backend.py)
        root = _class(wheel.source(BACKEND), "AttentionBackend")
        for stmt in root.body if root else []:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "supports_head_size":
                found.setdefault("head_size_rule", _plain_function(stmt))
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "get_supported_head_sizes":
                found.setdefault("supported_head_sizes", _returned_ints(stmt))
    facts["head_size_rule"] = found.get("head_size_rule")
    facts["supported_head_sizes"] = found.get("supported_head_sizes")
    return facts


def _plain_function(fn: ast.FunctionDef) -> str:
    """The function's source without decorators or annotations: runnable with no imports."""
    plain = copy.deepcopy(fn)
    plain.decorator_list, plain.returns = [], None
    for a in (*plain.args.posonlyargs, *plain.args.args, *plain.args.kwonlyargs):
        a.annotation = None
    return ast.unparse(plain)


def _returned_ints(fn: ast.FunctionDef) -> list[int] | None:
    rets = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return)]
    if len(rets) == 1 and isinstance(rets[0], ast.List):
        return [
            e.value
            for e in rets[0].elts
            if isinstance(e, ast.Constant) and isinstance(e.value, int)
        ]
    return None  # computed: not decidable statically


def flash_attn_versions(wheel: Wheel) -> dict[str, dict[str, Any]]:
    """Per FlashAttention version: its kernels in the wheel, and the capabilities
    ``_is_faN_supported`` accepts."""
    tree = wheel.source(FLASH)
    members = set(wheel.zip.namelist())
    folder = FLASH.rsplit("/", 1)[0]
    out: dict[str, dict[str, Any]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("_is_fa")):
            continue
        version = node.name.removeprefix("_is_fa").removesuffix("_supported")
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)]
        ints = [
            (c.func.attr, c.args[0].value)
            for c in calls
            if isinstance(c.func, ast.Attribute)
            and c.args
            and isinstance(c.args[0], ast.Constant)
            and isinstance(c.args[0].value, int)
        ]
        out[version] = {
            "kernels": _kernels(tree, int(version), folder, members),
            "min_capability": next((v for f, v in ints if f == "has_device_capability"), None),
            "families": [v for f, v in ints if f == "is_device_capability_family"],
            "source": f"{FLASH}:{node.lineno}",
        }
    return out


def _kernels(tree: ast.Module, version: int, folder: str, members: set[str]) -> str | None:
    """The wheel member whose presence sets ``FA{version}_AVAILABLE`` (None: absent)."""
    flag = f"FA{version}_AVAILABLE"
    for node in tree.body:
        if not isinstance(node, ast.Try):
            continue
        sets = any(
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == flag for t in n.targets)
            and isinstance(n.value, ast.Constant)
            and n.value.value is True
            for n in node.body
        )
        if not sets:
            continue
        for n in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(n, ast.ImportFrom) and n.level == 1:  # from . import _vllm_faN_C
                stem = f"{folder}/{n.names[0].name}"
                return next((m for m in sorted(members) if m.startswith(stem + ".")), None)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "join":
                parts = _strings(n.args)
                path = "/".join([folder, *parts])
                return path if parts and path in members else None
    return None


def gemma4_fa4_max_head(tree: ast.Module) -> int | None:
    """``Gemma4Config.verify_and_update_config``: FA4 for all layers when the largest head
    size is at most this (``max_head_dim <= N``)."""
    node = _class(tree, "Gemma4Config")
    for n in ast.walk(node) if node else []:
        if (
            isinstance(n, ast.Compare)
            and isinstance(n.left, ast.Name)
            and n.left.id == "max_head_dim"
            and isinstance(n.ops[0], ast.LtE)
            and isinstance(n.comparators[0], ast.Constant)
        ):
            value = n.comparators[0].value
            return value if isinstance(value, int) else None
    return None


def class_defaults(tree: ast.Module, name: str) -> dict[str, Any]:
    """A dataclass's fields whose default is a literal: ``x: T = 1`` or
    ``x: T = Field(default=1, ...)`` (None defaults left out: they mean "decided later")."""
    node = _class(tree, name)
    out: dict[str, Any] = {}
    for stmt in node.body if node else []:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "Field":
            value = next((k.value for k in value.keywords if k.arg == "default"), None)
        if isinstance(value, ast.Constant) and value.value is not None:
            out[stmt.target.id] = value.value
    return out


def extract(path: Path) -> dict[str, Any]:
    wheel = Wheel(path)
    version = path.name.split("-")[1]
    backends: dict[str, dict[str, Any] | None] = {}
    for name, cls in registry(wheel.source(REGISTRY)).items():
        if cls:
            try:
                backends[name] = backend(wheel, cls)
            except KeyError:  # the class's module is not in this wheel (another platform)
                backends[name] = {"class": cls, "missing": True}
        else:
            backends[name] = None
    return {
        "generated_by": "python -m lockpipe.preflight.vllm_source " + path.name,
        "vllm": version,
        "wheel": {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
        "env_vars": env_names(wheel.source(ENVS)),
        "kv_cache_dtypes": literal_values(wheel.source(CACHE), "CacheDType"),
        "cache_config_defaults": class_defaults(wheel.source(CACHE), "CacheConfig"),
        "attention_backends": backends,
        "flash_attn_versions": flash_attn_versions(wheel),
        "gemma4_fa4_max_head_dim": gemma4_fa4_max_head(wheel.source(MODEL_CONFIGS)),
        "sources": dict(sorted(wheel.read_files.items())),
    }


if __name__ == "__main__":  # pragma: no cover - a maintainer's tool
    print(json.dumps(extract(Path(sys.argv[1])), indent=1, sort_keys=True))
