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
  its kernel block sizes, following base classes within the wheel.

The output records the wheel's file name and sha256 and each source file's sha256.
"""

from __future__ import annotations

import ast
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
    return facts


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
        "attention_backends": backends,
        "sources": dict(sorted(wheel.read_files.items())),
    }


if __name__ == "__main__":  # pragma: no cover - a maintainer's tool
    print(json.dumps(extract(Path(sys.argv[1])), indent=1, sort_keys=True))
