"""A test checkout of the real lock whose vLLM base lives in the loopback registry.

:func:`vllm_tags` pushes one small image per tag (its version label is the tag's version,
as vLLM's images carry it) to a fresh repository; :func:`checkout` copies ``locks/`` and
``images/`` into a tmp folder, points ``bases.vllm-openai`` at that repository's
``v0.29.0-cu129`` and relocks, so a refresh or an upgrade can run on it without Docker Hub.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import dump_lock, load_lock
from lockpipe.refresh.versions import parse_tag
from tests.policy import unavailable
from tests.registry_servers import oci_layout, skopeo_copy, skopeo_raw_digest

REPO = Path(__file__).resolve().parents[1]
# The six tags (issue 20): exactly v0.30.0-cu129 and v0.33.0-cu129 are newer and
# compatible with the lock's v0.29.0-cu129
SIX = ("v0.29.0-cu129", "v0.30.0-cu129", "v0.31.0-cu130", "v0.32.0rc1-cu129",
       "v0.32.0-cu129-ubuntu2404", "v0.33.0-cu129")  # fmt: skip


def vllm_tags(
    registry: str, workdir: Path, tags: Sequence[str] = SIX
) -> tuple[str, dict[str, str]]:
    """(repository, tag -> digest) of a fresh repository holding ``tags``."""
    if shutil.which("skopeo") is None:
        unavailable("skopeo is needed to push the test tags")
    repo = f"{registry}/lockpipe-test/vllm-openai-{uuid.uuid4().hex[:8]}"
    digests = {}
    for tag in tags:
        version = parse_tag(tag)
        layout = oci_layout(workdir / tag, ["linux/amd64"], version.version if version else tag)
        skopeo_copy(layout, f"{repo}:{tag}")
        digests[tag] = skopeo_raw_digest(f"{repo}:{tag}")
    return repo, digests


def checkout(root: Path, repo: str, digest: str) -> Path:
    """The real lock and images under ``root``, vllm-openai on ``repo:v0.29.0-cu129``."""
    shutil.copytree(REPO / "locks", root / "locks")
    shutil.copytree(REPO / "images", root / "images")
    lock = root / "locks" / "digests.json"
    doc = json.loads(lock.read_text())
    doc["bases"]["vllm-openai"].update(ref=f"{repo}:v0.29.0-cu129", digest=digest)
    lock.write_text(dump_lock(doc))
    lock.write_text(dump_lock(relock(load_lock(lock))))
    return lock


def lockpipe(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", *args], cwd=REPO, text=True, capture_output=True,
        check=False, env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip
