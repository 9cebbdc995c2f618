"""``lockpipe payloads --mirror oci://…`` against a registry whose manifest has another shape.

A git-pinned file is found by its path in the artifact's manifest (``rev-<commit>``). A
FAKE registry (a real HTTP server on 127.0.0.1) answers that manifest with a wrong
shape; the run must say what is wrong with it, naming the manifest, and fetch the file
from the FAKE Hub, rather than take a broken manifest for one that lacks the file
(issue 18 review). ``lockpipe deploy --artifacts`` reads the same manifest: a broken one
exits 18 naming it, one whose layer has no file path lacks the file (exit 19, publish
again); neither writes a unit.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lockpipe.errors import DeployError, RegistryError
from lockpipe.registry import modelpack as mp
from tests.httpfake import FakeHandler, FakeServer
from tests.integration.fake_hub import FakeHub, entry_from_tree
from tests.integration.payload_servers import REV, make_lock
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
CONFIG = b'{"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4"}\n'
HEADER = b'{"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}'
WEIGHTS = struct.pack("<Q", len(HEADER)) + HEADER + b"\0" * 4  # one tensor, safetensors


class _Registry(FakeServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.manifest = b"{}"
        self.blobs: dict[str, bytes] = {}  # digest -> bytes
        self.seen: list[str] = []


class _Handler(FakeHandler):
    server: _Registry

    def do_GET(self) -> None:
        self.server.seen.append(f"{self.command} {self.path}")
        if self.path == "/v2/":
            self.send_bytes(200, b"{}", {"Content-Type": "application/json"})
        elif self.path.endswith(f"/manifests/rev-{REV}"):
            self.send_bytes(200, self.server.manifest, {"Content-Type": mp.OCI_MANIFEST})
        elif "/blobs/" in self.path and self.path.rsplit("/", 1)[1] in self.server.blobs:
            self.send_bytes(200, self.server.blobs[self.path.rsplit("/", 1)[1]])
        else:
            self.send_bytes(404, b"")

    do_HEAD = do_GET


@pytest.fixture
def servers() -> Iterator[tuple[_Registry, FakeHub]]:
    registry, hub = _Registry(), FakeHub()
    yield registry, hub
    registry.stop()
    hub.stop()


def _layer(**over: Any) -> dict[str, Any]:
    layer = {"mediaType": mp.WEIGHT_CONFIG_RAW, "digest": "sha256:" + "ab" * 32, "size": 19,
             "annotations": {mp.FILEPATH: "config.json"}}  # fmt: skip
    return {**layer, **over}


def _snap_payloads(tmp_path: Path, hub: FakeHub, registry: str) -> subprocess.CompletedProcess[str]:
    """``lockpipe payloads --mirror oci://REGISTRY/models`` of a lock whose payload ``snap``
    (on the FAKE Hub) is config.json (pinned by its git id) and model.safetensors (sha256)."""
    folder = tmp_path / "hub"
    folder.mkdir()
    (folder / "config.json").write_bytes(CONFIG)
    (folder / "model.safetensors").write_bytes(WEIGHTS)
    hub.add("org/snap", folder, REV)
    tree = requests.get(f"{hub.url}/api/models/org/snap/tree/{REV}", timeout=10).json()
    snap = entry_from_tree(tree, "org/snap", REV, role="mtp-assistant")  # config and weights
    lock = make_lock(tmp_path, {"snap": snap})
    assert lock.payloads["snap"].files[0].git_sha1  # config.json: found by its path
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "payloads", "--lock", str(lock.path), "--store",
         str(tmp_path / "store"), "--mirror", f"oci://{registry}/models"],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": hub.url},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ([], "the manifest is a list, not an object"),
        ({"schemaVersion": 2}, "the manifest has no layers"),
        ({"layers": "config.json"}, "layers is a string, not a list"),
        ({"layers": ["config.json"]}, "layers[0] is a string, not an object"),
        ({"layers": [_layer(annotations=["config.json"])]},
         "layers[0].annotations is a list, not an object"),
        ({"layers": [_layer(size=True)]}, "layers[0].size is true/false, not an integer"),
        ({"layers": [_layer(digest="sha256:../../../v2/x/blobs/y")]},
         "layers[0] (config.json) has the digest 'sha256:../../../v2/x/blobs/y'"),
    ],
)  # fmt: skip
def test_a_manifest_of_another_shape_is_named_and_the_hub_serves_the_file(
    servers: tuple[_Registry, FakeHub], tmp_path: Path, manifest: Any, words: str
) -> None:
    registry, hub = servers
    registry.manifest = json.dumps(manifest).encode()
    done = _snap_payloads(tmp_path, hub, registry.host)
    assert done.returncode == 0, done.stderr
    where = f"{registry.host}/models/snap:rev-{REV}: "
    notes = [x for x in done.stderr.splitlines() if where in x]
    assert notes and words in notes[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not [s for s in registry.seen if "abab" in s or ".." in s]  # none of it was asked
    assert any(p.endswith("/resolve/" + REV + "/config.json") for p in hub.requests)


# --- deploy --artifacts: the same manifests, read where a unit would mount them -------------

SHA = "ab" * 32


def _deploy_lock(tmp: Path, *, cpu: bool = False) -> Path:
    """A lock whose target ``app`` serves the one-file payload ``gemma`` (rev ``REV``);
    ``cpu``: built with GGML_CUDA=OFF, so its unit asks for no GPU."""
    document = doc()
    document["payloads"] = {"gemma": {
        "repository": "google/gemma-3-270m", "revision": REV, "role": "model",
        "format": "gguf", "filename": "g.gguf", "size": 10, "sha256": SHA,
    }}  # fmt: skip
    app = document["targets"]["app"]
    app["payloads"] = ["gemma"]
    app["serve"]["command"] = ["llama-server", "-m", "{payload:gemma}"]
    if cpu:
        app["build_args"]["GGML_CUDA"] = "OFF"
    return make_repo(tmp / "checkout", document)


def _deploy_artifacts(
    registry: _Registry, lock: Path, state: Path, home: Path, *more: str
) -> subprocess.CompletedProcess[str]:
    """``lockpipe deploy app --artifacts REGISTRY/models`` for podman 5.7, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "deploy", "app", "--lock", str(lock), "--state",
         str(state), "--image", f"127.0.0.1:5000/lockpipe-test/app@sha256:{'cd' * 32}",
         "--force", "--no-inspect", "--no-verify", "--podman-version", "5.7",
         "--artifacts", f"{registry.host}/models", *more],
        capture_output=True, text=True, timeout=120, cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(REPO)},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("manifest", "code", "words"),
    [
        (b"<html>the registry's login page</html>", RegistryError.return_code,
         "the manifest is not a JSON object; the registry is broken"),
        (b"[]", RegistryError.return_code, "the manifest is not a JSON object"),
        (b'{"layers": {"g.gguf": 1}}', RegistryError.return_code,
         "layers is an object, not a list"),
        (json.dumps({"layers": [{"mediaType": mp.WEIGHT_RAW, "digest": "sha256:" + SHA,
                                 "size": 10}]}).encode(),
         DeployError.return_code, "payloads.gemma: "),  # no filepath: not taken for g.gguf
    ],
    ids=["not-json", "a-list", "layers-an-object", "no-filepath"],
)  # fmt: skip
def test_deploy_artifacts_names_a_malformed_manifest_and_writes_no_unit(
    servers: tuple[_Registry, FakeHub], tmp_path: Path, manifest: bytes, code: int, words: str
) -> None:
    registry, _ = servers
    registry.manifest = manifest
    lock, state = _deploy_lock(tmp_path), tmp_path / "state"
    done = _deploy_artifacts(registry, lock, state, tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, done.stderr
    assert words in done.stderr
    if code == RegistryError.return_code:
        assert f"{registry.host}/models/gemma:rev-{REV}: {words}" in done.stderr
    else:
        assert "publish them again: lockpipe payloads publish --to" in done.stderr
    assert any(f"/manifests/rev-{REV}" in s for s in registry.seen)
    assert not (state / "deploy").exists()  # neither the .container nor an .artifact unit


def test_deploy_artifacts_installs_a_unit_that_mounts_them_without_a_local_store(
    servers: tuple[_Registry, FakeHub], tmp_path: Path
) -> None:
    """The unit mounts the artifacts, not the store; --install refused it all the same:
    "the unit mounts the payload store …/store, but its payloads gemma are not there …
    fetch them", for files it would never read."""
    registry, _ = servers
    layer = _layer(mediaType=mp.WEIGHT_RAW, digest="sha256:" + SHA, size=10,
                   annotations={mp.FILEPATH: "g.gguf"})  # fmt: skip
    registry.manifest = json.dumps({"layers": [layer]}).encode()
    lock, state, units = _deploy_lock(tmp_path, cpu=True), tmp_path / "state", tmp_path / "units"
    units.mkdir()
    done = _deploy_artifacts(registry, lock, state, tmp_path, "--store",
                             str(tmp_path / "no-store"), "--install", str(units))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "fetch them" not in done.stderr and "not in" not in done.stderr, done.stderr
    assert sorted(p.name for p in units.iterdir()) == ["app-gemma.artifact", "app.container"]
    unit = (units / "app.container").read_text()
    assert "type=artifact,source=app-gemma.artifact" in unit and ":/store" not in unit, unit


def test_deploy_artifacts_refused_at_install_leaves_no_artifact_unit_behind(
    servers: tuple[_Registry, FakeHub], tmp_path: Path
) -> None:
    """A GPU unit on a host without a CDI spec: --install refuses it. The .artifact units
    were written into the install folder before that check, and stayed there without the
    .container that mounts them."""
    registry, _ = servers
    layer = _layer(mediaType=mp.WEIGHT_RAW, digest="sha256:" + SHA, size=10,
                   annotations={mp.FILEPATH: "g.gguf"})  # fmt: skip
    registry.manifest = json.dumps({"layers": [layer]}).encode()
    lock, state, units = _deploy_lock(tmp_path), tmp_path / "state", tmp_path / "units"
    units.mkdir()
    done = _deploy_artifacts(registry, lock, state, tmp_path, "--install", str(units))
    assert done.returncode == DeployError.return_code, done.stderr
    assert "no CDI spec of kind nvidia.com/gpu" in done.stderr, done.stderr
    assert list(units.iterdir()) == []


# --- a token server that refuses mid-run: that candidate fails, the Hub serves the file ----


class _TokenRegistry(FakeServer):
    """Blobs behind a Bearer token whose server grants short-lived tokens until the blob has
    been found (HEAD), then says 401: a download that renews its token is refused."""

    def __init__(self, blob: bytes) -> None:
        super().__init__(_TokenHandler)
        self.blob, self.tokens, self.refusing = blob, 0, False
        self.seen: list[str] = []


class _TokenHandler(FakeHandler):
    server: _TokenRegistry

    def do_GET(self) -> None:
        reg = self.server
        reg.seen.append(f"{self.command} {self.path}")
        if self.path.startswith("/token"):
            reg.tokens += 1
            if reg.refusing:
                self.send_bytes(401, b"")
            else:  # kept 15 s: renewed before a ranged request (RENEW is 15 s)
                self.send_bytes(200, b'{"token": "tok", "expires_in": 20}')
        elif self.headers.get("Authorization") != "Bearer tok":
            realm = f'Bearer realm="http://{reg.host}/token",service="fake"'
            self.send_bytes(401, b"", {"WWW-Authenticate": realm})
        elif self.path == "/v2/":
            self.send_bytes(200, b"{}", {"Content-Type": "application/json"})
        elif self.path.endswith("/blobs/sha256:" + hashlib.sha256(reg.blob).hexdigest()):
            reg.refusing = True
            self.send_bytes(200, reg.blob)  # a HEAD: its Content-Length, no body
        else:
            self.send_bytes(404, b"")

    do_HEAD = do_GET


def test_a_token_server_refusing_mid_download_hands_the_file_to_the_hub(tmp_path: Path) -> None:
    registry, hub = _TokenRegistry(WEIGHTS), FakeHub()
    try:
        done = _snap_payloads(tmp_path, hub, registry.host)
    finally:
        registry.stop()
        hub.stop()
    assert "Traceback" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert registry.refusing  # the registry had the blob, then refused the token's renewal ...
    assert any(p.endswith(f"/resolve/{REV}/model.safetensors") for p in hub.requests)  # ... so
    stored = list((tmp_path / "store").rglob("model.safetensors"))
    assert stored and stored[0].read_bytes() == WEIGHTS, done.stderr


def test_deploy_artifacts_checks_a_git_pinned_file_by_its_bytes(
    servers: tuple[_Registry, FakeHub], tmp_path: Path
) -> None:
    """config.json is pinned by its git blob id; the artifact's layer of the same size held
    other bytes, and deploy --artifacts wrote the unit (only the size was compared)."""
    registry, _ = servers
    good, bad = CONFIG, CONFIG.replace(b"gemma4", b"llama4")
    git_id = hashlib.sha1(b"blob %d\0" % len(good) + good, usedforsecurity=False).hexdigest()
    digest = "sha256:" + hashlib.sha256(bad).hexdigest()
    registry.blobs[digest] = bad
    registry.manifest = json.dumps({"layers": [_layer(digest=digest, size=len(bad))]}).encode()
    document = doc()
    document["payloads"] = {"snap": {
        "repository": "org/snap", "revision": REV, "role": "mtp-assistant",
        "format": "safetensors", "files": {"config.json": {"size": len(good), "git_sha1": git_id}},
    }}  # fmt: skip
    app = document["targets"]["app"]
    app["payloads"] = ["snap"]
    app["serve"]["command"] = ["llama-server", "-m", "{payload-dir:snap}"]
    lock, state = make_repo(tmp_path / "checkout", document), tmp_path / "state"
    done = _deploy_artifacts(registry, lock, state, tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == DeployError.return_code, done.stderr
    assert "payloads.snap: config.json: git blob " in done.stderr, done.stderr
    assert f"the lock pins {git_id}" in done.stderr
    assert any(f"/blobs/{digest}" in x for x in registry.seen)
    assert not (state / "deploy").exists()
