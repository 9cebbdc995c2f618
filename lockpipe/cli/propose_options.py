"""The options of ``refresh-digests --propose`` and of ``lockpipe upgrade``."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

FIRST_SEEN = "refresh/first-seen.json"  # under --state


def add_propose_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--propose",
        action="store_true",
        help="also list newer versions (base tags, llama.cpp releases, vLLM on "
        "PyPI), each judged against the targets it touches; never applied",
    )
    p.add_argument(
        "--min-age",
        default=os.environ.get("LOCKPIPE_MIN_AGE") or "0s",
        metavar="AGE",
        help="hold back a version first seen less than AGE ago (3d, 12h; "
        "LOCKPIPE_MIN_AGE; default 0s)",
    )
    p.add_argument(
        "--first-seen",
        type=Path,
        metavar="FILE",
        default=Path(os.environ["LOCKPIPE_FIRST_SEEN"])
        if os.environ.get("LOCKPIPE_FIRST_SEEN")
        else None,
        help=f"the first-seen record (LOCKPIPE_FIRST_SEEN; default STATE/{FIRST_SEEN}); "
        "kept by lockpipe, since an image's created date is clamped",
    )


def add_upgrade_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="the lock entry: a base or a source")
    p.add_argument("version", metavar="VERSION", help="the version to move it to (0.33.0, b11434)")
    p.add_argument(
        "--github-api",
        default=os.environ.get("LOCKPIPE_GITHUB_API") or "https://api.github.com",
        help="GitHub's API (LOCKPIPE_GITHUB_API)",
    )
    p.add_argument(
        "--pypi",
        default=os.environ.get("LOCKPIPE_PYPI") or "https://pypi.org",
        help="the package index (LOCKPIPE_PYPI)",
    )
    p.add_argument(
        "--rules-dir",
        type=Path,
        default=None,
        help="where preflight's vLLM rules go when derived (default: vllm-rules/ beside the "
        "lock, as lockpipe lock does)",
    )
    p.add_argument(
        "--wheel",
        type=Path,
        default=None,
        help="vLLM VERSION's wheel already on disk (default: pip fetches it)",
    )
