"""publish → pull → verify against the loopback registry (distribution 2.8), real engines.

Registry 2.8 has no referrers API, so the provenance lands under the referrers
tag schema's fallback tag (``sha256-<hex>``); these tests read it back from
there, and from the registry's own access log they prove that a second
publish of an unchanged build sends no upload.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import requests

from lockpipe.cli.main import main
from lockpipe.engines import get_engine
from lockpipe.engines.base import Engine
from lockpipe.errors import CheckFailed, EngineMissing, RegistryError
from lockpipe.imagebuild.provenance import MEDIA_TYPE, provenance_path
from lockpipe.imagebuild.run import Settings, build_target
from lockpipe.lock.model import dump_lock, load_lock
from lockpipe.publish.outputs import images_path, read_images
from lockpipe.publish.pull import read_published
from lockpipe.publish.push import publish_target
from lockpipe.publish.referrer import attach_provenance
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = pytest.mark.integration
buildah = pytest.mark.buildah
REQUIREMENTS = "six==1.16.0 --hash=sha256:" + "1" * 64 + "\n"
ACCESS_LOG = Path(os.environ.get("LOCKPIPE_CI_STATE", "/var/lib/lockpipe-ci")) / "registry.log"
WRITES = ('"PUT', '"POST', '"PATCH')


@dataclass
class CountingEngine:
    """The real engine, with its push calls counted (a spy, not a fake)."""

    inner: Engine
    pushes: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        self.pushes.append(dest)
        return self.inner.push(ref, dest, tls_verify=tls_verify)


@pytest.fixture(
    params=[
        pytest.param("buildah", marks=pytest.mark.buildah),
        pytest.param("podman", marks=pytest.mark.podman),
        pytest.param("docker", marks=pytest.mark.docker),
    ]
)
def oci_engine(request: pytest.FixtureRequest) -> Engine:
    try:
        return get_engine(request.param)
    except EngineMissing as exc:
        unavailable(f"engine {request.param} is not usable: {exc}")


@dataclass
class Repo:
    lock: Path
    state: Path
    prefix: str

    def cli(self, verb: str, *args: str) -> int:
        return main([verb, "--lock", str(self.lock), "--state", str(self.state), *args])

    def edit(self, mutate: Callable[[dict[str, Any]], None]) -> None:
        document = json.loads(self.lock.read_text())
        mutate(document)
        self.lock.write_text(dump_lock(document))


def _repo(tmp_path: Path, base: tuple[str, str], engine: str, registry: str) -> Repo:
    document = doc()
    document["bases"]["busybox"] = {"ref": base[0], "digest": base[1]}
    document["pip"] = {"req": {"file": "images/app/requirements.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["req"]
    document["targets"]["app"]["tag"] = f"localhost/lockpipe-test/pub-{engine}:1"
    (tmp_path / "images" / "app").mkdir(parents=True)
    (tmp_path / "images" / "app" / "requirements.txt").write_text(REQUIREMENTS)
    lock = make_repo(tmp_path, document)
    # A prefix of its own per run: the registry outlives the test, and tags are per key.
    return Repo(lock, tmp_path / "state", f"{registry}/lockpipe-pub-{uuid.uuid4().hex[:8]}")


def _log_lines(prefix: str) -> list[str]:
    """The access log lines of this run's repositories; the test fails without the log: the
    no-upload claim rests on it (.ci/start-services writes it)."""
    if not ACCESS_LOG.is_file():
        pytest.fail(f"{ACCESS_LOG}: the registry's access log is missing; start the registry "
                    "with .ci/start-services (or set LOCKPIPE_CI_STATE to its folder)")  # fmt: skip
    repo = prefix.split("/", 1)[1]
    return [ln for ln in ACCESS_LOG.read_text().splitlines() if f"/v2/{repo}/" in ln and '"' in ln]


def test_publish_pull_verify_round_trip(
    oci_engine: Engine, busybox_base: tuple[str, str], registry: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    repo = _repo(tmp_path, busybox_base, oci_engine.name, registry)
    lock = load_lock(repo.lock)
    settings = Settings(state=repo.state, cache=tmp_path / "cache", force=True)
    record = build_target(lock, "app", oci_engine, settings).record
    local = json.loads(provenance_path(repo.state, oci_engine.name, "app").read_text())
    assert local["subject"][0]["digest"]["sha256"] == record.image_id.removeprefix("sha256:")

    spy = CountingEngine(oci_engine)
    images = images_path(repo.lock)
    first = publish_target(lock, "app", spy, state=repo.state, prefix=repo.prefix, images=images)  # type: ignore[arg-type]
    assert first.uploaded and len(spy.pushes) == 1
    entry = read_images(images)["app"]
    assert entry == first.published and entry.key == record.key
    assert entry.reference == f"{repo.prefix}/app:{record.key[:12]}"

    # The provenance sits under registry 2.8's fallback tag, pointing at the image.
    name = entry.reference.split("/", 1)[1].rsplit(":", 1)[0]
    base = f"http://{registry}/v2/{name}"
    oci = "application/vnd.oci.image"
    index = requests.get(f"{base}/manifests/{entry.digest.replace(':', '-')}", timeout=10,
                         headers={"Accept": f"{oci}.index.v1+json"}).json()  # fmt: skip
    assert [d["artifactType"] for d in index["manifests"]] == [MEDIA_TYPE]
    art = requests.get(f"{base}/manifests/{index['manifests'][0]['digest']}", timeout=10,
                       headers={"Accept": f"{oci}.manifest.v1+json"}).json()  # fmt: skip
    assert art["subject"]["digest"] == entry.digest
    statement = requests.get(f"{base}/blobs/{art['layers'][0]['digest']}", timeout=10).json()
    assert statement["subject"] == [
        {"name": entry.reference, "digest": {"sha256": entry.digest.removeprefix("sha256:")}}
    ]
    assert statement["predicate"]["buildDefinition"]["internalParameters"]["buildKey"] == record.key

    # Attaching (again) never moves the image: the tag still names the same manifest bytes.
    def tag_digest() -> str:
        resp = requests.get(f"{base}/manifests/{record.key[:12]}", timeout=10, headers={
            "Accept": "application/vnd.oci.image.manifest.v1+json, "
                      "application/vnd.docker.distribution.manifest.v2+json"})  # fmt: skip
        return "sha256:" + hashlib.sha256(resp.content).hexdigest()

    before = tag_digest()
    assert attach_provenance(entry.pinned, statement) != entry.digest
    assert tag_digest() == before == entry.digest

    # A second publish of the same build: no push, and the registry saw no write at all.
    seen = len(_log_lines(repo.prefix))
    second = publish_target(lock, "app", spy, state=repo.state, prefix=repo.prefix, images=images)  # type: ignore[arg-type]
    assert not second.uploaded and len(spy.pushes) == 1 and second.published == entry
    assert "unchanged" in capsys.readouterr().err
    new = _log_lines(repo.prefix)[seen:]
    assert new and not [ln for ln in new if any(m in ln for m in WRITES)], new

    # A fresh checkout has no images.json: the key's tag in the registry shows the same build.
    images.unlink()
    seen = len(_log_lines(repo.prefix))
    third = publish_target(lock, "app", spy, state=repo.state, prefix=repo.prefix, images=images)  # type: ignore[arg-type]
    assert not third.uploaded and len(spy.pushes) == 1
    assert third.published.digest == entry.digest and third.provenance == first.provenance
    assert read_images(images)["app"].digest == entry.digest  # recorded again
    new = _log_lines(repo.prefix)[seen:]
    assert new and not [ln for ln in new if any(m in ln for m in WRITES)], new

    # Pull it as another host would, then verify it against the lock.
    if shutil.which("skopeo"):
        # dir: keeps the manifest bytes as served (oci: would convert docker's schema 2).
        subprocess.run(["skopeo", "copy", "--src-tls-verify=false", f"docker://{entry.pinned}",
                        f"dir:{tmp_path / 'pulled'}"], check=True, capture_output=True)  # fmt: skip
        pulled = (tmp_path / "pulled" / "manifest.json").read_bytes()
        assert "sha256:" + hashlib.sha256(pulled).hexdigest() == entry.digest
    assert repo.cli("verify", "app", "--image", entry.pinned) == 0
    assert repo.cli("verify", "app", "--published") == 0
    assert "matches its provenance" in capsys.readouterr().out  # the verdict: a result

    # A rebuild here without cache gives the published image where the engine is reproducible.
    rebuilt = repo.cli("verify", "app", "--published", "--rebuild", "--engine", oci_engine.name,
                       "--cache", str(tmp_path / "cache"))  # fmt: skip
    assert rebuilt == (0 if record.reproducible else CheckFailed.return_code)

    # What smoke checks a pulled image against, and the unit deploy renders for it.
    assert read_published(entry.pinned).image_id == record.image_id
    out = tmp_path / "deploy"
    # No smoke ran here, so deploy's gate refuses the image unless told: --force.
    assert repo.cli("deploy", "app", "--published", "--no-inspect", "--no-verify",
                    "--podman-version", "5.4", "--out", str(out)) == 19  # fmt: skip
    assert repo.cli("deploy", "app", "--published", "--no-inspect", "--no-verify", "--force",
                    "--podman-version", "5.4", "--out", str(out)) == 0  # fmt: skip
    assert f"Image={entry.pinned}\n" in (out / "app.container").read_text()


@buildah
@pytest.mark.parametrize(
    ("entry", "mutate"),
    [
        ("bases.busybox", lambda d: d["bases"]["busybox"].update(digest="sha256:" + "e" * 64)),
        ("pip.req", lambda d: d["pip"]["req"].update(sha256="f" * 64)),
    ],
)
def test_verify_names_what_moved_in_the_lock(
    entry: str, mutate: Callable[[dict[str, Any]], None], busybox_base: tuple[str, str],
    registry: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    try:
        engine = get_engine("buildah")
    except EngineMissing as exc:
        unavailable(f"buildah is not usable: {exc}")
    repo = _repo(tmp_path, busybox_base, engine.name, registry)
    settings = Settings(state=repo.state, cache=tmp_path / "cache")
    build_target(load_lock(repo.lock), "app", engine, settings)
    assert repo.cli("publish", "app", "--engine", "buildah", "--to", repo.prefix) == 0
    pinned = read_images(images_path(repo.lock))["app"].pinned
    repo.edit(mutate)
    capsys.readouterr()
    assert repo.cli("verify", "app", "--image", pinned) == CheckFailed.return_code
    err = capsys.readouterr().err
    assert f"{entry}:" in err and "the lock moved since this image was built" in err


@buildah
def test_verify_without_provenance_says_so(
    busybox_base: tuple[str, str], registry: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    repo = _repo(tmp_path, busybox_base, "buildah", registry)
    ref, digest = busybox_base  # pushed by the fixture, with no provenance attached
    assert repo.cli("verify", "app", "--image", f"{ref}@{digest}") == RegistryError.return_code
    assert "no lockpipe provenance referrer" in capsys.readouterr().err


@pytest.mark.buildah
def test_a_destination_that_lost_the_image_is_pushed_again_whatever_a_mirror_holds(
    busybox_base: tuple[str, str], registry: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """images.json says the build sits at the destination, which lost it; a pull-through
    mirror in registries.conf still holds the digest. publish asks the destination alone,
    as the push writes there: it used to ask the mirror first, say 'unchanged' and push
    nothing, leaving images.json naming an image the destination does not have."""
    repo = _repo(tmp_path, busybox_base, "buildah", registry)
    assert repo.cli("build", "app", "--engine", "buildah") == 0
    assert repo.cli("publish", "--engine", "buildah", "--to", repo.prefix) == 0
    images = images_path(repo.lock)
    held = read_images(images)["app"]  # the mirror (the first prefix) holds it
    lost = f"{registry}/lockpipe-pub-{uuid.uuid4().hex[:8]}"  # a destination that has nothing
    moved_ref = held.reference.replace(repo.prefix, lost)
    images.write_text(images.read_text().replace(held.reference, moved_ref))
    assert read_images(images)["app"].reference == moved_ref
    conf = tmp_path / "registries.conf"
    conf.write_text(
        f'[[registry]]\nprefix = "{lost}"\nlocation = "{lost}"\ninsecure = true\n'
        f'[[registry.mirror]]\nlocation = "{repo.prefix}"\ninsecure = true\n'
    )
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user drop-ins of this machine
    capsys.readouterr()
    assert repo.cli("publish", "--engine", "buildah", "--to", lost) == 0
    err = capsys.readouterr().err
    assert f"to {moved_ref}" in err and "published 1 of 1 target(s); 0 unchanged" in err, err
    name = moved_ref.split("/", 1)[1].rsplit(":", 1)[0]
    oci = "application/vnd.oci.image.manifest.v1+json"
    resp = requests.head(
        f"http://{registry}/v2/{name}/manifests/{held.digest}", timeout=10, headers={"Accept": oci}
    )
    assert resp.status_code == 200, f"{moved_ref}@{held.digest} is not at the destination"
