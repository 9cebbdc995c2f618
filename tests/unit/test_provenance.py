"""The provenance statement: its shape, its determinism, and every input it names."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.provenance import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    dumps,
    parse_requirements,
    provenance_path,
    read_pip,
    record_build,
    statement,
    write_provenance,
)
from lockpipe.imagebuild.records import BuildRecord, read_record
from lockpipe.lock.model import Lock, load_lock
from tests.lockfactory import DIGEST, doc, make_repo

HASH_A, HASH_B = "sha256:" + "1" * 64, "sha256:" + "2" * 64
REQUIREMENTS = f"""\
# pinned by nox -s lock
six==1.16.0 \\
    --hash={HASH_B} \\
    --hash={HASH_A}
idna==3.7 --hash={HASH_A}  # inline comment
"""


def pip_lock(root: Path) -> Lock:
    """The factory's lock, with one hash-pinned requirements file in the context."""
    document = doc()
    document["pip"] = {"req": {"file": "images/app/requirements.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["req"]
    (root / "images" / "app").mkdir(parents=True)
    (root / "images" / "app" / "requirements.txt").write_text(REQUIREMENTS)
    return load_lock(make_repo(root, document))


def record_for(lock: Lock, **changes: Any) -> BuildRecord:
    fields: dict[str, Any] = {
        "target": "app", "tag": "localhost/lockpipe-test/app:1", "key": "k" * 64,
        "image_id": "sha256:" + "c" * 64, "engine": "buildah", "engine_version": "1.28.2",
        "reproducible": True, "reproducible_how": "--timestamp",
        "fingerprint": lock.fingerprints["app"], "source_date_epoch": 1700000000,
        "built_at": "2026-11-30T00:00:00Z", "seconds": 1.5,
    }  # fmt: skip
    return BuildRecord(**{**fields, **changes})


def test_requirements_hashes_are_parsed_per_line() -> None:
    assert parse_requirements(REQUIREMENTS) == (
        ("idna==3.7", (HASH_A,)),
        ("six==1.16.0", (HASH_A, HASH_B)),
    )


def test_statement_shape(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    plan = plan_target(lock, "app")
    record = record_for(lock)
    doc_ = statement(plan, record, read_pip(lock, plan))
    assert doc_["_type"] == STATEMENT_TYPE and doc_["predicateType"] == PREDICATE_TYPE
    assert doc_["subject"] == [{"name": record.tag, "digest": {"sha256": "c" * 64}}]
    params = doc_["predicate"]["buildDefinition"]
    deps = {d["name"]: d for d in params["resolvedDependencies"]}
    assert deps["bases.busybox"]["digest"] == {"sha256": DIGEST.removeprefix("sha256:")}
    assert deps["bases.busybox"]["uri"].endswith(f"busybox:1@{DIGEST}")
    assert deps["pip.req"]["digest"]["sha256"] == lock.pip["req"].sha256
    assert deps["pip.req"]["annotations"]["requirements"]["six==1.16.0"] == [HASH_A, HASH_B]
    assert deps["context:Dockerfile"]["digest"]["sha256"] == dict(plan.files)["Dockerfile"]
    assert "context:requirements.txt" in deps
    assert deps["engine:buildah"]["annotations"] == {"version": "1.28.2"}
    assert params["externalParameters"]["buildArgs"]["GREETING"] == "hello"
    assert params["internalParameters"]["fingerprint"] == lock.fingerprints["app"]
    run = doc_["predicate"]["runDetails"]
    # No made-up invocation ID; the build key, the same for every build of these inputs,
    # is an internal parameter; the one per-invocation field is when the build finished.
    assert run["metadata"] == {"finishedOn": record.built_at}
    assert params["internalParameters"]["buildKey"] == record.key
    assert run["builder"]["id"] == "urn:lockpipe:buildah"
    assert run["byproducts"] == [{"name": "image-id", "digest": {"sha256": "c" * 64}}]


def test_source_archive_is_a_dependency(tmp_path: Path) -> None:
    document = doc()
    document["sources"] = {"lib": {
        "repository": "https://example.invalid/lib", "commit": "a" * 40,
        "url": "https://example.invalid/lib.tar.gz", "sha256": "d" * 64, "root": "lib-1",
    }}  # fmt: skip
    document["targets"]["app"]["source"] = "lib"
    lock = load_lock(make_repo(tmp_path, document))
    plan = plan_target(lock, "app")
    deps = statement(plan, record_for(lock), ())["predicate"]["buildDefinition"]
    source = {d["name"]: d for d in deps["resolvedDependencies"]}["sources.lib"]
    assert source == {
        "name": "sources.lib",
        "uri": "https://example.invalid/lib.tar.gz",
        "digest": {"sha256": "d" * 64, "gitCommit": "a" * 40},
    }


def test_statement_is_deterministic_and_follows_its_inputs(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    plan = plan_target(lock, "app")
    record = record_for(lock)
    first = dumps(statement(plan, record, read_pip(lock, plan)))
    again = dumps(statement(plan_target(lock, "app"), record_for(lock), read_pip(lock, plan)))
    assert first == again
    moved = replace(plan, bases=(("busybox", f"127.0.0.1:5000/x:1@sha256:{'e' * 64}"),))
    assert dumps(statement(moved, record, ())) != dumps(statement(plan, record, ()))
    assert json.loads(first) == statement(plan, record, read_pip(lock, plan))


def test_publish_subject_replaces_the_local_image(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    plan = plan_target(lock, "app")
    pushed = ("127.0.0.1:5000/p/app:abc", "sha256:" + "f" * 64)
    doc_ = statement(plan, record_for(lock), (), subject=pushed)
    assert doc_["subject"] == [{"name": pushed[0], "digest": {"sha256": "f" * 64}}]
    assert doc_["predicate"]["runDetails"]["byproducts"][0]["digest"]["sha256"] == "c" * 64


def test_record_of_another_target_is_refused(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path)
    with pytest.raises(ValueError, match="record of other"):
        statement(plan_target(lock, "app"), record_for(lock, target="other"), ())


def test_written_beside_the_records(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path / "repo")
    plan = plan_target(lock, "app")
    doc_ = statement(plan, record_for(lock, engine="podman"), ())
    path = write_provenance(tmp_path / "state", doc_)
    assert path == provenance_path(tmp_path / "state", "podman", "app")
    assert path.name == "app.intoto.json" and json.loads(path.read_text()) == doc_


def test_record_build_writes_the_record_and_its_provenance_together(tmp_path: Path) -> None:
    lock = pip_lock(tmp_path / "repo")
    plan = plan_target(lock, "app")
    state = tmp_path / "state"
    for built_at in ("2026-11-30T00:00:00Z", "2026-11-30T01:00:00Z"):
        record = record_for(lock, built_at=built_at, image_id="sha256:" + built_at[12] * 64)
        path = record_build(state, lock, plan, record)
        assert read_record(state, "buildah", "app") == record and path.is_file()
        written = json.loads(provenance_path(state, "buildah", "app").read_text())
        assert written == json.loads(dumps(statement(plan, record, read_pip(lock, plan))))
        assert written["predicate"]["runDetails"]["metadata"]["finishedOn"] == built_at
