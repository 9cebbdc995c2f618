"""``verify --rebuild`` from the command line after a refresh moved a base.

The image is published from one base digest; then a different image is
pushed under the base's tag and the lock moved to it (as refresh-digests
would). ``verify --published --rebuild`` must not stop at the provenance
mismatch: it reports it, rebuilds, explains the difference as a moved base,
and only then exits non-zero (CheckFailed, 16). Real buildah, the loopback
registry.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.engines import get_engine
from lockpipe.errors import CheckFailed, EngineMissing
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import dump_lock, load_lock
from tests.bases import BUSYBOX, push_scratch_image
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.buildah]

BASE = "FROM scratch\nCOPY busybox /bin/busybox\n{extra}"
BASE += 'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n'


def _base(registry: str, workdir: Path, ref: str, extra: str = "") -> str:
    """Push a busybox base as ``ref``; its digest."""
    workdir.mkdir(parents=True)
    shutil.copy(BUSYBOX, workdir / "busybox")
    (workdir / "moved").write_text("a refresh brought this\n")
    return push_scratch_image(workdir, BASE.format(extra=extra), ref)[1]


def test_verify_rebuild_names_the_moved_base(
    registry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        engine = get_engine("buildah")
    except EngineMissing as exc:
        unavailable(f"buildah is not usable: {exc}")
    if not BUSYBOX.is_file():
        unavailable("busybox-static is needed to make the test base")
    run = uuid.uuid4().hex[:8]
    base_ref = f"{registry}/lockpipe-test/moved-{run}:1"
    first = _base(registry, tmp_path / "base-1", base_ref)
    document = doc()
    document["bases"]["busybox"] = {"ref": base_ref, "digest": first}
    document["targets"]["app"]["tag"] = "localhost/lockpipe-test/moved-base:1"
    lock = make_repo(tmp_path / "repo", document)
    state, cache = tmp_path / "state", tmp_path / "cache"
    build_target(load_lock(lock), "app", engine, Settings(state=state, cache=cache))
    common = ["--lock", str(lock), "--state", str(state)]
    prefix = f"{registry}/lockpipe-moved-{run}"
    assert main(["publish", "app", "--engine", "buildah", "--to", prefix, *common]) == 0

    # A refresh: the tag now names another image, and the lock follows it.
    second = _base(registry, tmp_path / "base-2", base_ref, extra="COPY moved /moved\n")
    assert second != first
    moved = json.loads(lock.read_text())
    moved["bases"]["busybox"]["digest"] = second
    lock.write_text(dump_lock(moved))
    lock.write_text(dump_lock(relock(load_lock(lock))))
    capsys.readouterr()

    code = main(["verify", "app", "--published", "--rebuild", "--engine", "buildah",
                 "--cache", str(cache), *common])  # fmt: skip

    out = capsys.readouterr()
    text = out.out + out.err
    assert code == CheckFailed.return_code, text[-3000:]
    assert "a refresh moved bases.busybox (refresh-digests)" in text, text[-3000:]
    assert "cause moved-base" in text, text[-3000:]
    assert text.index("refresh moved bases.busybox") < text.index("cause moved-base")
    assert text.count("cause moved-base") == 1  # the explanation is printed once
    assert "Traceback" not in text
