"""``lockpipe payloads`` at its trust boundaries: mirror credentials, a Hub out of reach.

Through the command line, as a user meets them: a ``--mirror`` with a user
and password reaches the mirror as Basic auth and never shows in stdout,
stderr or the JSON lines, whatever fails; a Hub whose name does not resolve,
or that never answers until Ctrl-C, costs seconds and leaves no partial file;
``HF_HUB_OFFLINE=1`` makes no request at all.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import INTERRUPTED, FetchError, UsageError
from lockpipe.publish.artifacts import PublishOptions, publish_payloads
from tests.integration.payload_servers import (
    SIGNATURE,
    FaultServer,
    entry,
    free_port,
    make_lock,
)
from tests.policy import unavailable
from tests.registry_servers import RegistryProc

pytestmark = pytest.mark.integration
DATA = os.urandom(3 * (1 << 20) + 321)
SECRET = "mirror-token-do-not-log"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FaultServer, FaultServer]]:
    """(upstream, mirror), both serving DATA as model.bin in every mode."""
    upstream, mirror = FaultServer("127.0.0.1"), FaultServer("127.0.0.1")
    upstream.files["model.bin"] = mirror.files["model.bin"] = DATA
    yield upstream, mirror
    upstream.shutdown()
    mirror.shutdown()


def command(tmp: Path, endpoint: str, *args: str, **env: str) -> dict[str, Any]:
    """The arguments of a subprocess running ``lockpipe payloads ARGS`` of one file payload
    (DATA) into ``tmp/store``, with HF_ENDPOINT ``endpoint`` and ``env`` as the only
    HF_HUB_OFFLINE."""
    lock = tmp / "locks" / "digests.json"
    if not lock.exists():
        make_lock(tmp, {"m": entry(DATA)})
    run_env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    cmd = [sys.executable, "-m", "lockpipe", "payloads", "--lock", str(lock), "--store",
           str(tmp / "store"), "--connections", "4", *args]  # fmt: skip
    return {"args": cmd, "env": {**run_env, "HF_ENDPOINT": endpoint, "HOME": str(tmp), **env},
            "cwd": ROOT, "text": True}  # fmt: skip


def payloads(tmp: Path, endpoint: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``lockpipe payloads ARGS``, run to its end (see :func:`command`)."""
    return subprocess.run(**command(tmp, endpoint, *args, **env), capture_output=True,
                          timeout=120, check=False)  # fmt: skip


def leftovers(tmp: Path) -> list[Path]:
    """Everything under the store's blob folders: partial files and journals included."""
    return sorted((tmp / "store").glob("models--*/blobs/*"))


@pytest.mark.parametrize("output", ["jsonl", "rich"])
@pytest.mark.parametrize(
    ("mirror_mode", "upstream_mode", "code"),
    [
        ("ok", "missing", 0),  # the mirror serves: its credential is used, and not shown
        ("flip", "missing", 8),  # a wrong byte from the mirror: its URL is in the error
        ("missing", "missing", 8),  # 404 from both
        ("refused", "missing", 8),  # nothing listens where the mirror should be
    ],
)
def test_mirror_credentials_reach_the_mirror_and_no_output(
    servers: tuple[FaultServer, FaultServer], tmp_path: Path, mirror_mode: str,
    upstream_mode: str, code: int, output: str,
) -> None:  # fmt: skip
    upstream, mirror = servers
    where = f"127.0.0.1:{free_port()}" if mirror_mode == "refused" else mirror.url[7:]
    before = len(mirror.auth_seen)
    args = ["--jsonl"] if output == "jsonl" else []
    done = payloads(tmp_path, f"{upstream.url}/{upstream_mode}", *args,
                    "--mirror", f"http://lockpipe:{SECRET}@{where}/{mirror_mode}")  # fmt: skip
    assert done.returncode == code, done.stderr
    for text in (done.stdout, done.stderr):
        assert SECRET not in text and "Traceback" not in text
    if code:
        assert "http://***@" not in done.stderr  # the URLs are shown bare, not even masked
        assert f"mirror http://{where}/{mirror_mode}/127.0.0.1:" in done.stderr
    if output == "jsonl":  # stdout is JSON lines only; the result line goes to stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        assert events[-1]["event"] == "summary"
    if code == 0:
        said = done.stderr if output == "jsonl" else done.stdout
        assert f"m: downloaded, {len(DATA):,} bytes fetched:" in said
    if mirror_mode != "refused":
        basic = "Basic " + base64.b64encode(f"lockpipe:{SECRET}".encode()).decode()
        assert mirror.auth_seen[before:] and set(mirror.auth_seen[before:]) == {basic}


def test_a_signed_redirect_url_is_shown_without_its_signature(tmp_path: Path) -> None:
    cdn = FaultServer("127.0.0.2")
    hub = FaultServer("127.0.0.1", cdn=cdn.url)
    hub.files["model.bin"] = cdn.files["model.bin"] = DATA
    try:
        done = payloads(tmp_path, f"{hub.url}/signed")
    finally:
        hub.shutdown()
        cdn.shutdown()
    assert done.returncode == FetchError.return_code, done.stderr
    assert f"redirected to {cdn.url}/gated/" in done.stderr  # where it went is still said
    assert "X-Amz-Signature=***" in done.stderr and "X-Amz-Credential=***" in done.stderr
    assert SIGNATURE not in done.stdout + done.stderr and "AKIAFAKE" not in done.stderr
    assert "X-Amz-Expires=3600" in done.stderr  # what is not a secret stays readable


def test_the_build_source_fetch_shows_no_mirror_credentials(
    servers: tuple[FaultServer, FaultServer], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    import hashlib

    from lockpipe.cli.main import main
    from lockpipe.engines import get_engine
    from lockpipe.errors import EngineMissing
    from tests.lockfactory import doc, make_repo
    from tests.policy import unavailable

    try:
        get_engine("buildah")
    except EngineMissing as exc:
        unavailable(f"buildah is not usable: {exc}")
    upstream, mirror = servers
    document = doc()
    document["sources"] = {"src": {
        "repository": "https://example.org/src", "commit": "c" * 40,
        "url": f"{upstream.url}/missing/src/archive/model.bin",
        "sha256": hashlib.sha256(DATA).hexdigest(), "root": "src",
        "origin": {"source": "by hand", "seen": "2026-01-01"}}}  # fmt: skip
    document["targets"]["app"]["source"] = "src"
    lock = make_repo(tmp_path, document)
    before = len(mirror.auth_seen)
    code = main(["build", "app", "--engine", "buildah", "--lock", str(lock), "--state",
                 str(tmp_path / "state"), "--cache", str(tmp_path / "cache"),
                 "--mirror", f"http://lockpipe:{SECRET}@{mirror.url[7:]}/flip"])  # fmt: skip
    out = capsys.readouterr()
    assert code == FetchError.return_code, out.err
    assert SECRET not in out.out + out.err and "Traceback" not in out.err
    assert f"(mirror http://***@{mirror.url[7:]}/flip first)" in out.err
    assert mirror.auth_seen[before:]  # the mirror was asked, with its credential


def test_an_unresolvable_hub_fails_in_seconds_names_it_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    done = payloads(tmp_path, "http://hub.invalid")
    elapsed = time.monotonic() - started
    assert done.returncode == FetchError.return_code, done.stderr
    err = done.stderr
    assert "the host name hub.invalid does not resolve" in err and "no connection to" in err
    assert "--mirror" in err and "--connections" not in err and "try again later" not in err
    assert "Traceback" not in err
    assert leftovers(tmp_path) == []  # no partial file, no journal: no byte ever came
    assert elapsed < 25, f"{elapsed:.1f} s"


class Silent:
    """A server that accepts connections and reads requests, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.asked = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            conn.recv(65536)
            self.asked.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        for conn in [*self.conns, self.sock]:
            conn.close()


def test_ctrl_c_before_the_first_byte_leaves_nothing(tmp_path: Path) -> None:
    silent = Silent()
    run = command(tmp_path, silent.url, "--jsonl")
    proc = subprocess.Popen(**run, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert silent.asked.wait(30), "the download never asked"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        silent.close()
    assert proc.returncode == INTERRUPTED, err
    assert leftovers(tmp_path) == []


def _events(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_hf_hub_offline_makes_no_request(
    servers: tuple[FaultServer, FaultServer], tmp_path: Path
) -> None:
    upstream, _ = servers
    before = upstream.per_file[("ok", "model.bin")]
    offline = payloads(tmp_path, f"{upstream.url}/ok", "--jsonl", HF_HUB_OFFLINE="1")
    assert offline.returncode == FetchError.return_code, offline.stderr
    err = offline.stderr
    assert "payloads.m: not in the store" in err and "model.bin" in err
    assert "HF_HUB_OFFLINE is set" in err and "Traceback" not in err
    assert [e["event"] for e in _events(offline)] == ["error", "summary"]
    assert upstream.per_file[("ok", "model.bin")] == before and leftovers(tmp_path) == []

    online = payloads(tmp_path, f"{upstream.url}/ok")  # fills the store
    assert online.returncode == 0, online.stderr
    fetched = upstream.per_file[("ok", "model.bin")]
    again = payloads(tmp_path, f"{upstream.url}/ok", "--jsonl", HF_HUB_OFFLINE="1")
    assert again.returncode == 0, again.stderr
    assert [e["status"] for e in _events(again) if e["event"] == "done"] == ["cached"]
    assert upstream.per_file[("ok", "model.bin")] == fetched


def test_a_published_payload_records_no_hf_endpoint_login(
    servers: tuple[FaultServer, FaultServer], tmp_path: Path
) -> None:
    """``HF_ENDPOINT=http://alice:SECRET@hub`` fetches with Basic auth; what goes into the
    registry (the manifest's source annotation, the config's sourceURL, the provenance
    statement's uris) names the hub without its user and password."""
    if shutil.which("docker-registry") is None:
        unavailable("docker-registry is not installed (apt-get install docker-registry)")
    upstream, _ = servers
    hub = f"{upstream.url[7:]}/ok"
    endpoint = f"http://alice:{SECRET}@{hub}"
    lock = make_lock(tmp_path, {"m": entry(DATA)})
    assert payloads(tmp_path, endpoint).returncode == 0
    registry = RegistryProc(tmp_path / "registry")
    try:
        options = PublishOptions(
            store=tmp_path / "store", prefix=f"{registry.host}/leak", env={"HF_ENDPOINT": endpoint}
        )
        out = publish_payloads(lock, [], options)
    finally:
        registry.stop()
    assert out and out[0].provenance
    stored = [p.read_bytes() for p in (tmp_path / "registry" / "data").rglob("data")
              if p.stat().st_size < 1 << 20]  # fmt: skip
    recorded = b"\n".join(stored)
    assert SECRET.encode() not in recorded and b"alice" not in recorded
    assert recorded.count(f'"http://{hub}/org/model"'.encode()) >= 2  # annotation, config
    assert f'"http://{hub}/org/model/resolve/'.encode() in recorded  # the statement's uri


@pytest.mark.parametrize("given", ["option", "env"])
def test_a_mirror_without_a_scheme_is_refused_without_its_password(
    tmp_path: Path, given: str
) -> None:
    """requests has no adapter for ``alice:pw@host``: its error quoted the URL, password and
    all. Such a --mirror (or LOCKPIPE_MIRROR) is a usage error naming the fix, before any
    request."""
    value = "alice:s3cretpw@127.0.0.1:8080"
    args, env = (["--mirror", value], {}) if given == "option" else ([], {"LOCKPIPE_MIRROR": value})
    done = payloads(tmp_path, "http://127.0.0.1:9", *args, **env)
    assert done.returncode == UsageError.return_code, done.stderr
    assert "s3cretpw" not in done.stdout + done.stderr
    assert "--mirror" in done.stderr and "***@127.0.0.1:8080" in done.stderr
    assert "give http://HOST, https://HOST or oci://REGISTRY/PREFIX" in done.stderr
    assert leftovers(tmp_path) == []
