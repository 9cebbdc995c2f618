"""Build contexts: the target's folder staged into a fresh one, with its labels and sources.

The engines pack the staged folder (``lockpipe.engines.context``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path


def label_instruction(labels: Mapping[str, str]) -> str:
    """One ``LABEL`` line, keys sorted, values JSON-quoted (valid Dockerfile strings)."""
    return "LABEL " + " ".join(
        f"{json.dumps(k)}={json.dumps(v)}" for k, v in sorted(labels.items())
    )


def stage(
    context: Path, dockerfile: str, labels: Mapping[str, str], extra: Mapping[str, Path], dest: Path
) -> Path:
    """Copy ``context`` to ``dest`` with ``extra`` files (name → path) and return dest.

    The labels are appended to the staged Dockerfile as one LABEL line rather
    than passed through each engine's API: the libpod API takes them as a Go
    map, whose random order changed the image history (and digest) per build.
    """
    shutil.copytree(context, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for name, path in extra.items():
        shutil.copyfile(path, dest / name)
    target = dest / dockerfile
    target.write_text(target.read_text().rstrip("\n") + "\n" + label_instruction(labels) + "\n")
    return dest
