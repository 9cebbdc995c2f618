"""``lockpipe smoke`` then ``lockpipe deploy``, as a user runs them: the gate sees every run.

The smoke runs use the shared FAKE engine of tests/fake_openai.py, whose container is a
FAKE llama-server: a real HTTP server on 127.0.0.1, on the host port the runner chose,
answering /health, /v1/models, /v1/completions and /metrics. Deploy renders for podman
5.4 without inspecting the image. Two CPU targets stand for the fleet's llama-cuda (whose
smoke fails) and llama-cpu (whose smoke passes afterwards).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from lockpipe.cli import serve
from lockpipe.cli.main import main
from lockpipe.errors import CheckFailed, DeployError, SmokeError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.model import load_lock
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
