"""The e2e lock on a second host: an empty container storage builds the same llama-cpu image.

The same lock, built through the command line in a storage of its own
(``CONTAINERS_STORAGE_CONF``; for podman an API service of its own on it)
that holds both Debian bases first under other names, as a host that copied
them from a mirror has them, must give the image ID that this machine's
storage gives: nothing a storage held may reach the image. buildah's build on
this machine is the session's; podman's is made here (the engine and its
version are part of the image, so each engine is compared with itself). The second
storage lives under pytest's tmp_path, in /tmp, on purpose: that is where buildah 1.28.2
left a bind mount's empty target in a layer and this machine's storage did not
(docs/reproducibility.md), the difference this test first found.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.engines import get_engine
from lockpipe.errors import EngineMissing
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import load_lock
from tests.e2e.conftest import BuiltLlama, Mirror
from tests.hosts import empty_storage, podman_service, storage_env
from tests.policy import unavailable

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def _here(engine: str, llama_cpu: BuiltLlama, mirror: Mirror, tmp_path: Path) -> str:
    """The image ID of llama-cpu in this machine's storage, built with ``engine``."""
    if engine == "buildah":
        return llama_cpu.outcome.record.image_id
    try:
        real = get_engine(engine)
    except EngineMissing as exc:
        unavailable(f"engine {engine} is not usable: {exc}")
    settings = Settings(state=tmp_path / "here", cache=llama_cpu.cache, mirror=mirror.url)
    return build_target(load_lock(llama_cpu.lock), "llama-cpu", real, settings).record.image_id


# buildah only in CI: each engine costs two llama.cpp compiles here (about 15 minutes on
# two cores), and podman builds with buildah's code; podman across two storages is held by
# tests/integration/test_two_hosts.py. Add "podman" to this list to run it here as well.
@pytest.mark.parametrize("engine", [pytest.param("buildah", marks=pytest.mark.buildah)])
def test_an_empty_storage_builds_the_same_llama_cpu_image(
    engine: str,
    llama_cpu: BuiltLlama,
    mirror: Mirror,
    debian_bases: dict[str, tuple[str, str]],
    tmp_path: Path,
) -> None:
    here = _here(engine, llama_cpu, mirror, tmp_path)
    root = tmp_path / "fresh-host"
    env = storage_env(root, driver="overlay")
    state = root / "state"
    with contextlib.ExitStack() as stack:
        stack.callback(empty_storage, env)
        for ref, digest in debian_bases.values():
            alias = f"{ref.split('/', 1)[0]}/lockpipe-e2e/mirror-{ref.rsplit('/', 1)[1]}"
            subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false",
                            f"docker://{ref.rpartition(':')[0]}@{digest}",
                            f"containers-storage:{alias}"], env=env, check=True)  # fmt: skip
        if engine == "podman":
            env["LOCKPIPE_PODMAN_URL"] = stack.enter_context(podman_service(root, env))
        out = subprocess.run(
            [sys.executable, "-m", "lockpipe", "build", "llama-cpu", "--engine", engine,
             "--lock", str(llama_cpu.lock), "--state", str(state), "--cache",
             str(root / "cache"), "--mirror", mirror.url],
            env=env, cwd=REPO, text=True, capture_output=True, timeout=1800,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        record = json.loads((state / "records" / engine / "llama-cpu.json").read_text())
    assert record["image_id"] == here, (
        f"{engine}: the empty storage built another image than this machine's; explain it "
        "with: lockpipe reproduce llama-cpu"
    )
