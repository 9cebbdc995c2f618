"""frank-small in the seeds' TurboQuant shape: a what-if of the committed lock.

The seeds ran ``--attention-backend TURBOQUANT --kv-cache-dtype turboquant_k8v4`` at
262,144 tokens on an unpublished vLLM dev build (000_6a3c38fea55556cf). Released vLLM
refuses it, so the lock serves bf16 instead; tests that need a vLLM shape preflight fails
build this one from the lock's own command, with only those flags changed.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from lockpipe.cli import options
from lockpipe.cli.options import add_preflight_options
from lockpipe.cli.preflight import do_preflight
from lockpipe.lock.model import Lock
from lockpipe.preflight import config

REPO = Path(__file__).resolve().parents[1]
# The seeds' TurboQuant context: Gemma 4's whole window (the old lock's 262,144), as
# locks/preflight.json's transcript of the model's config.json gives it
WINDOW = (
    config.load(REPO / "locks" / "preflight.json")
    .models["gemma-4-12b-qat-w4a16"]
    .data["text_config"]["max_position_embeddings"]
)
# The seeds' flags, as preflight's what-ifs spell them, in the order its "as asked" line
# names them (docs/preflight.md)
TURBOQUANT_WHAT_IF = (
    "--kv-cache-dtype", "turboquant_k8v4", "--attention-backend", "TURBOQUANT",
    "--max-model-len", str(WINDOW),
)  # fmt: skip


def _set(command: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    if flag in command:
        i = command.index(flag)
        return (*command[: i + 1], value, *command[i + 2 :])
    return (*command, flag, value)


def turboquant(lock: Lock) -> Lock:
    """``lock`` with frank-small serving the seeds' TurboQuant shape."""
    t = lock.target("frank-small")
    command = t.serve.command
    for flag, value in zip(TURBOQUANT_WHAT_IF[::2], TURBOQUANT_WHAT_IF[1::2], strict=True):
        command = _set(command, flag, value)
    serve = replace(t.serve, command=command, context=WINDOW, kv_dtype="turboquant_k8v4")
    return replace(lock, targets={**lock.targets, t.name: replace(t, serve=serve)})


def run_preflight(
    tmp_path: Path, *argv: str, lock: Path | None = None
) -> tuple[int, dict[str, Any]]:
    """``lockpipe preflight --json`` on the committed lock (or ``lock``), with no store;
    the exit code and each target's report by name."""
    parser = options.Parser(prog="lockpipe preflight", parents=[options.common()])
    parser.add_argument("targets", nargs="*")
    add_preflight_options(parser)
    out = tmp_path / "report.json"
    (tmp_path / "no-store").mkdir(exist_ok=True)
    args = parser.parse_args(
        ["--lock", str(lock or REPO / "locks" / "digests.json"), "--store",
         str(tmp_path / "no-store"), "--json", str(out), *argv]
    )  # fmt: skip
    args.verb = "preflight"
    code = do_preflight(args)
    report: dict[str, Any] = json.loads(out.read_text())
    return code, {t["target"]: t for t in report["targets"]}


def bump(root: Path, version: str) -> Path:
    """The committed lock with frank-small's VLLM_VERSION moved to ``version``."""
    (root / "images").symlink_to(REPO / "images")
    (root / "locks").mkdir()
    doc = json.loads((REPO / "locks" / "digests.json").read_text())
    doc["targets"]["frank-small"]["build_args"]["VLLM_VERSION"] = version
    path = root / "locks" / "digests.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    shutil.copy(REPO / "locks" / "preflight.json", root / "locks" / "preflight.json")
    return path
