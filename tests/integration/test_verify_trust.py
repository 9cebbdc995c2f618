"""What ``verify`` and ``smoke --image`` trust from a registry: bytes, shapes, statements.

Each test publishes a real buildah build to a registry of its own (distribution 2.8 in
a tmp folder, so its storage can be tampered with on disk without touching the shared
loopback registry), then breaks one thing a registry could serve: a manifest's bytes, a
config that is not an object, an index where an image manifest belongs, a malformed or
stale provenance statement among good ones. Each must end in the README's exit code and
a one-line reason naming the source, never a traceback.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.engines import get_engine
from lockpipe.errors import CheckFailed, EngineMissing, IntegrityError, RegistryError
from lockpipe.imagebuild.provenance import MEDIA_TYPE
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import load_lock
from lockpipe.publish import push
from lockpipe.publish.outputs import images_path, read_images
from lockpipe.publish.referrer import attach_provenance, find_provenance
from lockpipe.registry.client import registry_for
from lockpipe.registry.push import get_manifest, put_manifest, referrers, upload_blob
from tests.httpfake import FakeHandler, FakeServer
from tests.lockfactory import doc, make_repo
from tests.policy import scratch, unavailable
from tests.registry_servers import RegistryProc

pytestmark = [pytest.mark.integration, pytest.mark.buildah]
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


@dataclass(frozen=True)
class Built:
    lock: Path
    state: Path

    def cli(self, verb: str, *args: str) -> int:
        return main([verb, "--lock", str(self.lock), "--state", str(self.state), *args])


@dataclass(frozen=True)
class Private:
    """A registry of this test's own: its host, and its storage on disk."""

    host: str
    data: Path

    def blob_file(self, digest: str) -> Path:
        hexa = digest.removeprefix("sha256:")
        return self.data / "docker/registry/v2/blobs/sha256" / hexa[:2] / hexa / "data"


@pytest.fixture(scope="module")
def built(
    busybox_base: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Built]:
    """``app`` built with buildah (CPU only: smoke --image needs no GPU for it)."""
    try:
        engine = get_engine("buildah")
    except EngineMissing as exc:
        unavailable(f"buildah is not usable: {exc}")
    with scratch(tmp_path_factory, "trust") as root:
        document = doc()
        document["bases"]["busybox"] = {"ref": busybox_base[0], "digest": busybox_base[1]}
        document["targets"]["app"]["tag"] = "localhost/lockpipe-test/trust:1"
        document["targets"]["app"]["build_args"]["GGML_CUDA"] = "OFF"
        lock = make_repo(root, document)
        state = root / "state"
        build_target(load_lock(lock), "app", engine, Settings(state=state, cache=root / "cache"))
        yield Built(lock, state)


@pytest.fixture
def private(tmp_path: Path) -> Iterator[Private]:
    if shutil.which("docker-registry") is None:
        unavailable("docker-registry is not installed")
    proc = RegistryProc(tmp_path / "registry")
    yield Private(proc.host, tmp_path / "registry" / "data")
    proc.stop()


def _publish(built: Built, private: Private) -> str:
    """Publish ``app`` to ``private``; the pinned reference it got."""
    images_path(built.lock).unlink(missing_ok=True)  # each test's registry is a new one
    assert built.cli("publish", "app", "--engine", "buildah", "--to", f"{private.host}/t") == 0
    return read_images(images_path(built.lock))["app"].pinned


def _flip_a_digit(path: Path) -> None:
    """Change one hex digit in the file: same size, still JSON, other bytes."""
    data = path.read_bytes()
    at = data.index(b'"sha256:') + 8
    path.write_bytes(data[:at] + (b"0" if data[at : at + 1] != b"0" else b"1") + data[at + 1 :])


def _smoke_image(built: Built, pinned: str, tmp_path: Path) -> int:
    return built.cli("smoke", "app", "--image", pinned, "--engine", "buildah",
                     "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"),
                     "--quiet")  # fmt: skip


# --- bytes that do not match the digest asked for: IntegrityError, exit 9 --------------------


def test_a_tampered_manifest_exits_9_in_verify_and_smoke(
    built: Built, private: Private, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pinned = _publish(built, private)
    assert built.cli("verify", "app", "--image", pinned) == 0
    _flip_a_digit(private.blob_file(pinned.rpartition("@")[2]))
    capsys.readouterr()
    assert built.cli("verify", "app", "--image", pinned) == IntegrityError.return_code == 9
    err = capsys.readouterr().err
    assert f"{pinned}: the bytes do not match their digest" in err and "Traceback" not in err
    assert _smoke_image(built, pinned, tmp_path) == IntegrityError.return_code
    assert "do not match" in capsys.readouterr().err


def test_a_tampered_config_exits_9_in_smoke(
    built: Built, private: Private, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pinned = _publish(built, private)
    reg, ep = registry_for(pinned)
    manifest = json.loads(get_manifest(reg, ep.repository, pinned.rpartition("@")[2])[0])
    config = manifest["config"]["digest"]
    _flip_a_digit(private.blob_file(config))  # a diff_id in its rootfs
    capsys.readouterr()
    assert _smoke_image(built, pinned, tmp_path) == IntegrityError.return_code
    err = capsys.readouterr().err
    assert f"{pinned} config" in err and config in err


# --- documents of the wrong shape: one line naming the source --------------------------------


def _image(private: Private, config: bytes) -> str:
    """An image manifest (no layers) whose config blob is ``config``; REF@digest."""
    ref = f"{private.host}/t/odd"
    reg, ep = registry_for(ref)
    digest = "sha256:" + hashlib.sha256(config).hexdigest()
    upload_blob(reg, ep.repository, config, digest)
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": [],
                       "config": {"mediaType": OCI_CONFIG, "digest": digest,
                                  "size": len(config)}}).encode()  # fmt: skip
    return f"{ref}@{put_manifest(reg, ep.repository, '1', body, OCI_MANIFEST)}"


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (b"[]", "the config is a list, not an object"),
        (b'"x"', "the config is a string, not an object"),
        (b"not json", "the config is not JSON"),
        (b'{"config": []}', "config is a list, not an object"),
        (b'{"config": {"Env": "PATH=/bin"}}', "config.Env is a string, not a list"),
        (b'{"config": {"Env": ["PATH=/bin", 7]}}', "config.Env[1] is an integer, not a string"),
    ],
)
def test_a_config_of_the_wrong_shape_is_one_line_in_smoke(
    config: bytes, reason: str, built: Built, private: Private, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    pinned = _image(private, config)
    assert _smoke_image(built, pinned, tmp_path) == RegistryError.return_code
    err = capsys.readouterr().err
    digest = "sha256:" + hashlib.sha256(config).hexdigest()
    assert f"{pinned} config {digest}: {reason}" in err, err
    assert "Traceback" not in err


def test_verify_given_an_index_says_it_is_not_an_image_manifest(
    built: Built, private: Private, capsys: pytest.CaptureFixture[str]
) -> None:
    pinned = _publish(built, private)
    repo, _, digest = pinned.rpartition("@")
    reg, ep = registry_for(pinned)
    body, media_type = get_manifest(reg, ep.repository, digest)
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": media_type, "digest": digest, "size": len(body),
         "platform": {"os": "linux", "architecture": "amd64"}}]}).encode()  # fmt: skip
    pinned_index = f"{repo}@{put_manifest(reg, ep.repository, 'index', index, OCI_INDEX)}"
    ((_, statement),) = find_provenance(pinned).statements
    statement["subject"][0]["digest"]["sha256"] = pinned_index.rpartition(":")[2]
    attach_provenance(pinned_index, statement)
    capsys.readouterr()
    assert built.cli("verify", "app", "--image", pinned_index) == RegistryError.return_code
    err = capsys.readouterr().err
    assert f"{pinned_index}: the manifest has no config" in err and "an index?" in err, err


class OddReferrers(FakeServer):
    """FAKE registry of one image manifest whose referrers index lists ``manifests``
    as a number: the shape no registry should serve."""

    def __init__(self) -> None:
        config = {"mediaType": OCI_CONFIG, "digest": "sha256:" + "c" * 64, "size": 2}
        self.manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                    "config": config, "layers": []}).encode()  # fmt: skip
        self.digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()
        super().__init__(_OddHandler)


class _OddHandler(FakeHandler):
    server: OddReferrers

    def do_GET(self) -> None:
        if self.path == f"/v2/t/app/manifests/{self.server.digest}":
            headers = {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": self.server.digest}
            self.send_bytes(200, self.server.manifest, headers)
        elif self.path.startswith(f"/v2/t/app/referrers/{self.server.digest}"):
            self.send_json(200, {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": 5})
        else:
            self.send_json(404, {"errors": [{"code": "NOT_FOUND"}]})

    do_HEAD = do_GET


def test_a_referrers_index_of_the_wrong_shape_is_one_line(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = OddReferrers()
    _, err = _verify_refused(built, capsys, registry)
    where = f"{registry.host}/t/app referrers/{registry.digest}"
    assert f"{where}: manifests is an integer, not a list" in err, err
    assert "Traceback" not in err


# --- every lockpipe statement is considered, newest first ------------------------------------


def _attaching(change: Callable[[dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], str]:
    """attach_provenance, attaching the statement after ``change``."""

    def attach(pinned: str, statement: dict[str, Any]) -> str:
        statement = copy.deepcopy(statement)
        change(statement)
        return attach_provenance(pinned, statement)

    return attach


def _drop_dependencies(statement: dict[str, Any]) -> None:
    del statement["predicate"]["buildDefinition"]["resolvedDependencies"]


def _stale_fingerprint(statement: dict[str, Any]) -> None:
    statement["predicate"]["buildDefinition"]["internalParameters"]["fingerprint"] = "0" * 64


def test_a_malformed_old_statement_is_a_warning_once_a_good_one_is_attached(
    built: Built, private: Private, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """An older lockpipe wrote a statement without resolvedDependencies (its byproducts,
    the image ID, are right): publish --force must attach a good one beside it, and
    verify must pass over the bad one, saying so, and use the good one."""
    monkeypatch.setattr(push, "attach_provenance", _attaching(_drop_dependencies))
    pinned = _publish(built, private)
    monkeypatch.undo()
    (malformed,) = _referrers(pinned)
    capsys.readouterr()
    assert built.cli("verify", "app", "--image", pinned) == CheckFailed.return_code
    err = capsys.readouterr().err
    assert "resolvedDependencies" in err and "--force" in err
    args = ("publish", "app", "--engine", "buildah", "--to", f"{private.host}/t", "--force")
    assert built.cli(*args) == 0
    good = [d for d in _referrers(pinned) if d != malformed]
    assert len(good) == 1, "publish --force attached no good statement beside the bad one"
    capsys.readouterr()
    assert built.cli("verify", "app", "--image", pinned) == 0
    out, err = capsys.readouterr()
    assert f"matches its provenance ({good[0][:19]})" in out  # the verdict, on stdout
    assert f"warning: {pinned}: provenance referrer {malformed}" in err
    assert "resolvedDependencies" in err and "Traceback" not in err


def test_the_newest_statement_that_matches_is_used(
    built: Built, private: Private, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """The first statement (attached first, listed first) names a fingerprint the lock no
    longer has; a newer one matches: verify uses the newer, and names it."""
    monkeypatch.setattr(push, "attach_provenance", _attaching(_stale_fingerprint))
    pinned = _publish(built, private)
    monkeypatch.undo()
    ((stale, statement),) = find_provenance(pinned).statements
    fresh = copy.deepcopy(statement)
    fresh["predicate"]["buildDefinition"]["internalParameters"]["fingerprint"] = load_lock(
        built.lock
    ).fingerprints["app"]
    fresh["predicate"]["runDetails"]["metadata"]["finishedOn"] = "2999-01-01T00:00:00Z"
    newer = attach_provenance(pinned, fresh)
    capsys.readouterr()
    assert built.cli("verify", "app", "--image", pinned) == 0
    assert f"matches its provenance ({newer[:19]})" in capsys.readouterr().out
    # Listed first now, the stale one is still not used: the newest that matches is.
    older = copy.deepcopy(statement)
    older["predicate"]["runDetails"]["metadata"]["finishedOn"] = "1999-01-01T00:00:00Z"
    attach_provenance(pinned, older)  # stale and oldest: never chosen over ``newer``
    assert built.cli("verify", "app", "--image", pinned) == 0
    assert f"({newer[:19]})" in capsys.readouterr().out
    assert stale != newer


def _referrers(pinned: str) -> list[str]:
    """The digest of every in-toto referrer of ``pinned``, as the registry lists them."""
    reg, ep = registry_for(pinned)
    found = referrers(reg, ep.repository, pinned.rpartition("@")[2], artifact_type=MEDIA_TYPE)
    return [str(d["digest"]) for d in found]


# --- a referrer whose statement cannot be read is passed over, not fatal ---------------------


def test_a_referrer_whose_statement_blob_is_gone_is_passed_over(
    built: Built, private: Private, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another in-toto referrer beside lockpipe's (a signer's), whose statement blob the
    registry no longer has: verify uses lockpipe's statement, as it does for any other
    referrer it sets aside, instead of failing on the other one's 404 at every run."""
    pinned = _publish(built, private)
    ((_, statement),) = find_provenance(pinned).statements
    other = copy.deepcopy(statement)
    other["predicate"]["buildDefinition"]["buildType"] = "https://example.com/a-signer/v1"
    theirs = attach_provenance(pinned, other)
    reg, ep = registry_for(pinned)
    layer = json.loads(get_manifest(reg, ep.repository, theirs)[0])["layers"][0]["digest"]
    reg.request("DELETE", ep.repository, f"blobs/{layer}", ok=(202,))
    capsys.readouterr()
    assert built.cli("verify", "app", "--image", pinned) == 0, capsys.readouterr().err
    assert "Traceback" not in capsys.readouterr().err


class StatementReferrer(FakeServer):
    """FAKE registry of one image manifest and one in-toto referrer of it, whose statement
    layer is ``layer``: a descriptor no registry that checks what it stores would keep.
    ``seen``: every path asked."""

    def __init__(self, layer: dict[str, Any], listed: str | None = None) -> None:
        config = {"mediaType": OCI_CONFIG, "digest": "sha256:" + "c" * 64, "size": 2}
        self.manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                    "config": config, "layers": []}).encode()  # fmt: skip
        self.digest = "sha256:" + hashlib.sha256(self.manifest).hexdigest()
        subject = {"mediaType": OCI_MANIFEST, "digest": self.digest, "size": len(self.manifest)}
        self.referrer = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                    "artifactType": MEDIA_TYPE, "config": config,
                                    "layers": [layer], "subject": subject}).encode()  # fmt: skip
        self.referrer_digest = "sha256:" + hashlib.sha256(self.referrer).hexdigest()
        self.listed = listed or self.referrer_digest  # the digest the referrers index names
        self.seen: list[str] = []
        super().__init__(_StatementHandler)


class _StatementHandler(FakeHandler):
    server: StatementReferrer

    def do_GET(self) -> None:
        srv = self.server
        srv.seen.append(self.path)
        bodies = {srv.digest: srv.manifest, srv.referrer_digest: srv.referrer}
        name = self.path.rpartition("/manifests/")[2]
        if name in bodies:
            headers = {"Content-Type": OCI_MANIFEST, "Docker-Content-Digest": name}
            self.send_bytes(200, bodies[name], headers)
        elif self.path.startswith(f"/v2/t/app/referrers/{srv.digest}"):
            listed = {"mediaType": OCI_MANIFEST, "digest": srv.listed,
                      "size": len(srv.referrer), "artifactType": MEDIA_TYPE}  # fmt: skip
            self.send_json(200, {"schemaVersion": 2, "mediaType": OCI_INDEX,
                                 "manifests": [listed]}, {"Content-Type": OCI_INDEX})  # fmt: skip
        else:
            self.send_json(404, {"errors": [{"code": "NOT_FOUND"}]})

    do_HEAD = do_GET


@pytest.mark.parametrize(
    ("layer", "reason"),
    [
        ({"mediaType": MEDIA_TYPE, "size": 2}, "its statement layer has the digest None"),
        ({"mediaType": MEDIA_TYPE, "size": 2, "digest": "sha256:../../../t/app/manifests/1"},
         "its statement layer has the digest 'sha256:../../../t/app/manifests/1'"),
        ({"mediaType": MEDIA_TYPE, "size": 2, "digest": "sha256:" + "e" * 64},
         f"its statement blob sha256:{'e' * 64} is unreadable"),
    ],
    ids=["no-digest", "a-path", "gone"],
)  # fmt: skip
def test_a_referrer_whose_statement_layer_cannot_be_read_is_named(
    built: Built, capsys: pytest.CaptureFixture[str], layer: dict[str, Any], reason: str
) -> None:
    registry = StatementReferrer(layer)
    _verify_names_the_referrer(built, capsys, registry, registry.referrer_digest, reason)


def test_a_referrer_listed_by_a_path_is_not_asked_for(
    built: Built, capsys: pytest.CaptureFixture[str]
) -> None:
    """The referrers index names the referrer by a path, not a digest: it is not fetched
    (a manifest asked by another name would come without its digest checked)."""
    good = {"mediaType": MEDIA_TYPE, "size": 2, "digest": "sha256:" + "e" * 64}
    listed = "sha256:../../../t/app/manifests/1"
    registry = StatementReferrer(good, listed=listed)
    reason = f"the referrers index names it {listed!r}, not sha256:<64 hex>"
    # the index's own text, not a digest: shown quoted and cut short
    _verify_names_the_referrer(built, capsys, registry, repr(listed), reason)
    assert not [p for p in registry.seen if ".." in p], registry.seen


def _verify_refused(
    built: Built, capsys: pytest.CaptureFixture[str], registry: OddReferrers | StatementReferrer
) -> tuple[str, str]:
    """verify of the app pinned on ``registry`` (stopped after) exits 18: (the pin, stderr)."""
    try:
        pinned = f"{registry.host}/t/app@{registry.digest}"
        assert built.cli("verify", "app", "--image", pinned) == RegistryError.return_code
    finally:
        registry.stop()
    return pinned, capsys.readouterr().err


def _verify_names_the_referrer(
    built: Built, capsys: pytest.CaptureFixture[str], registry: StatementReferrer, named: str,
    reason: str,
) -> None:  # fmt: skip
    pinned, err = _verify_refused(built, capsys, registry)
    assert f"{pinned}: no lockpipe provenance referrer" in err, err
    assert f"referrer {named}: {reason}" in err, err
    assert "Traceback" not in err
    asked = [p for p in registry.seen if "/blobs/" in p]
    assert all(p.endswith("e" * 64) for p in asked), asked  # nothing but a sha256 was asked
