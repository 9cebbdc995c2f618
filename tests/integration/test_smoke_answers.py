"""``lockpipe smoke`` against a server whose JSON answers have an unexpected shape.

The server is a FAKE of an OpenAI-compatible llama-server (tests/fake_openai.py): a
real HTTP server on 127.0.0.1, started by a FAKE engine's ``run`` on the host port the
runner chose, and stopped by its ``stop``. Each answer is right but for the one a test
replaces. A wrong
shape must be a failed check whose one-line reason names the endpoint; the run goes on,
``smoke.json`` and ``smoke.junit.xml`` are written, and no traceback reaches the user.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli import serve
from lockpipe.cli.main import main
from lockpipe.errors import CheckFailed, SmokeConfigError
from lockpipe.imagebuild.plan import plan_target
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.model import load_lock
from lockpipe.smoke import checks as smoke_checks
from tests.fake_openai import GOOD, IMAGE, METRICS, STREAM, ServingEngine, Trickle
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration


def _repo(tmp_path: Path, ready: object = 20) -> tuple[Path, Path, Path]:
    """(lock, state, expectations): target ``app`` on the CPU, with a vision check and a
    throughput probe, and a build record of IMAGE by the fake engine."""
    document = doc()
    document["targets"]["app"]["build_args"]["GGML_CUDA"] = "OFF"
    document["targets"]["app"]["serve"]["modalities"] = ["text", "vision"]
    lock = make_repo(tmp_path, document)
    state = tmp_path / "state"
    loaded = load_lock(lock)
    write_record(state, BuildRecord(
        target="app", tag=loaded.target("app").tag, image_id=IMAGE, engine="podman",
        key=build_key(plan_target(loaded, "app"), "podman", "5.0"), engine_version="5.0",
        reproducible=True, reproducible_how="fake", fingerprint="f", source_date_epoch=0,
        built_at="now", seconds=0.0,
    ))  # fmt: skip
    expect = tmp_path / "smoke.json"
    expect.write_text(json.dumps({"version": 1, "targets": {"app": {
        "ready_seconds": ready,
        "generation": [{"prompt": "1, 2, 3, 4, 5,", "expect": ["6"]}],
        "image": {"prompt": "Which colour?", "expect": ["red"], "rgb": [255, 0, 0]},
        "probes": {"kv=default,ctx=default,par=default": {"pp@64": {"value": 1, "unit": "t/s"}}},
    }}}))  # fmt: skip
    return lock, state, expect


def _smoke(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any],
           ready: object = 20) -> tuple[int, dict[str, Any]]:  # fmt: skip
    """Exit code of ``lockpipe smoke app`` and its checks by name, from smoke.json."""
    lock, state, expect = _repo(tmp_path, ready)
    monkeypatch.setattr(serve, "get_engine", lambda name: ServingEngine(answers))
    out = tmp_path / "out"
    code = main(["smoke", "app", "--engine", "podman", "--lock", str(lock), "--state",
                 str(state), "--store", str(tmp_path / "store"), "--expect", str(expect),
                 "--out", str(out), "--quiet"])  # fmt: skip
    assert (out / "smoke.junit.xml").is_file()
    (report,) = json.loads((out / "smoke.json").read_text())["reports"]
    return code, {c["name"]: c for c in report["results"]}


def _failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str], answers: dict[str, Any],
             ready: float = 20) -> tuple[dict[str, str], dict[str, Any]]:  # fmt: skip
    """(the failed checks' details, all checks) of a smoke run that must fail as a check
    does: its exit code, and no traceback or error line on stderr."""
    code, checks = _smoke(tmp_path, monkeypatch, answers, ready)
    err = capsys.readouterr().err
    assert code == CheckFailed.return_code, err
    assert "Traceback" not in err and "error:" not in err
    return {n: c["detail"] for n, c in checks.items() if c["status"] == "FAIL"}, checks


def test_right_answers_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, checks = _smoke(tmp_path, monkeypatch, GOOD)
    assert code == 0, {n: c["detail"] for n, c in checks.items() if c["status"] != "PASS"}


@pytest.mark.parametrize(
    ("endpoint", "answer", "check", "reason"),
    [
        ("/v1/models", [{"id": "app"}], "models",
         "/v1/models: the answer is a list, not an object"),
        ("/v1/models", {"data": {"id": "app"}}, "models",
         "/v1/models: data is an object, not a list"),
        ("/v1/models", {"data": [{"name": "app"}]}, "models",
         "/v1/models: the answer has no data[0].id"),
        ("/v1/models", {"data": ["app"]}, "models",
         "/v1/models: data[0] is a string, not an object"),
        ("/v1/completions", ["6"], "generation[0]",
         "/v1/completions: the answer is a list, not an object"),
        ("/v1/completions", {"choices": []}, "generation[0]",
         "/v1/completions: the answer has no choices[0]"),
        ("/v1/completions", {"choices": [{"text": None}]}, "generation[0]",
         "/v1/completions: choices[0].text is null, not a string"),
        ("/v1/completions", {"choices": [{"text": "6"}], "usage": [4]}, "generation[0]",
         "/v1/completions: usage is a list, not an object"),
        ("/v1/completions", {"choices": [{"text": "6"}], "usage": {"completion_tokens": "4"}},
         "generation[0]", "/v1/completions: usage.completion_tokens is a string, not an integer"),
        ("/v1/chat/completions", {"choices": [{"message": "red"}]}, "image",
         "/v1/chat/completions: choices[0].message is a string, not an object"),
        ("/v1/chat/completions", {"choices": [{"message": {"content": None}}]}, "image",
         "/v1/chat/completions: choices[0].message.content is null, not a string"),
        ("/v1/models", b"[" * 100_000, "models",
         "/v1/models: the answer is nested too deeply to read"),
        ("/v1/completions", b'{"choices": ' + b"[" * 100_000, "generation[0]",
         "/v1/completions: the answer is nested too deeply to read"),
        ("/v1/models", {"data": [{"id": "app"}, {"id": "\ud800"}]}, "models",
         "/v1/models: data[1].id is not text: it holds the lone surrogate '\\ud800'"),
        ("/v1/completions", {"choices": [{"text": " 6\udc80"}]}, "generation[0]",
         "/v1/completions: choices[0].text is not text: it holds the lone surrogate '\\udc80'"),
        ("/v1/completions", {"choices": [{"text": "6"}], "usage": {"completion_tokens": 10**400}},
         "generation[0]", "/v1/completions: usage counts past 2**53 tokens"),
        (STREAM, {"choices": [], "usage": {"completion_tokens": -2}}, "throughput probes",
         "/v1/completions: usage counts -2 tokens"),
        (STREAM, ["the"], "throughput probes",
         "/v1/completions (streamed): an event is a list, not an object"),
        (STREAM, {"choices": [], "usage": 4}, "throughput probes",
         "/v1/completions (streamed): usage is an integer, not an object"),
    ],
)  # fmt: skip
def test_a_wrong_shape_is_a_failed_check_naming_the_endpoint(
    endpoint: str, answer: Any, check: str, reason: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    failed, checks = _failing(tmp_path, monkeypatch, capsys, {**GOOD, endpoint: answer})
    assert list(failed) == [check], failed
    assert reason in failed[check] and "\n" not in failed[check], failed[check]
    assert checks["log scan"]["status"] == "PASS"  # the run went on to the end


@pytest.mark.parametrize("value", ["NaN", "+Inf"])
def test_a_counter_that_is_not_a_number_fails_the_checks_that_read_it(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prompt-seconds counter of NaN made every pp rate NaN, and NaN is below no floor:
    the throughput probe passed its baseline "within tolerance" whatever the server did."""
    metrics = METRICS.replace("{prompt_seconds}", value)
    code, checks = _smoke(tmp_path, monkeypatch, {**GOOD, "/metrics": metrics})
    assert code == CheckFailed.return_code
    failed = {n: c["detail"] for n, c in checks.items() if c["status"] == "FAIL"}
    assert list(failed) == ["metrics counters", "throughput probes"], failed
    for detail in failed.values():
        assert f"llamacpp:prompt_seconds_total is {value.lstrip('+').lower()}" in detail, detail


# A trickle that would take 60 s to end, against deadlines of a few seconds: each read
# of the answer used to wait for bytes with no limit on the whole, and held the run.
SLOW = Trickle(length=120, every=0.5)


@pytest.mark.parametrize(
    ("endpoint", "answer", "check", "reason"),
    [
        ("/health", Trickle(status=503, length=120, every=0.5), "ready",
         "/health not ready before the deadline (last: http://127.0.0.1:"),
        ("/v1/models", SLOW, "models", "/v1/models did not finish its answer in time"),
        ("/v1/completions", SLOW, "generation[0]",
         "/v1/completions did not finish its answer in time"),
        ("/v1/chat/completions", SLOW, "image",
         "/v1/chat/completions did not finish its answer in time"),
        (STREAM, SLOW, "throughput probes", "/v1/completions did not finish its answer in time"),
        ("/metrics", SLOW, "metrics", "/metrics did not finish its answer in time"),
        ("/health", Trickle(length=120, every=0.5, in_headers=True), "ready",
         "/health did not send its status and headers in time"),
        ("/v1/models", Trickle(length=120, every=0.5, in_headers=True), "models",
         "/v1/models did not send its status and headers in time"),
        (STREAM, Trickle(length=120, every=0.5, in_headers=True), "throughput probes",
         "/v1/completions did not send its status and headers in time"),
        ("/v1/models", Trickle(length=64 << 20, every=0), "models",
         "/v1/models answered more than 8,388,608 bytes"),
    ],
)  # fmt: skip
def test_an_answer_that_never_ends_fails_its_check_at_the_deadline(
    endpoint: str, answer: Trickle, check: str, reason: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    for name in ("ANSWER_SECONDS", "GENERATION_SECONDS", "STREAM_SECONDS"):
        monkeypatch.setattr(smoke_checks, name, 3.0)
    start = time.monotonic()
    failed, _ = _failing(tmp_path, monkeypatch, capsys, {**GOOD, endpoint: answer}, ready=3)
    took = time.monotonic() - start
    assert check in failed, failed
    assert reason in failed[check], failed[check]
    assert took < 40, f"the run took {took:.0f} s: a deadline of 3 s was not kept"


def test_an_expectation_of_the_wrong_kind_stops_the_run_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "ready_seconds": "5m" was float()'s traceback, after the engine was asked."""
    lock, state, expect = _repo(tmp_path, ready="5m")
    monkeypatch.setattr(serve, "get_engine", lambda name: ServingEngine(GOOD))
    code = main(["smoke", "app", "--engine", "podman", "--lock", str(lock), "--state",
                 str(state), "--store", str(tmp_path / "store"), "--expect", str(expect),
                 "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == SmokeConfigError.return_code, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{expect}: targets.app.ready_seconds: must be a number of seconds" in err, err
    assert not (tmp_path / "out" / "smoke.json").exists()


def test_an_answer_that_looks_like_markup_is_shown_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table read each detail as rich markup: an answer holding "[/x]" raised
    MarkupError before smoke.json was written, and "[red]" vanished from the line."""
    answers = copy.deepcopy(GOOD)
    answers["/v1/completions"]["choices"][0]["text"] = " 6, 7 [/x] [red]8"
    lock, state, expect = _repo(tmp_path)
    monkeypatch.setattr(serve, "get_engine", lambda name: ServingEngine(answers))
    code = main(["smoke", "app", "--engine", "podman", "--lock", str(lock), "--state",
                 str(state), "--store", str(tmp_path / "store"), "--expect", str(expect),
                 "--out", str(tmp_path / "out")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err, err
    assert "[/x] [red]8" in out.replace("\n", ""), out
    assert json.loads((tmp_path / "out" / "smoke.json").read_text())["reports"][0]["ok"]
