"""Run inside the parser's Python: vLLM's own backend choice, validation and page sizes.

Loaded by :mod:`.vllm_parse_child` (by path; lockpipe is not installed in that Python),
after a command parsed, for the facts :mod:`lockpipe.preflight.vllm_validate` sends:
the card's compute capability and each KV layer's head sizes, KV heads, sliding window,
KV dtype and page. What runs is vLLM's code from the wheel's tree:

- ``Gemma4Config.verify_and_update_config`` (``model_executor/models/config.py``), on a
  stand-in of the config fields it reads (layer types and per-layer head sizes);
- ``CudaPlatformBase.get_attn_backend_cls`` (``platforms/cuda.py``) for each layer kind,
  with the ``AttentionSelectorConfig`` ``v1/attention/selector.py`` builds: a forced
  backend's ``validate_configuration`` and "Selected backend … is not valid", or the
  priority list and the first valid backend;
- ``unify_kv_cache_spec_page_size`` on the ``FullAttentionSpec``/``SlidingWindowSpec``
  of each layer, from the ``vllm/v1/core`` module that defines it (``kv_cache_utils.py``
  in 0.29.0, ``kv_cache_planning.py`` in 0.33.0; the answer names it);
- ``EngineArgs.get_batch_defaults`` (``engine/arg_utils.py``): the OpenAI server's
  ``max_num_batched_tokens`` and ``max_num_seqs`` on the card's memory and name.

Two FAKES stand for what cannot exist here: the card (a ``CudaPlatformBase`` whose
``get_device_capability`` returns the card's, set as ``current_platform``), and the
compiled extensions the wheel ships (``vllm/…/*.so``: an empty module of each name, so
the Python around them imports; none of their kernels is called). A backend whose import
still fails here (FlashInfer needs its CUDA packages) is named in the result: vLLM's own
choice may then differ, and the caller says so.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import types
import zipfile
from types import SimpleNamespace
from typing import Any

FAKE_DOC = "lockpipe FAKE: a compiled vLLM extension that cannot load without a GPU"


def fake_extensions(wheel: str) -> list[str]:
    """An empty module for each compiled extension the wheel ships (named FAKE)."""
    names = []
    for member in zipfile.ZipFile(wheel).namelist():
        if member.startswith("vllm/") and member.endswith(".so"):
            name = member.split(".", 1)[0].replace("/", ".")
            if name not in sys.modules:
                sys.modules[name] = types.ModuleType(name, FAKE_DOC)
                names.append(name)
    return names


def fake_card(capability: tuple[int, int], name: str, memory_bytes: int) -> Any:
    """A CUDA platform (vLLM's own class) that reports this card: FAKE, there is no GPU.

    It becomes ``vllm.platforms.current_platform``, and replaces the CPU platform in every
    vLLM module that bound ``current_platform`` when the parser imported it."""
    platforms = importlib.import_module("vllm.platforms")
    cuda = importlib.import_module("vllm.platforms.cuda")
    interface = importlib.import_module("vllm.platforms.interface")
    cap = interface.DeviceCapability(*capability)

    class FakeCard(cuda.CudaPlatformBase):  # type: ignore[misc,name-defined]
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return cap

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return f"lockpipe FAKE {name}"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return memory_bytes

    fake = FakeCard()
    platforms._current_platform = fake  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        # what the module bound itself: a module-level __getattr__ (transformers' lazy
        # modules) would import on getattr, and 0.33.0's tree leaves some unimportable here
        bound = vars(module).get("current_platform") if module else None
        if module is not platforms and isinstance(bound, interface.Platform):
            module.current_platform = fake  # type: ignore[attr-defined]
    return FakeCard


def batch_defaults(world_size: int = 1) -> dict[str, int]:
    """``EngineArgs.get_batch_defaults`` for the OpenAI server on the (faked) card: what
    ``--max-num-batched-tokens`` and ``--max-num-seqs`` mean when not given."""
    args = importlib.import_module("vllm.engine.arg_utils").EngineArgs
    usage = importlib.import_module("vllm.usage.usage_lib").UsageContext.OPENAI_API_SERVER
    batched, seqs = args.get_batch_defaults(world_size)
    return {"max_num_batched_tokens": int(batched[usage]), "max_num_seqs": int(seqs[usage])}


def gemma4_hook(layers: list[dict[str, Any]], forced: str | None) -> str | None:
    """The backend ``Gemma4Config.verify_and_update_config`` leaves in attention_config."""
    hook = importlib.import_module("vllm.model_executor.models.config").Gemma4Config
    enum = importlib.import_module("vllm.v1.attention.backends.registry").AttentionBackendEnum
    heads = [SimpleNamespace(head_size=max(x["head_size"], x["head_size_v"])) for x in layers]
    types_ = ["sliding_attention" if x["sliding_window"] else "full_attention" for x in layers]

    class Arch(list):  # type: ignore[type-arg]  # model_arch_config[i].head_size
        total_num_hidden_layers = len(heads)

    config = SimpleNamespace(  # only the fields the hook reads
        model_config=SimpleNamespace(
            model_arch_config=Arch(heads), hf_text_config=SimpleNamespace(layer_types=types_)
        ),
        attention_config=SimpleNamespace(
            backend=enum[forced] if forced else None, flash_attn_version=None
        ),
    )
    hook.verify_and_update_config(config)
    backend = config.attention_config.backend
    return backend.name if backend is not None else None


def choose(card: Any, forced: str | None, kind: dict[str, Any], model_dtype: str) -> dict[str, Any]:
    """``get_attn_backend_cls`` for one layer kind: the backend, or vLLM's refusal."""
    torch = importlib.import_module("torch")
    selector = importlib.import_module("vllm.v1.attention.selector")
    enum = importlib.import_module("vllm.v1.attention.backends.registry").AttentionBackendEnum
    config = selector.AttentionSelectorConfig(
        head_size=kind["head_size"],
        dtype=getattr(torch, model_dtype),
        kv_cache_dtype=kind["kv_cache_dtype"],
        block_size=kind["block_size"],
        has_sliding_window=kind["sliding"],
    )
    out: dict[str, Any] = {"backend": None, "refused": None, "not_importable": []}
    if forced is None:  # which backends could not be judged here (ImportError, OSError)
        _, invalid = card.get_valid_backends(card.get_device_capability(), config)
        out["not_importable"] = sorted(
            b.name
            for b, (_, why) in invalid.items()
            if any(w.startswith(("ImportError", "ModuleNotFoundError", "OSError")) for w in why)
        )
    try:
        path = card.get_attn_backend_cls(enum[forced] if forced else None, config)
    except ValueError as exc:
        out["refused"] = str(exc)
        return out
    found = next((b.name for b in enum if b.value == path), path)
    out["backend"] = found
    return out


def defining(package: str, name: str) -> str:
    """The module of ``package`` whose source defines the function ``name`` at top level
    (read, not imported: the function moves between releases)."""
    spec = importlib.util.find_spec(package)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for entry in sorted(os.listdir(folder)):
            if not entry.endswith(".py"):
                continue
            with open(os.path.join(folder, entry), encoding="utf-8") as f:
                tree = ast.parse(f.read(), entry)
            if any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body):
                return f"{package}.{entry[:-3]}"
    raise ImportError(f"no module of {package} defines {name}")


def unified_pages(layers: list[dict[str, Any]], model_dtype: str) -> dict[str, Any]:
    """vLLM's unify_kv_cache_spec_page_size on each layer's spec: block and page bytes,
    and the module it came from."""
    torch = importlib.import_module("torch")
    iface = importlib.import_module("vllm.v1.kv_cache_interface")
    where = defining("vllm.v1.core", "unify_kv_cache_spec_page_size")
    utils = importlib.import_module(where)
    to_dtype = importlib.import_module("vllm.utils.torch_utils").STR_DTYPE_TO_TORCH_DTYPE
    specs = {}
    for x in layers:
        kv = x["kv_cache_dtype"]
        dtype = getattr(torch, model_dtype) if kv == "auto" else to_dtype.get(kv)
        if dtype is None or kv.startswith(("turboquant_", "int")) or kv.endswith("per_token_head"):
            return {"not_run": f"a {kv} layer's spec is built by its backend (packed slots)"}
        common = dict(
            block_size=x["block_size"],
            num_kv_heads=x["num_kv_heads"],
            head_size=x["head_size"],
            head_size_v=x["head_size_v"],
            dtype=dtype,
            page_size_padded=x.get("page_padded"),
        )
        name = f"model.layers.{x['index']}.self_attn.attn"
        if x["sliding_window"]:
            specs[name] = iface.SlidingWindowSpec(sliding_window=x["sliding_window"], **common)
        else:
            specs[name] = iface.FullAttentionSpec(**common)
    before = {n: s.page_size_bytes for n, s in specs.items()}
    try:
        after = utils.unify_kv_cache_spec_page_size(specs)
    except NotImplementedError as exc:
        return {"refused": str(exc), "module": where}
    return {
        "module": where,
        "layers": [
            {
                "index": int(n.split(".")[2]),
                "page_before": before[n],
                "block": s.block_size,
                "page": s.page_size_bytes,
            }
            for n, s in after.items()
        ],
    }


def _backend(name: str | None) -> str | None:
    """A backend as AttentionBackendEnum names it; ``auto`` (any case) forces none."""
    return None if name is None or name.lower() == "auto" else name.upper()


def validate(request: dict[str, Any], engine: dict[str, Any]) -> dict[str, Any]:
    """What vLLM's own functions say of the layers in ``request`` under the parsed command."""
    assumed = request["assumed"]  # what the caller's extract read; vLLM's parse must agree
    read = {
        "kv_cache_dtype": engine.get("kv_cache_dtype"),
        "backend": _backend(
            engine.get("attention_backend") or (engine.get("attention_config") or {}).get("backend")
        ),
    }
    if read != {**assumed, "backend": _backend(assumed.get("backend"))}:
        return {"not_run": f"vLLM parsed {read}, the request assumed {assumed}"}
    faked = fake_extensions(request["wheel"])
    card = fake_card(tuple(request["capability"]), request["card"], request["memory_bytes"])
    layers, model_dtype = request["layers"], request["model_dtype"]
    forced = read["backend"]
    hooked = gemma4_hook(layers, forced) if request.get("gemma4_hook") else forced
    kinds: dict[tuple[Any, ...], dict[str, Any]] = {}
    for x in layers:
        key = (x["head_size"], bool(x["sliding_window"]), x["kv_cache_dtype"])
        kind = kinds.setdefault(
            key,
            {
                "head_size": x["head_size"],
                "sliding": bool(x["sliding_window"]),
                "kv_cache_dtype": x["kv_cache_dtype"],
                "block_size": engine.get("block_size"),
                "layers": [],
            },
        )
        kind["layers"].append(x["index"])
    for kind in kinds.values():
        kind.update(choose(card, hooked, kind, model_dtype))
    return {
        "forced": forced,
        "after_hook": hooked,
        "kinds": list(kinds.values()),
        "pages": unified_pages(layers, model_dtype),
        "defaults": batch_defaults(),
        "fakes": faked,
    }
