"""``lockpipe smoke`` then ``lockpipe deploy``, as a user runs them: the gate sees every run.

The smoke runs use the shared FAKE engine of tests/fake_openai.py, whose container is a
FAKE llama-server: a real HTTP server on 127.0.0.1, on the host port the runner chose,
answering /health, /v1/models, /v1/completions and /metrics. Deploy renders for podman
5.4 without inspecting the image. Two CPU targets stand for the fleet's llama-cuda (whose
smoke fails) and llama-cpu (whose smoke passes afterwards).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli import serve
from lockpipe.cli.main import main
from lockpipe.errors import CheckFailed, DeployError, SmokeConfigError, SmokeError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.fingerprint import served
from lockpipe.lock.model import load_lock
from lockpipe.smoke.report import CheckResult, SmokeReport, write_json
from tests import fake_openai
from tests.fake_openai import IMAGE, ServingEngine
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
FAILING = "cuda-app"  # its smoke fails
PASSING = "cpu-app"  # its smoke passes, in a later run


def _serving(text: str) -> ServingEngine:
    """The shared FAKE engine (tests/fake_openai.py) whose completion answers ``text``."""
    answers = copy.deepcopy(fake_openai.GOOD)
    answers["/v1/completions"]["choices"][0]["text"] = text
    return ServingEngine(answers, IMAGE)


GOOD, WRONG = " 6, 7, 8", " nine"


def _repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(lock, state, expectations): two CPU targets, each with a build record of IMAGE."""
    document = doc()
    app = document["targets"].pop("app")
    app["build_args"]["GGML_CUDA"] = "OFF"
    app["serve"]["model"] = "app"  # what the FAKE server lists
    for name in (FAILING, PASSING):
        document["targets"][name] = {**copy.deepcopy(app), "context": f"images/{name}",
                                     "tag": f"localhost/lockpipe-test/{name}:1"}  # fmt: skip
    lock = make_repo(tmp_path, document)
    state, loaded = tmp_path / "state", load_lock(lock)
    for name in (FAILING, PASSING):
        write_record(state, BuildRecord(
            target=name, tag=loaded.target(name).tag, image_id=IMAGE, engine="podman",
            key=build_key(plan_target(loaded, name), "podman", "5.0"), engine_version="5.0",
            reproducible=True, reproducible_how="fake", fingerprint=loaded.fingerprints[name],
            source_date_epoch=0, built_at="now", seconds=0.0,
        ))  # fmt: skip
    expect = tmp_path / "expect.json"
    spec = {"ready_seconds": 20, "generation": [{"prompt": "1, 2, 3, 4, 5,", "expect": ["6"]}],
            "probes": {}}  # fmt: skip
    expect.write_text(json.dumps({"version": 1, "targets": {FAILING: spec, PASSING: spec}}))
    return lock, state, expect


def _smoke(monkeypatch: pytest.MonkeyPatch, repo: tuple[Path, Path, Path], target: str,
           text: str) -> tuple[int, ServingEngine]:  # fmt: skip
    lock, state, expect = repo
    engine = _serving(text)
    monkeypatch.setattr(serve, "get_engine", lambda name: engine)
    code = main(["smoke", target, "--engine", "podman", "--lock", str(lock), "--state",
                 str(state), "--store", str(state.parent / "store"), "--expect", str(expect),
                 "--quiet"])  # fmt: skip
    return code, engine


def _deploy(repo: tuple[Path, Path, Path], target: str, *extra: str) -> int:
    lock, state, _ = repo
    return main(["deploy", target, "--lock", str(lock), "--state", str(state),
                 "--podman-version", "5.4", "--no-inspect", "--no-verify", *extra])  # fmt: skip


def test_a_failed_smoke_is_not_erased_by_a_later_run_of_another_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    assert _smoke(monkeypatch, repo, FAILING, WRONG)[0] == CheckFailed.return_code
    assert _smoke(monkeypatch, repo, PASSING, GOOD)[0] == 0
    capsys.readouterr()
    assert _deploy(repo, FAILING) == DeployError.return_code  # no --force: refused
    err = capsys.readouterr().err
    kept = json.loads((repo[1] / "smoke" / "smoke.json").read_text())["reports"]
    assert [(r["target"], r["ok"]) for r in kept] == [(FAILING, False), (PASSING, True)]
    assert f"{FAILING}: its last smoke run in {repo[1]}/smoke/smoke.json failed" in err
    assert "generation[0]" in err and "--force" in err
    assert _deploy(repo, PASSING) == 0
    unit = (repo[1] / "deploy" / f"{PASSING}.container").read_text()
    assert f"# Smoke: passed on {IMAGE[7:19]} at " in unit


def test_a_new_run_replaces_only_its_own_target_and_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path)
    assert _smoke(monkeypatch, repo, FAILING, WRONG)[0] == CheckFailed.return_code
    assert _smoke(monkeypatch, repo, PASSING, GOOD)[0] == 0
    assert _smoke(monkeypatch, repo, FAILING, GOOD)[0] == 0  # fixed: the same image passes
    kept = json.loads((repo[1] / "smoke" / "smoke.json").read_text())["reports"]
    assert [(r["target"], r["ok"]) for r in kept] == [(PASSING, True), (FAILING, True)]
    assert _deploy(repo, FAILING) == 0


def test_smoke_refuses_to_merge_into_a_file_that_is_no_smoke_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    path = repo[1] / "smoke" / "smoke.json"
    path.parent.mkdir(parents=True)
    path.write_text("[]")
    code, engine = _smoke(monkeypatch, repo, PASSING, GOOD)
    assert code == SmokeError.return_code and engine.specs == []  # nothing ran
    assert f"{path}: not a smoke report: expected an object" in capsys.readouterr().err
    assert path.read_text() == "[]"


# --- the run must have served what the lock says now: serve section and payload pins -------

WEIGHTS = b'{"tiny": "weights"}\n'
REV_A, REV_B = "a" * 40, "b" * 40


def _with_payload(repo: tuple[Path, Path, Path]) -> None:
    """PASSING mounts one pinned payload (revision REV_A), its blob already in the store."""
    lock, state, _ = repo
    document = json.loads(lock.read_text())
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    document["payloads"] = {"weights": {
        "repository": "org/tiny", "revision": REV_A, "filename": "weights.json",
        "size": len(WEIGHTS), "sha256": sha, "role": "model", "format": "json"}}  # fmt: skip
    document["targets"][PASSING]["payloads"] = ["weights"]
    lock.write_text(json.dumps(document))
    blob = state.parent / "store" / "models--org--tiny" / "blobs" / sha
    blob.parent.mkdir(parents=True)
    blob.write_bytes(WEIGHTS)


def _edit(lock: Path, change: Callable[[dict[str, Any]], None]) -> None:
    document = json.loads(lock.read_text())
    change(document)
    lock.write_text(json.dumps(document))


def _more_context(document: dict[str, Any]) -> None:
    document["targets"][PASSING]["serve"]["command"] += ["-c", "262144"]


def _new_env(document: dict[str, Any]) -> None:
    document["targets"][PASSING]["serve"]["env"] = {"LLAMA_ARG_FLASH_ATTN": "on"}


def _new_revision(document: dict[str, Any]) -> None:
    document["payloads"]["weights"]["revision"] = REV_B


@pytest.mark.parametrize(
    ("change", "named"),
    [(_more_context, "serve section"), (_new_env, "serve section"),
     (_new_revision, "payload pins")],
)  # fmt: skip
def test_a_serve_or_payload_change_after_a_passing_smoke_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    change: Callable[[dict[str, Any]], None], named: str,
) -> None:  # fmt: skip
    repo = _repo(tmp_path)
    _with_payload(repo)
    assert _smoke(monkeypatch, repo, PASSING, GOOD)[0] == 0
    assert _deploy(repo, PASSING) == 0
    _edit(repo[0], change)  # neither needs a relock nor a rebuild: the image is the same
    capsys.readouterr()
    assert _deploy(repo, PASSING) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{PASSING}: the lock's {named}" in err and "changed since its smoke run passed" in err
    assert f"run `lockpipe smoke --gpu {PASSING}` again" in err and "--force" in err
    assert _deploy(repo, PASSING, "--force") == 0
    unit = (repo[1] / "deploy" / f"{PASSING}.container").read_text()
    assert "changed since (forced)." in unit
    if change is not _new_revision:  # the new revision's file is not in the store to run
        assert _smoke(monkeypatch, repo, PASSING, GOOD)[0] == 0  # tested again: deployed
        assert _deploy(repo, PASSING) == 0


def test_a_passing_result_written_before_the_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    assert _smoke(monkeypatch, repo, PASSING, GOOD)[0] == 0
    path = repo[1] / "smoke" / "smoke.json"
    old = json.loads(path.read_text())
    for entry in old["reports"]:
        entry.pop("served", None)  # as the files before it was kept
    path.write_text(json.dumps(old))
    capsys.readouterr()
    assert _deploy(repo, PASSING) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{PASSING}: its smoke run that passed on image {IMAGE[7:19]}" in err
    assert "predates the record of what a run served" in err and "Traceback" not in err
    assert f"run `lockpipe smoke --gpu {PASSING}` again" in err


def test_an_external_target_is_refused_after_its_serve_env_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """frank-large's case: smoke runs it only with --gpu on the host that holds it, so its
    passing result is written here as that run writes it, for the lock as it was."""
    repo = _repo(tmp_path)
    lock, state, _ = repo
    ext, ref = "ext-app", "registry.example/team/ext-app@sha256:" + "c" * 64

    def external(document: dict[str, Any]) -> None:
        document["targets"][ext] = {
            "external": {"image": ref.split("@")[0], "digest": ref.split("@")[1]},
            "serve": {"runtime": "llama.cpp", "port": 8080, "model": "app",
                      "env": {"LLAMA_ARG_CTX_SIZE": "8192"}}}  # fmt: skip

    _edit(lock, external)
    loaded = load_lock(lock)
    report = SmokeReport(target=ext, image=ref, image_id=IMAGE, engine="podman",
                         results=(CheckResult(name="ready", ok=True),),
                         served=served(loaded, loaded.target(ext)))  # fmt: skip
    write_json([report], state / "smoke" / "smoke.json")
    assert _deploy(repo, ext) == 0
    _edit(lock, lambda d: d["targets"][ext]["serve"]["env"].update(LLAMA_ARG_CTX_SIZE="262144"))
    capsys.readouterr()
    assert _deploy(repo, ext) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{ext}: the lock's serve section (targets.{ext}.serve" in err
    assert f"run `lockpipe smoke --gpu {ext}` again" in err


def test_a_result_marked_ok_that_lists_a_failed_check_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A damaged (or hand-edited) entry saying ok while one of its checks failed passed the
    gate: the gate read only ``ok``."""
    repo = _repo(tmp_path)
    assert _smoke(monkeypatch, repo, FAILING, WRONG)[0] == CheckFailed.return_code
    path = repo[1] / "smoke" / "smoke.json"
    edited = json.loads(path.read_text())
    edited["reports"][0]["ok"] = True
    path.write_text(json.dumps(edited))
    capsys.readouterr()
    assert _deploy(repo, FAILING) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{path}: not a smoke report: reports[0].ok is true, but its check" in err
    assert "failed" in err and "Traceback" not in err


def test_an_expectations_path_that_is_a_folder_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lock, state, _ = _repo(tmp_path)
    folder = tmp_path / "expectations"
    folder.mkdir()
    code = _smoke(monkeypatch, (lock, state, folder), PASSING, GOOD)[0]
    err = capsys.readouterr().err
    assert code == SmokeConfigError.return_code, err
    assert f"{folder}: cannot read it (Is a directory); pass a file" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
