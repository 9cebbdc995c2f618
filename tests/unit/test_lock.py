from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import DriftError, LockError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.lock.fingerprint import check_drift
from lockpipe.lock.model import dump_lock, load_lock, write_lock
from tests.lockfactory import DOC, doc, make_repo, reparse

REPO = Path(__file__).resolve().parents[2]


def test_valid_lock_loads_into_dataclasses(tmp_path: Path) -> None:
    lock = load_lock(make_repo(tmp_path))
    target = lock.target("app")
    assert target.bases == {"BASE": "busybox"}
    assert lock.bases["busybox"].platform == "linux/amd64"
    assert lock.source_date_epoch == 1700000000
    check_drift(lock, target)


def test_committed_lock_is_valid_and_current() -> None:
    lock = load_lock(REPO / "locks" / "digests.json")
    assert set(lock.targets) == {"frank-large", "frank-small", "llama-cuda", "llama-cuda-mtp",
                                 "llama-cuda-slots", "llama-cpu"}  # fmt: skip
    for target in lock.targets.values():
        check_drift(lock, target)
    # built elsewhere: no fingerprint, nothing to drift
    assert "frank-large" not in lock.fingerprints
    assert lock.target("frank-large").external is not None


def _error(tmp_path: Path, mutate: Any) -> str:
    path = make_repo(tmp_path)
    with pytest.raises(LockError) as info:
        reparse(path, mutate)
    return str(info.value)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.pop("version"), "(top level): 'version' is a required property"),
        (lambda d: d.update(version=2), "version: 1 was expected"),
        (
            lambda d: d["bases"]["busybox"].update(digest="sha256:abc"),
            "bases.busybox.digest: 'sha256:abc' must be 'sha256:' and 64 lowercase hex digits",
        ),
        (
            lambda d: d["targets"]["app"]["bases"].update(BASE="nope"),
            "targets.app.bases: 'nope' is not in bases",
        ),
        (
            lambda d: d["bases"]["busybox"].update(ref="busybox:latest"),
            "bases.busybox.ref: 'busybox:latest' needs a tag other than 'latest'",
        ),
        (
            lambda d: d["bases"]["busybox"].update(ref="busybox:1@sha256:" + "1" * 64),
            "put the digest in bases.busybox.digest",
        ),
        (
            lambda d: d["targets"]["app"].update(context="images/gone"),
            "images/gone (paths are relative to the nearest folder above the lock",
        ),
        (lambda d: d["targets"]["app"].update(colour="red"), "check the spelling"),
        (
            lambda d: d.update(sources={"x": {"repository": "r", "commit": "abc"}}),
            "sources.x.commit: 'abc' must be a full 40-hex-digit commit",
        ),
        (
            lambda d: d.update(pip={"audio": {"file": "req.txt", "sha256": "0" * 64}}),
            "pip.audio.file: req.txt does not exist",
        ),
        # a build arg replaced the pinned base (or steered BuildKit's frontend): pulled by tag
        (
            lambda d: d["targets"]["app"]["build_args"].update(BASE="busybox:1.36"),
            "targets.app.build_args.BASE: BASE is the ARG of bases entry targets.app.bases.BASE",
        ),
        (
            lambda d: d["targets"]["app"]["build_args"].update(BUILDKIT_SYNTAX="docker/x:1"),
            "targets.app.build_args.BUILDKIT_SYNTAX: a BUILDKIT_ argument steers BuildKit's",
        ),
        (
            lambda d: d["targets"]["app"]["build_args"].update(SOURCE_SHA256="0" * 64),
            "targets.app.build_args.SOURCE_SHA256: lockpipe sets SOURCE_SHA256 itself",
        ),
    ],
)
def test_invalid_locks_name_the_json_path(tmp_path: Path, mutate: Any, expected: str) -> None:
    message = _error(tmp_path, mutate)
    assert expected in message
    assert "is not a valid lock" in message


def test_broken_json_names_line_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "digests.json"
    path.write_text('{"version": 1,\n  "bases": {,}}')
    with pytest.raises(LockError, match=r"digests.json:2:\d+: not valid JSON .*git checkout"):
        load_lock(path)


def test_missing_lock_says_how_to_point_at_one(tmp_path: Path) -> None:
    with pytest.raises(LockError, match="pass --lock PATH or set LOCKPIPE_LOCK"):
        load_lock(tmp_path / "nope.json")


def test_unpinned_base_loads_but_cannot_be_planned(tmp_path: Path) -> None:
    document = doc()
    del document["bases"]["busybox"]["digest"]
    lock = load_lock(make_repo(tmp_path, document))
    with pytest.raises(LockError) as info:
        plan_target(lock, "app")
    assert str(info.value) == (
        "targets.app.bases.BASE: '127.0.0.1:5000/lockpipe-test/busybox:1' has no digest; "
        "run nox -s refresh-digests"
    )


def test_edited_dockerfile_is_drift(tmp_path: Path) -> None:
    lock = load_lock(make_repo(tmp_path))
    (tmp_path / "images/app/Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nRUN rm -rf /\n")
    with pytest.raises(DriftError, match=r"fingerprints\.app: images/app/ .* run nox -s lock"):
        check_drift(lock, lock.target("app"))


def test_edited_target_config_is_drift(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    lock = reparse(path, lambda d: d["targets"]["app"]["build_args"].update(GREETING="bye"))
    with pytest.raises(DriftError):
        check_drift(lock, lock.target("app"))


def test_missing_fingerprint_is_drift(tmp_path: Path) -> None:
    lock = load_lock(make_repo(tmp_path, relocked=False))
    with pytest.raises(DriftError, match=r"fingerprints\.app is missing; run nox -s lock"):
        check_drift(lock, lock.target("app"))


def test_pip_file_changed_names_both_hashes(tmp_path: Path) -> None:
    document = doc()
    document["pip"] = {"audio": {"file": "images/app/req.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["audio"]
    (tmp_path / "images/app").mkdir(parents=True)
    (tmp_path / "images/app/req.txt").write_text("x==1 --hash=sha256:" + "1" * 64 + "\n")
    path = make_repo(tmp_path, document)  # relocks: records the real sha256
    (tmp_path / "images/app/req.txt").write_text("x==2 --hash=sha256:" + "1" * 64 + "\n")
    lock = load_lock(path)
    with pytest.raises(
        DriftError,
        match=r"pip.audio: images/app/req.txt has sha256 [0-9a-f]{64}, "
        r"the lock says [0-9a-f]{64}",
    ):
        check_drift(lock, lock.target("app"))


def test_write_is_canonical_and_atomic(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    document = json.loads(path.read_text())
    scrambled = json.loads(json.dumps(document, sort_keys=False))
    write_lock(path, dict(reversed(list(scrambled.items()))))
    assert path.read_text() == dump_lock(document)
    assert path.read_text().endswith("}\n")
    assert [p.name for p in path.parent.iterdir()] == ["digests.json"]  # no temp file left


def test_invalid_document_is_never_written(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    before = path.read_text()
    with pytest.raises(LockError):
        write_lock(path, {**DOC, "version": "one"})
    assert path.read_text() == before


def test_editing_how_a_target_is_served_is_not_drift(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    before = plan_target(load_lock(path), "app").identity()
    lock = reparse(path, lambda d: d["targets"]["app"]["serve"].update(command=["other"], port=9))
    check_drift(lock, lock.target("app"))
    assert plan_target(lock, "app").identity() == before


def test_provenance_is_not_a_build_input(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    before = plan_target(load_lock(path), "app").identity()
    lock = reparse(path, lambda d: d["bases"]["busybox"].update(
        origin={"source": "somewhere else", "seen": "2026-11-29"}))  # fmt: skip
    check_drift(lock, lock.target("app"))
    assert plan_target(lock, "app").identity() == before


def test_the_checkout_root_is_the_folder_that_holds_images(tmp_path: Path) -> None:
    from lockpipe.lock.model import checkout_root

    (tmp_path / "repo/images").mkdir(parents=True)
    (tmp_path / "repo/locks/test").mkdir(parents=True)
    assert checkout_root(tmp_path / "repo/locks/test/x.json") == (tmp_path / "repo").resolve()
    assert checkout_root(tmp_path / "repo/x.json") == (tmp_path / "repo").resolve()
    assert checkout_root(tmp_path / "elsewhere/x.json") == tmp_path.resolve()


def _with_frank_large(mutate: Any) -> str:
    """The committed lock with frank-large mutated: the LockError's message."""
    from lockpipe.lock.model import parse_lock

    path = REPO / "locks" / "digests.json"
    d = json.loads(path.read_text())
    mutate(d["targets"])
    with pytest.raises(LockError) as info:
        parse_lock(d, path)
    return str(info.value)


def test_an_external_target_needs_no_command_but_a_built_one_does() -> None:
    message = _with_frank_large(lambda t: t["llama-cpu"]["serve"].pop("command"))
    assert "targets.llama-cpu" in message
    message = _with_frank_large(lambda t: t["frank-large"]["external"].update(digest="sha256:1"))
    assert "targets.frank-large.external.digest" in message
    message = _with_frank_large(lambda t: t["frank-large"]["serve"]["env"].update(bad_name="1"))
    assert "targets.frank-large.serve.env" in message
    message = _with_frank_large(lambda t: t["frank-large"]["serve"].update(runtime="halo"))
    assert "targets.frank-large.serve.runtime" in message


def test_a_schema_error_about_a_huge_value_is_clipped(tmp_path: Path) -> None:
    """jsonschema puts the whole value in its message: targets as a list of 20,000 strings
    gave a 100,193-byte error (issue 18)."""
    message = _error(tmp_path, lambda d: d.update(targets=["x" * 5] * 20000))
    line = next(x for x in message.splitlines() if x.strip().startswith("targets:"))
    assert len(line) < 600 and "characters)" in line, line[:200]
