"""Two checkouts in two folders (a stand-in for two hosts) build one target to one digest.

The same test project is copied to two temp folders, each with its own
state; each builds the target with the engine, and pushes it to the loopback
registry under its own name. The image IDs and the registry's manifest
digests must agree: nothing of the checkout's path or the build's time may
reach the image. The step records the container's working directory, which
is the same on both; that neither checkout's host path reaches the image is
checked byte for byte in its exported config and layers.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.run import Settings, build_key, run_build
from lockpipe.lock.model import load_lock
from lockpipe.verify.tree import export, source_for
from tests.lockfactory import make_repo, on_base, usable_engine

pytestmark = pytest.mark.integration

DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY greeting.txt /app/greeting.txt
RUN echo "built from $(pwd)" > /app/where && cat /app/greeting.txt >> /app/where
"""


@pytest.mark.parametrize(
    "name", [pytest.param("buildah", marks=pytest.mark.buildah),
             pytest.param("podman", marks=pytest.mark.podman)],
)  # fmt: skip
def test_two_checkouts_agree_on_the_digest(
    name: str, busybox_base: tuple[str, str], registry: str, tmp_path: Path
) -> None:
    engine = usable_engine(name)
    document = on_base(busybox_base, f"localhost/lockpipe-test/checkout-{name}:1")
    project = tmp_path / "project"
    (project / "images/app").mkdir(parents=True)
    (project / "images/app/greeting.txt").write_text("hello from the lock\n")
    make_repo(project, document, DOCKERFILE)  # relocked with greeting.txt in the context

    ids, digests, checkouts = [], [], []
    for host in ("host-a", "host-b"):
        checkout = tmp_path / host / "src" / "lockpipe"  # different paths, different depths
        shutil.copytree(project, checkout)
        checkouts.append(str(checkout).encode())
        lock = load_lock(checkout / "locks" / "digests.json")
        settings = Settings(state=checkout / ".state", cache=checkout / ".cache", force=True)
        plan = plan_target(lock, "app")
        # No cache: host B must not reuse the layers host A left in this machine's storage.
        record = run_build(engine, plan, build_key(plan, name, engine.version()), settings,
                           no_cache=True)  # fmt: skip
        ids.append(record.image_id)
        dest = f"{registry}/lockpipe-test/checkout-{host}-{name}:1"
        digests.append(engine.push(lock.target("app").tag, dest, tls_verify=False))

    assert ids[0] == ids[1], f"{name}: two checkouts built {ids}"
    assert digests[0] == digests[1], f"{name}: two checkouts pushed {digests}"
    # Neither host path is in the image: not in its config (build args, labels, history),
    # not in any layer (read uncompressed from the engine's storage).
    with tempfile.TemporaryDirectory(prefix="lockpipe-checkout-") as tmp:
        export(source_for(name, ids[0]), Path(tmp) / "oci")
        blobs = [p for p in (Path(tmp) / "oci" / "blobs").rglob("*") if p.is_file()]
        assert len(blobs) >= 3  # the manifest, the config and at least one layer
        contents = [blob.read_bytes() for blob in blobs]
        # The layers are plain tars here, so the step's own output is readable in them.
        assert any(b"hello from the lock" in data for data in contents)
        for blob, data in zip(blobs, contents, strict=True):
            assert not [c for c in checkouts if c in data], f"{blob.name} holds a checkout path"
