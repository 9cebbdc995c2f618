"""The fleet's registry as the model mirror, end to end (issue 21): the Gemma 3 270M payload
goes from the Hub fixture into store A, through ``payloads publish`` into the loopback
registry, into store B through ``--mirror oci://`` alone, and the image the session built
serves it from store B (``lockpipe smoke`` on the CPU).

The Hub fixture is the session's loopback mirror, serving the file at the Hub's resolve
path. Store B and the smoke see no Hub (``HF_ENDPOINT`` is a closed port) and no HTTP
mirror, so every byte they hold came from the registry. The repository is new for each
run, so the publish uploads the blob each time (distribution links blobs per repository).
"""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from lockpipe.fs import sha256_file
from lockpipe.lock.model import load_lock
from lockpipe.payloads.store import blob_path, payload_path
from lockpipe.registry import modelpack as mp
from tests.e2e.conftest import BuiltLlama, Mirror
from tests.e2e.llama_cpu import GEMMA_URL, PAYLOAD, reports, smoke_file
from tests.fixtures_gemma import GemmaFile

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
NO_HUB = "http://127.0.0.1:9"  # discard's port: nothing listens, a Hub request would fail


def lockpipe(*argv: str | Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lockpipe", *map(str, argv)], cwd=REPO,
                          text=True, capture_output=True, check=False, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})  # fmt: skip


def test_the_payload_round_trips_through_the_registry_and_smokes(
    llama_cpu: BuiltLlama, mirror: Mirror, registry: str, gemma3_270m_gguf: GemmaFile,
    tmp_path: Path,
) -> None:  # fmt: skip
    mirror.add(GEMMA_URL, gemma3_270m_gguf.path)
    lock = load_lock(llama_cpu.lock)
    payload = lock.payloads[PAYLOAD]
    a, b = tmp_path / "store-a", tmp_path / "store-b"
    prefix = f"{registry}/lockpipe-e2e/models-{uuid.uuid4().hex[:12]}"

    fetched = lockpipe("payloads", "--lock", lock.path, "--store", a, "--mirror", mirror.url,
                       "--quiet")  # fmt: skip
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    published = lockpipe("payloads", "publish", "--lock", lock.path, "--store", a, "--to", prefix)
    assert published.returncode == 0, published.stderr[-3000:]
    assert f"uploaded {payload.size:,} bytes" in published.stderr, published.stderr
    manifest = requests.get(f"http://{registry}/v2/{prefix.partition('/')[2]}/{PAYLOAD}"
                            f"/manifests/rev-{payload.revision}",
                            headers={"Accept": mp.OCI_MANIFEST}, timeout=30).json()  # fmt: skip
    (layer,) = manifest["layers"]
    assert layer["digest"] == f"sha256:{payload.sha256}" and layer["size"] == payload.size

    served = len(mirror.served)
    oci = f"oci://{prefix}"
    got = lockpipe("payloads", "--lock", lock.path, "--store", b, "--mirror", oci, "--quiet",
                   HF_ENDPOINT=NO_HUB)  # fmt: skip
    assert got.returncode == 0, got.stderr[-3000:]
    source = gemma3_270m_gguf.path
    assert filecmp.cmp(payload_path(b, payload), source, shallow=False)  # byte-identical
    assert sha256_file(payload_path(b, payload)) == sha256_file(source)
    assert blob_path(b, payload).stat().st_ino != blob_path(a, payload).stat().st_ino

    out = tmp_path / "out"
    smoke = lockpipe("smoke", "llama-cpu", "--engine", "buildah", "--lock", lock.path,
                     "--state", llama_cpu.state, "--store", b, "--mirror", oci, "--verify",
                     "--expect", smoke_file(tmp_path / "smoke.json"), "--out", out, "--quiet",
                     HF_ENDPOINT=NO_HUB)  # fmt: skip
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    assert len(mirror.served) == served  # store B and the smoke took nothing from the Hub fixture
    (report,) = reports(out)["reports"]
    checks = {c["name"]: c for c in report["results"]}
    assert all(c["status"] in ("PASS", "SKIP") for c in checks.values()), checks
    assert "Paris" in str(checks["generation[0]"]["detail"])
    assert "6, 7, 8" in str(checks["generation[1]"]["detail"])
    assert report["store"] == str(b.resolve())  # the run mounted store B at /store
