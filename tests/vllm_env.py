"""vLLM's own parser environment for the tests that run vLLM's code (test_vllm_parser.py,
test_vllm_bump.py): the one ``nox -s vllm-parser -- VERSION`` builds under the cache
(LOCKPIPE_CACHE, else ~/.cache/lockpipe). Not built: on CI it is built here (minutes, then
kept) and one that cannot be built fails; elsewhere the test skips with the reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lockpipe.errors import LockpipeError
from lockpipe.fs import cache_home
from lockpipe.preflight import vllm_parser, vllm_parser_env, vllm_rules
from lockpipe.preflight.vllm_parser import ParserEnv
from tests.policy import ON_CI, unavailable

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("LOCKPIPE_CACHE") or cache_home(os.environ) / "lockpipe")


def parser_env(version: str) -> ParserEnv:
    """vLLM ``version``'s parser environment, found or (CI=true) built."""
    where = vllm_parser.env_dir(CACHE, version)
    found = vllm_parser.find_env(where, version, vllm_rules.release(version)["wheel"])
    if isinstance(found, ParserEnv):
        return found
    if not ON_CI:
        unavailable(f"{found.reason}; {found.fix}")
    try:
        return vllm_parser_env.build(REPO, CACHE, version)
    except LockpipeError as exc:
        pytest.fail(f"CI=true but vLLM {version}'s parser cannot be built: {exc}")
