"""Pure parts of publish and verify: images.json, the destination, the referrer manifest,
and the comparison of a statement with the lock."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import LockError, UsageError
from lockpipe.fs import READ_LIMIT
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.provenance import MEDIA_TYPE, dumps, read_pip, statement
from lockpipe.lock.model import Lock
from lockpipe.publish.outputs import (
    Published,
    dump_images,
    images_path,
    published_for,
    read_images,
    write_images,
)
from lockpipe.publish.pull import image_digest
from lockpipe.publish.push import check_prefix, destination, is_loopback
from lockpipe.publish.referrer import EMPTY_MEDIA_TYPE, artifact_manifest, build_type
from lockpipe.registry.names import is_loopback as names_loopback
from lockpipe.verify.check import compare, missing_fields
from lockpipe.verify.rebuild import loopback, pinned_reference
from tests.lockfactory import doc, make_repo, reparse
from tests.policy import within
from tests.unit.test_provenance import pip_lock, record_for

ENTRY = Published(
    reference="127.0.0.1:5000/lockpipe/app:0123456789ab", digest="sha256:" + "9" * 64,
    key="0123456789ab" + "0" * 52, engine="buildah", engine_version="1.28.2",
    published="2026-11-30",
)  # fmt: skip


def test_images_json_round_trip_is_canonical(tmp_path: Path) -> None:
    path = images_path(tmp_path / "locks" / "digests.json")
    assert path == tmp_path / "locks" / "images.json"
    assert read_images(path) == {}
    write_images(path, {"z": ENTRY, "app": ENTRY})
    assert read_images(path) == {"app": ENTRY, "z": ENTRY}
    text = path.read_text()
    assert text == dump_images(read_images(path)) and text.endswith("\n")
    assert list(json.loads(text)["images"]) == ["app", "z"]
    assert published_for(path, "app").pinned == f"127.0.0.1:5000/lockpipe/app@{ENTRY.digest}"
    with pytest.raises(LockError, match="nox -s publish -- other"):
        published_for(path, "other")


BAD = ["not json", '{"version": 2, "images": {}}', '{"version": 1, "images": {"a": {"x": 1}}}']


def test_an_images_json_that_is_a_fifo_or_too_large_is_one_error_unread(tmp_path: Path) -> None:
    """It was read with read_text: a FIFO waited for a writer for ever, and a 300 MB file
    took 651 MB before 'not JSON' (issue 18)."""
    fifo = tmp_path / "images.json"
    os.mkfifo(fifo)
    with pytest.raises(LockError, match=r"images\.json: the file is not JSON"):
        within(30, lambda: read_images(fifo))  # no writer: its end at once, no wait
    big = tmp_path / "big" / "images.json"
    big.parent.mkdir()
    with big.open("wb") as fh:
        fh.truncate(READ_LIMIT + 1)
    with pytest.raises(LockError, match=r"64\.0 MiB, over the 64 MiB lockpipe reads"):
        read_images(big)


@pytest.mark.parametrize("text", BAD)
def test_bad_images_json_names_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "images.json"
    path.write_text(text)
    with pytest.raises(LockError, match=r"images\.json"):
        read_images(path)


def test_destination_is_keyed_and_checked() -> None:
    assert destination("127.0.0.1:5000/lockpipe/", "app", "abcdef0123456789") == (
        "127.0.0.1:5000/lockpipe/app:abcdef012345"
    )
    with pytest.raises(UsageError, match="name the registry host"):
        destination("lockpipe", "app", "k" * 64)
    assert is_loopback("127.0.0.1:5000/x/app:1") and is_loopback("localhost:5000/x:1")
    assert not is_loopback("ghcr.io/o/app:1")
    with pytest.raises(UsageError, match="add a path after the registry host"):
        check_prefix("127.0.0.1:5000")
    with pytest.raises(UsageError, match="add a path after the registry host"):
        check_prefix("ghcr.io/")


@pytest.mark.parametrize(
    ("given", "option"),
    [
        ("user:s3cret@127.0.0.1:5000/models", "--to"),
        ("oci://user:s3cret@127.0.0.1:5000/m", ""),
        ("user:s3c/ret@127.0.0.1:5000/models", "--to"),
    ],
)
def test_a_prefix_with_a_password_is_refused_without_showing_it(given: str, option: str) -> None:
    """--mirror oci://user:s3cret@… printed the password three times, and named --to for
    --mirror (issue 18)."""
    from lockpipe.publish.ocimirror import OciMirror

    with pytest.raises(UsageError) as caught:
        OciMirror(given) if given.startswith("oci://") else check_prefix(given)
    said = str(caught.value)
    assert "s3cret" not in said and "ret@" not in said and "user:" not in said, said
    assert said.startswith(
        f"{option or '--mirror'} {'oci://' if not option else ''}***@127.0.0.1:5000/"
    )
    assert "podman login 127.0.0.1:5000" in said


@pytest.mark.parametrize(
    "ref", ["127.0.0.1:5000/x/app:1", "127.0.0.2:5000/x/app:1", "localhost/x:1",
            "ghcr.io/o/app:1"],
)  # fmt: skip
def test_publish_and_rebuild_agree_on_plain_http(ref: str) -> None:
    assert is_loopback(ref) == loopback(ref) == names_loopback(ref.split("/", 1)[0])


def test_artifact_manifest_points_at_its_subject() -> None:
    blob = b'{"_type": "x"}'
    subject = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
               "digest": "sha256:" + "9" * 64, "size": 123}  # fmt: skip
    doc = json.loads(artifact_manifest(blob, subject))
    assert doc["artifactType"] == MEDIA_TYPE and doc["subject"] == subject
    assert doc["config"] == {"mediaType": EMPTY_MEDIA_TYPE, "size": 2,
                             "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest()}  # fmt: skip
    assert doc["layers"][0]["digest"] == "sha256:" + hashlib.sha256(blob).hexdigest()


def test_verify_wants_a_digest() -> None:
    with pytest.raises(UsageError, match="by digest"):
        image_digest("127.0.0.1:5000/lockpipe/app:1")
    with pytest.raises(UsageError, match="not an image reference"):
        image_digest("127.0.0.1:5000/Upper Case@sha256:x")
    assert image_digest(f"127.0.0.1:5000/lockpipe/app@{ENTRY.digest}") == ENTRY.digest


def _published(lock: Lock) -> tuple[dict[str, Any], dict[str, Any]]:
    plan = plan_target(lock, "app")
    doc = statement(plan, record_for(lock), read_pip(lock, plan), subject=("r", ENTRY.digest))
    return {"config": {"digest": "sha256:" + "c" * 64}}, json.loads(dumps(doc))


def test_compare_agrees_with_the_lock_it_was_built_from(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    manifest, doc = _published(lock)
    assert compare(lock, "app", ENTRY.digest, manifest, doc) == []


def test_compare_names_a_moved_base_and_pip_file(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    manifest, doc = _published(lock)

    def move(d: dict[str, Any]) -> None:
        d["bases"]["busybox"]["digest"] = "sha256:" + "e" * 64
        d["pip"]["req"]["sha256"] = "f" * 64

    problems = compare(reparse(lock.path, move), "app", ENTRY.digest, manifest, doc)
    names = [p.split(":")[0] for p in problems]
    assert "bases.busybox" in names and "pip.req" in names
    assert all("the lock moved since this image was built" in p for p in problems)
    base = next(p for p in problems if p.startswith("bases.busybox"))
    assert "a refresh moved bases.busybox (refresh-digests)" in base


def test_compare_names_a_wrong_subject_and_config(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    manifest, doc = _published(lock)
    other = "sha256:" + "8" * 64
    problems = compare(lock, "app", other, {"config": {"digest": other}}, doc)
    assert [p.split(":")[0] for p in problems] == ["subject", "config"]
    assert compare(lock, "app", ENTRY.digest, manifest, {"_type": "x"})[0].startswith(
        "the referrer is not"
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [(("predicate",), "x"), (("predicate", "buildDefinition"), None),
     (("predicate", "buildDefinition", "resolvedDependencies"), [{"uri": "no name"}]),
     (("predicate", "runDetails", "byproducts"), []),
     (("predicate", "buildDefinition", "externalParameters"), ["not", "a", "dict"])],
)  # fmt: skip
def test_a_malformed_statement_is_a_problem_not_a_traceback(
    tmp_path: Path, path: tuple[str, ...], value: Any
) -> None:
    lock = pip_lock(tmp_path)
    manifest, doc = _published(lock)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert missing_fields(doc)
    (problem,) = compare(lock, "app", ENTRY.digest, manifest, doc)
    assert problem.startswith("the statement has no predicate.") and "--force" in problem


def test_only_lockpipe_build_type_is_lockpipes(tmp_path: Path) -> None:
    _, doc = _published(pip_lock(tmp_path))
    assert build_type(doc) == "urn:lockpipe:build:v1"
    assert build_type({"predicate": {"buildDefinition": {"buildType": "other"}}}) == "other"
    assert build_type({"predicate": []}) is None and build_type([1]) is None


def test_a_bare_digest_takes_the_name_without_its_tag(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    write_images(images_path(lock.path), {"app": ENTRY})
    digest = "sha256:" + "5" * 64
    pinned = pinned_reference(lock, "app", digest)
    assert pinned == f"127.0.0.1:5000/lockpipe/app@{digest}"
    assert pinned_reference(lock, "app", f"r/x@{digest}") == f"r/x@{digest}"


def _good() -> dict[str, object]:
    return dict(dataclasses.asdict(ENTRY), reference="127.0.0.1:5000/lockpipe/app:t")


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        (_good() | {"reference": 123}, "images.app.reference is an integer, not a string"),
        (_good() | {"digest": ["x"]}, "images.app.digest is a list, not a string"),
        (_good() | {"digest": "sha256:abc"}, "images.app.digest is 'sha256:abc', not sha256:"),
        (_good() | {"reference": "Not A Ref!"}, "images.app.reference: 'Not A Ref!'"),
        (_good() | {"engine": None}, "images.app.engine is null, not a string"),
        ({k: v for k, v in _good().items() if k != "key"}, "the file has no images.app.key"),
    ],
    ids=["reference-int", "digest-list", "digest-short", "reference-bad", "null", "missing"],
)
def test_deploy_published_reads_a_malformed_images_json_as_one_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: dict[str, object], words: str
) -> None:
    lock = make_repo(tmp_path, doc())
    path = images_path(lock)
    path.write_text(json.dumps({"version": 1, "images": {"app": entry}}))
    code = main(["deploy", "app", "--lock", str(lock), "--state", str(tmp_path / "state"),
                 "--published", "--podman-version", "5.4", "--no-inspect", "--no-verify",
                 "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code not in (0, 1) and "Traceback" not in err, err
    assert str(path) in err and words in err and "publish again" in err, err
    assert not (tmp_path / "out").exists()
