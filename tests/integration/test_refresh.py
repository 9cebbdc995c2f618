"""refresh-digests on base images against the real loopback registry: a tag that moves,
--check, and registry faults that must leave the lock byte for byte as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import DriftError, IntegrityError, RegistryError, UsageError
from tests.bases import BUSYBOX, push_busybox_base, push_scratch_image
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable
from tests.registry_servers import FaultProxy

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
ORIGIN = {"source": "pushed by the test", "seen": "2026-01-01", "note": "keep me"}


def refresh(lock: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock), *args],
        cwd=REPO, text=True, capture_output=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip


@pytest.fixture
def moved_tag(registry: str, tmp_path: Path) -> tuple[str, str, str]:
    """(ref, digest before, digest after) of a fresh tag pushed twice with other content."""
    if shutil.which("buildah") is None or not BUSYBOX.is_file():
        unavailable("buildah and busybox-static are needed to push the test images")
    name = f"lockpipe-test/refresh-{uuid.uuid4().hex[:8]}:1"
    ref, before = push_busybox_base(registry, tmp_path / "one", name)
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "stamp").write_text(uuid.uuid4().hex)
    _, after = push_scratch_image(tmp_path / "two", "FROM scratch\nCOPY stamp /stamp\n", ref)
    assert before != after
    return ref, before, after


def _lock(tmp_path: Path, bases: dict[str, Any]) -> Path:
    document = doc()
    document["bases"] = bases
    return make_repo(tmp_path / "checkout", document)


def test_a_moved_tag_is_exactly_one_change_with_its_report(
    moved_tag: tuple[str, str, str], busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, before, after = moved_tag
    still, still_digest = busybox_base
    lock = _lock(tmp_path, {
        "busybox": {"ref": ref, "digest": before, "origin": dict(ORIGIN)},
        "steady": {"ref": still, "digest": still_digest, "origin": dict(ORIGIN)},
    })  # fmt: skip
    original = lock.read_bytes()

    md, js = tmp_path / "report.md", tmp_path / "report.json"
    reports = ("--report-md", str(md), "--report-json", str(js))
    check = refresh(lock, "--check", "--kind", "bases", *reports)
    assert check.returncode == DriftError.return_code, check.stderr
    assert "1 pin(s) moved upstream" in check.stderr and lock.read_bytes() == original
    assert not md.exists() and not js.exists()  # --check writes nothing at all

    dry = refresh(lock, "--dry-run", "--kind", "bases", *reports)
    assert dry.returncode == 0 and "would change" in dry.stderr and lock.read_bytes() == original
    assert "1 entry changed of 2 checked" in md.read_text() and js.is_file()  # reports, no lock
    md.unlink()
    js.unlink()

    result = refresh(lock, "--kind", "bases", "--report-md", str(md), "--report-json", str(js))
    assert result.returncode == 0, result.stderr
    written = json.loads(lock.read_text())
    assert written["bases"]["busybox"]["digest"] == after
    assert written["bases"]["busybox"]["origin"]["source"].startswith("registry 127.0.0.1:5000")
    assert written["bases"]["steady"] == json.loads(original)["bases"]["steady"]  # origin kept
    (change,) = json.loads(js.read_text())["changes"]
    assert (change["key"], change["moved"][0]) == (
        "bases.busybox", {"key": "digest", "old": before, "new": after})  # fmt: skip
    assert f"| digest | `{before}` | `{after}` |" in md.read_text()
    assert "1 entry changed of 2 checked (bases 2)" in md.read_text()
    # skopeo, an independent client, sees the digest the lock now pins
    if shutil.which("skopeo"):
        argv = ["skopeo", "inspect", "--tls-verify=false", "--no-tags", f"docker://{ref}"]
        inspect = subprocess.run(argv, capture_output=True, text=True, check=True)
        assert json.loads(inspect.stdout)["Digest"] == after
    again = refresh(lock, "--check")
    assert again.returncode == 0, again.stderr
    lock_check = subprocess.run(
        [sys.executable, "-m", "lockpipe", "lock", "--check", "--lock", str(lock)],
        cwd=REPO, capture_output=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert lock_check.returncode == 0


def test_a_pinned_digest_the_registry_no_longer_has_is_warned_about(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, digest = busybox_base
    lock = _lock(tmp_path, {"busybox": {"ref": ref, "digest": "sha256:" + "0" * 64}})
    md = tmp_path / "report.md"
    result = refresh(lock, "--report-md", str(md), "--kind", "bases")
    assert result.returncode == 0, result.stderr
    assert "(unfetchable): the pinned sha256:" + "0" * 64 in md.read_text()
    assert json.loads(lock.read_text())["bases"]["busybox"]["digest"] == digest


class _Refuses(BaseHTTPRequestHandler):
    """A FAKE registry, for tests only: it refuses every request with a Basic challenge,
    as a registry does to an unknown user (no real registry serves anything here)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="test"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD


@pytest.fixture
def refusing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("fault", ["unreachable", "unknown-tag", "refused"])
def test_a_registry_fault_names_the_base_and_leaves_the_lock_byte_identical(
    fault: str, busybox_base: tuple[str, str], registry: str, refusing: str, tmp_path: Path
) -> None:
    ref, digest = busybox_base
    bad = {"unreachable": "127.0.0.1:9/lockpipe-test/busybox:1",
           "unknown-tag": f"{registry}/lockpipe-test/busybox:no-such-tag",
           "refused": f"{refusing}/lockpipe-test/busybox:1"}[fault]  # fmt: skip
    lock = _lock(tmp_path, {
        "busybox": {"ref": ref, "digest": "sha256:" + "0" * 64},  # moves: yet nothing is written
        "bad": {"ref": bad, "digest": digest},
    })  # fmt: skip
    before = lock.read_bytes()
    result = refresh(lock, "--report-md", str(tmp_path / "r.md"))
    assert result.returncode == RegistryError.return_code, result.stderr
    assert "bases.bad: " in result.stderr and "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert lock.read_bytes() == before
    assert not (tmp_path / "r.md").exists()


def push_index(ref: str, arches: tuple[str, ...], label: str, work: Path) -> str:
    """Push a multi-arch index of tiny scratch images (each labelled with version ``label``)
    as ``ref`` with buildah; its digest."""
    stamp = uuid.uuid4().hex[:8]
    made = []

    def bah(*args: str) -> str:
        done = subprocess.run(["buildah", *args], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    try:
        for arch in arches:
            (work / arch).write_text(f"{arch} {stamp}\n")
            ctr = bah("from", "scratch")
            bah("copy", ctr, str(work / arch), "/stamp")
            bah("config", "--arch", arch, "--os", "linux", "--label",
                f"org.opencontainers.image.version={label}", ctr)  # fmt: skip
            made.append(f"localhost/lockpipe-refresh-{arch}:{stamp}")
            bah("commit", "-q", ctr, made[-1])
            bah("rm", ctr)
        index = f"localhost/lockpipe-refresh-index:{stamp}"
        bah("manifest", "create", index)
        made.append(index)
        for image in made[:-1]:
            bah("manifest", "add", index, f"containers-storage:{image}")
        bah("manifest", "push", "-q", "--all", "--tls-verify=false", "--digestfile",
            str(work / "digest"), index, f"docker://{ref}")  # fmt: skip
        return (work / "digest").read_text().strip()
    finally:
        for image in reversed(made):
            subprocess.run(["buildah", "rmi", image], capture_output=True, check=False)


def test_a_multi_arch_index_records_its_platforms_and_fails_when_one_goes(
    registry: str, tmp_path: Path
) -> None:
    if shutil.which("buildah") is None:
        unavailable("buildah is needed to push the test index")
    ref = f"{registry}/lockpipe-test/refresh-index-{uuid.uuid4().hex[:8]}:1"
    first = push_index(ref, ("amd64", "arm64"), "1.0", tmp_path)
    zero = "sha256:" + "0" * 64
    lock = _lock(tmp_path, {"busybox": {
        "ref": ref, "digest": zero, "platform": "linux/amd64",
        "platforms": {"linux/amd64": zero, "linux/arm64": zero}}})  # fmt: skip
    result = refresh(lock)
    assert result.returncode == 0, result.stderr
    entry = json.loads(lock.read_text())["bases"]["busybox"]
    assert entry["digest"] == first and entry["version_label"] == "1.0"
    assert set(entry["platforms"]) == {"linux/amd64", "linux/arm64"} and zero not in entry[
        "platforms"].values()  # fmt: skip

    push_index(ref, ("amd64",), "1.0", tmp_path)  # arm64 dropped: hosts of it lose the base
    before = lock.read_bytes()
    md = tmp_path / "report.md"
    result = refresh(lock, "--report-md", str(md))
    assert result.returncode == RegistryError.return_code, result.stderr
    assert "bases.busybox: platform gone: linux/arm64" in result.stderr
    assert "available: linux/amd64" in result.stderr and "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert lock.read_bytes() == before and not md.exists()


def test_an_index_that_became_one_manifest_drops_its_stale_child_digests(
    registry: str, tmp_path: Path
) -> None:
    if shutil.which("buildah") is None:
        unavailable("buildah is needed to push the test index")
    ref = f"{registry}/lockpipe-test/refresh-single-{uuid.uuid4().hex[:8]}:1"
    push_index(ref, ("amd64", "arm64"), "1.0", tmp_path)
    zero = "sha256:" + "0" * 64
    lock = _lock(tmp_path, {"busybox": {"ref": ref, "digest": zero, "platform": "linux/amd64",
                                        "platforms": {"linux/amd64": zero}}})  # fmt: skip
    assert refresh(lock).returncode == 0
    assert set(json.loads(lock.read_text())["bases"]["busybox"]["platforms"]) == {"linux/amd64"}
    (tmp_path / "single").mkdir()
    (tmp_path / "single" / "stamp").write_text(uuid.uuid4().hex)
    _, single = push_scratch_image(tmp_path / "single", "FROM scratch\nCOPY stamp /stamp\n", ref)
    md = tmp_path / "report.md"
    result = refresh(lock, "--report-md", str(md))
    assert result.returncode == 0, result.stderr
    entry = json.loads(lock.read_text())["bases"]["busybox"]
    assert entry["digest"] == single and "platforms" not in entry
    assert "(index-gone): no longer a multi-arch index" in md.read_text()


@pytest.fixture
def proxy(registry: str) -> Iterator[FaultProxy]:
    """A real proxy in front of the loopback registry that misbehaves on request."""
    server = FaultProxy(registry)
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "fault", ["429-then-ok", "5xx-forever", "no-digest-header", "bogus-digest-header", "corrupt"]
)
def test_registry_faults_through_the_cli(
    fault: str, proxy: FaultProxy, busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, digest = busybox_base
    through = f"{proxy.host}/{ref.split('/', 1)[1]}"
    lock = _lock(tmp_path, {"busybox": {"ref": through, "digest": "sha256:" + "0" * 64}})
    before = lock.read_bytes()
    if fault == "429-then-ok":
        proxy.fail_status, proxy.fail_times, proxy.retry_after = 429, 2, "0"
    elif fault == "5xx-forever":
        proxy.fail_status, proxy.fail_times, proxy.retry_after = 503, 10_000, "0"
    elif fault == "no-digest-header":
        proxy.drop_digest = True
    elif fault == "bogus-digest-header":  # not a digest: the bytes' own sha256 decides
        proxy.extra = {"Docker-Content-Digest": "sha256:../../not-a-digest"}
    else:
        proxy.corrupt = True
    md = tmp_path / "r.md"
    cache = str(tmp_path / "cache")  # no manifest from an earlier run short-cuts the proxy
    result = refresh(lock, "--kind", "bases", "--report-md", str(md), LOCKPIPE_CACHE=cache)
    assert "Traceback" not in result.stderr
    if fault in ("429-then-ok", "no-digest-header", "bogus-digest-header"):
        assert result.returncode == 0, result.stderr
        assert json.loads(lock.read_text())["bases"]["busybox"]["digest"] == digest
        assert md.is_file()
        statuses = [status for _, _, status in proxy.seen]
        if fault == "429-then-ok":
            assert statuses[:2] == [429, 429] and 200 in statuses[2:]
        else:  # the digest came from the manifest's bytes (GET), not a header
            assert any(method == "GET" and "/manifests/" in path for method, path, _ in proxy.seen)
        return
    expected = IntegrityError if fault == "corrupt" else RegistryError  # altered bytes: 9
    assert result.returncode == expected.return_code, result.stderr
    assert "bases.busybox: " in result.stderr and "nothing was written" in result.stderr
    if fault == "corrupt":
        assert "do not match their digest" in result.stderr
    assert lock.read_bytes() == before and not md.exists()


def test_an_unwritable_report_path_is_a_usage_error_and_the_lock_is_untouched(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, _ = busybox_base
    lock = _lock(tmp_path, {"busybox": {"ref": ref, "digest": "sha256:" + "0" * 64}})
    before = lock.read_bytes()
    blocker = tmp_path / "a-file"
    blocker.write_text("a file, not a folder")
    for option in ("--report-md", "--report-json"):
        result = refresh(lock, "--kind", "bases", option, str(blocker / "report"))
        assert result.returncode == UsageError.return_code, result.stderr
        assert "Traceback" not in result.stderr
        assert f"{option} {blocker / 'report'}: cannot write the report" in result.stderr
        assert lock.read_bytes() == before
