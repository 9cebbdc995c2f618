"""Run inside the parser's Python: vLLM's own ``vllm serve`` argument parser on each command.

``python -P vllm_parse_child.py REQUEST RESULT`` with the wheel's tree on ``PYTHONPATH``
(see :mod:`lockpipe.preflight.vllm_parser`, which starts it). Only the standard library
and vLLM are imported here: lockpipe is not installed in that Python.

The parser is built as ``vllm/entrypoints/cli/main.py`` builds it: a
``FlexibleArgumentParser`` with a ``serve`` subparser that ``make_arg_parser`` fills; then
``validate_parsed_serve_args`` (what ``ServeSubcommand.validate`` calls) and
``AsyncEngineArgs.from_cli_args``. Both functions are taken from the module that
``vllm/entrypoints/cli/serve.py`` imports them from (read from its source, since the
module moves between releases: ``entrypoints/launchers/cli_args.py`` in 0.29.0,
``entrypoints/common/cli_args.py`` in 0.33.0). The serve command's own modules (the API server,
uvloop's event loop) are not imported: they are not needed to parse.

REQUEST is JSON: ``{"commands": [[arg, ...], ...]}`` (each without the leading ``vllm``),
and optionally ``"validate": [FACTS | null, ...]``, one per command: then each accepted
command's layers go through vLLM's own backend choice, validation and page unification
(``vllm_validate_child.py`` beside this file, loaded by path).
RESULT gets ``{"vllm": VERSION, "import_seconds": s, "results": [...]}``, each result
``{"accepted": true, "engine": {...}, "validation": {...}}`` or
``{"accepted": false, "message": "..."}``.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import enum
import importlib
import importlib.util
import io
import json
import os
import sys
import time
import traceback
from typing import Any

# The AsyncEngineArgs fields preflight reads (engine/arg_utils.py), by their vLLM names.
FIELDS = (
    "model",
    "served_model_name",
    "kv_cache_dtype",
    "max_model_len",
    "max_num_seqs",
    "attention_backend",
    "attention_config",
    "block_size",
    "gpu_memory_utilization",
    "max_num_batched_tokens",
    "kv_cache_dtype_skip_layers",
    "async_scheduling",
    "speculative_config",
)


def plain(value: Any) -> Any:
    """A parsed value as JSON: an enum by its name, a config dataclass as a dict."""
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


SERVE_NAMES = ("make_arg_parser", "validate_parsed_serve_args")


def serve_imports(names: tuple[str, ...] = SERVE_NAMES) -> str:
    """The module ``vllm/entrypoints/cli/serve.py`` imports ``names`` from, read from its
    source: importing serve.py itself would import the API server and uvloop's loop."""
    spec = importlib.util.find_spec("vllm.entrypoints.cli.serve")
    if spec is None or spec.origin is None:
        raise ImportError("the wheel's tree has no vllm/entrypoints/cli/serve.py")
    with open(spec.origin, encoding="utf-8") as f:
        tree = ast.parse(f.read(), spec.origin)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and set(names) <= {a.name for a in node.names}
        ):
            return node.module
    raise ImportError(f"{spec.origin} imports no {' and '.join(names)} from one module")


def build_parser() -> Any:
    argparse_utils = importlib.import_module("vllm.utils.argparse_utils")
    cli_args = importlib.import_module(serve_imports())
    parser = argparse_utils.FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    serve = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
    cli_args.make_arg_parser(serve)
    return parser, cli_args.validate_parsed_serve_args


def parse_one(parser: Any, validate: Any, engine_args: Any, argv: list[str]) -> dict[str, Any]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
            validate(args)
            if getattr(args, "model_tag", None) is not None:  # ServeSubcommand.cmd does this
                args.model = args.model_tag
            engine = engine_args.from_cli_args(args)
    except SystemExit:  # argparse's error(): usage and "error: …" on stderr, exit 2
        lines = [line for line in err.getvalue().splitlines() if line.strip()]
        return {"accepted": False, "message": lines[-1] if lines else "refused (no message)"}
    except Exception as exc:  # a validation of vLLM's own (TypeError, ValueError)
        return {"accepted": False, "message": f"{type(exc).__name__}: {exc}"}
    return {"accepted": True, "engine": {f: plain(getattr(engine, f, None)) for f in FIELDS}}


def validator() -> Any:
    """vllm_validate_child.py, the file beside this one (lockpipe is not importable here)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_validate_child.py")
    spec = importlib.util.spec_from_file_location("vllm_validate_child", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validated(facts: dict[str, Any] | None, result: dict[str, Any]) -> dict[str, Any]:
    if not facts or not result.get("accepted"):
        return result
    try:
        found = validator().validate(facts, result["engine"])
    except Exception as exc:  # vLLM's code could not run on these facts: the caller says so
        where = traceback.extract_tb(exc.__traceback__)[-1]
        found = {"error": f"{type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"}
    return {**result, "validation": found}


def main(request_path: str, result_path: str) -> None:
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    commands = request["commands"]
    facts = request.get("validate") or [None] * len(commands)
    start = time.monotonic()
    parser, validate = build_parser()
    engine_args = importlib.import_module("vllm.engine.arg_utils").AsyncEngineArgs
    try:
        version = importlib.import_module("vllm.version").__version__
    except (ImportError, AttributeError):
        version = None
    imported = time.monotonic() - start
    results = [
        validated(f, parse_one(parser, validate, engine_args, list(argv)))
        for argv, f in zip(commands, facts, strict=True)
    ]
    out = {"vllm": version, "import_seconds": round(imported, 2), "results": results}
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
