"""``lockpipe deploy`` as a user runs it, at its boundaries: the smoke gate, the payload
store, what the unit runs at start, and the free text it writes.

Each test renders with ``--no-inspect --no-verify --podman-version 5.4``, so nothing
outside the test's folder is read or run (``test_deploy_install`` runs the host's tools).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.deploy.unit import parse_unit
from lockpipe.errors import DeployError, UsageError
from lockpipe.imagebuild.records import write_record
from lockpipe.lock.fingerprint import served
from lockpipe.lock.model import Lock, load_lock
from lockpipe.payloads.store import file_path
from tests.unit.test_deploy_render import IMAGE_ID, LOCK, REPO, pinned

TARGET = "llama-cpu"  # no GPU, one payload, port 8080
LOCKED = load_lock(LOCK)


def built(state: Path, target: str = TARGET) -> None:
    """A build record of IMAGE_ID for ``target``, from the inputs the frozen lock pins."""
    lock = load_lock(LOCK)
    record = pinned(target, lock.target(target).tag).record
    write_record(state, record.__class__(**{**vars(record),
                                            "fingerprint": lock.fingerprints[target]}))  # fmt: skip


def result(target: str = TARGET, *, ok: bool = True, image_id: str = f"sha256:{IMAGE_ID}",
           store: Path | None = None, lock: Lock = LOCKED,
           **extra: Any) -> dict[str, Any]:  # fmt: skip
    """One smoke.json entry, as ``lockpipe smoke`` writes it (of ``lock``, by default the
    frozen one)."""
    entry: dict[str, Any] = {
        "target": target, "image": "localhost/lockpipe/llama-cpu:b10069", "image_id": image_id,
        "engine": "podman", "ok": ok, "seconds": 1.0, "log_path": None,
        "results": [{"name": "generation[0]", "status": "PASS" if ok else "FAIL",
                     "detail": "" if ok else "no answer"}],
        "served": served(lock, lock.target(target)),  # what the run served
    }  # fmt: skip
    if store is not None:
        entry["store"] = str(store)
    return {**entry, **extra}


def smoke_json(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "state" / "smoke" / "smoke.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def fetched(store: Path, target: str = TARGET) -> Path:
    """Place ``target``'s payloads in ``store`` as the payloads verb leaves them."""
    lock = load_lock(LOCK)
    for name in lock.target(target).payloads:
        payload = lock.payloads[name]
        for file in payload.files:  # every file, as deploy checks each one a command reads
            path = file_path(store, payload, file)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"GGUF")
    return store


def deploy(tmp_path: Path, *args: str, target: str = TARGET) -> int:
    return main(["deploy", target, "--lock", str(LOCK), "--state", str(tmp_path / "state"),
                 "--podman-version", "5.4", "--no-inspect", "--no-verify",
                 "--out", str(tmp_path / "out"), *args])  # fmt: skip


def unit_text(tmp_path: Path, target: str = TARGET) -> str:
    return (tmp_path / "out" / f"{target}.container").read_text()


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LOCKPIPE_STORE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the default store lives under it
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


# --- 1. the smoke gate ---------------------------------------------------------------------


def test_an_image_without_a_smoke_result_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    fetched(tmp_path / "home" / ".cache" / "lockpipe" / "store")
    assert deploy(tmp_path) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{TARGET}: no smoke report at {tmp_path}/state/smoke/smoke.json" in err
    assert f"lockpipe smoke --gpu {TARGET}" in err and "--force" in err
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


def test_a_result_of_another_target_does_not_let_this_one_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result("llama-cuda")]})
    assert deploy(tmp_path) == DeployError.return_code
    assert "has no smoke result for it" in capsys.readouterr().err


def test_force_deploys_an_untested_image_and_the_unit_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    assert deploy(tmp_path, "--force") == 0
    assert "WARNING (--force)" in capsys.readouterr().err
    assert "deployed untested (forced)" in unit_text(tmp_path)


def test_a_run_that_started_no_image_is_named_not_shown_as_a_question_mark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    setup = result(ok=False, image="", image_id="", at="2026-11-02T10:00:00Z",
                   results=[{"name": "setup", "status": "FAIL",
                             "detail": "payloads: 404 from the mirror\nmore"}])  # fmt: skip
    smoke_json(tmp_path, {"reports": [setup]})
    assert deploy(tmp_path) == DeployError.return_code
    err = capsys.readouterr().err
    assert "image ?" not in err
    assert "has no smoke result for image 3f3f3f3f3f3f, only for a run that started no image" in err
    assert "at 2026-11-02T10:00:00Z (payloads: 404 from the mirror)" in err


def test_a_result_for_another_image_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(image_id="sha256:" + "ee" * 32)]})
    assert deploy(tmp_path) == DeployError.return_code
    assert "only for image eeeeeeeeeeee (passed)" in capsys.readouterr().err


def test_a_published_image_without_a_passing_run_of_it_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = "registry.example/lockpipe/llama-cpu@sha256:" + "cd" * 32
    assert deploy(tmp_path, "--image", image) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"lockpipe smoke --gpu --image {image} {TARGET}" in err
    smoke_json(tmp_path, {"reports": [result(image=image, image_id="sha256:" + "dd" * 32)]})
    assert deploy(tmp_path, "--image", image) == 0
    assert f"Smoke: passed on {image}" in unit_text(tmp_path)


# --- 4. smoke.json of an unexpected shape --------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "found"),
    [
        ([], "found a list"),
        ({"reports": {}}, "found an object whose reports is an object"),
        ({"results": []}, "found an object without reports"),
        ({"reports": ["llama-cpu"]}, "reports[0] is a string, not an object"),
        ({"reports": [{"target": "llama-cpu"}]}, "reports[0].image is missing"),
        ({"reports": [{**result(), "results": [1]}]}, "reports[0].results[0] is not a check"),
        ({"reports": [{**result(), "ok": "yes"}]}, "reports[0].ok is a string"),
    ],
)
def test_a_smoke_report_of_another_shape_is_one_line_naming_the_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: object, found: str
) -> None:
    built(tmp_path / "state")
    path = smoke_json(tmp_path, doc)
    assert deploy(tmp_path) == DeployError.return_code
    (line,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert line.startswith(f"error: {path}: not a smoke report: ") and found in line
    assert "run lockpipe smoke again" in line


def test_a_list_for_a_smoke_report_is_no_traceback_from_the_command_line(tmp_path: Path) -> None:
    built(tmp_path / "state")
    path = smoke_json(tmp_path, [{"target": TARGET, "ok": True}])
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "deploy", TARGET, "--lock", str(LOCK), "--state",
         str(tmp_path / "state"), "--podman-version", "5.4", "--no-inspect", "--no-verify",
         "--out", str(tmp_path / "out")],
        cwd=REPO, text=True, capture_output=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert out.returncode == DeployError.return_code, out.stderr
    assert "Traceback" not in out.stderr
    assert f"error: {path}: not a smoke report: expected an object" in out.stderr


def test_a_lock_without_the_targets_fingerprint_is_refused_like_plan_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Deploy skipped the fingerprint check when the lock had none for the target, and
    pinned an image built from any inputs; plan and build refuse that lock (exit 3)."""
    doc = json.loads(LOCK.read_text())
    del doc["fingerprints"][TARGET]
    lock = tmp_path / "repo" / "locks" / "digests.json"
    lock.parent.mkdir(parents=True)
    lock.write_text(json.dumps(doc))
    (tmp_path / "repo" / "images").symlink_to(REPO / "images")
    built(tmp_path / "state")
    fetched(tmp_path / "home" / ".cache" / "lockpipe" / "store")
    smoke_json(tmp_path, {"reports": [result()]})
    argv = ["deploy", TARGET, "--lock", str(lock), "--state", str(tmp_path / "state"),
            "--podman-version", "5.4", "--no-inspect", "--no-verify",
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{lock}: fingerprints.{TARGET} is missing; run nox -s lock" in err
    assert "--force" in err and "Traceback" not in err
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()
    assert main([*argv, "--force"]) == 0
    assert f"WARNING (--force): {lock}: fingerprints.{TARGET} is missing" in capsys.readouterr().err


# --- 2. the payload store ------------------------------------------------------------------


def test_the_unit_mounts_the_store_the_smoke_run_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = fetched(tmp_path / "smoked-store")
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=store)]})
    assert deploy(tmp_path) == 0
    volumes = parse_unit(unit_text(tmp_path)).values("Container", "Volume")
    assert volumes == [f"{store}:/store:ro"]
    assert f"store: {store}, the one the smoke run mounted" in capsys.readouterr().err


def test_a_store_whose_path_holds_a_colon_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The smoke run mounts the store with --mount, which takes a ':' in a path; the unit's
    Volume= is podman's --volume, which splits on it: podman 4.3 refuses
    ``-v /tmp/h18/st:v2:/store:ro`` ("incorrect volume format", measured), so such a unit
    would fail at every start."""
    store = fetched(tmp_path / "models:v2")
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=store)]})
    assert deploy(tmp_path) == DeployError.return_code
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: the payload store {store} has a ':' in its path"), line
    assert line.endswith("move the store to a folder whose path has none, and pass that as --store")
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


def test_install_refuses_a_store_without_the_payloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result()]})
    units = tmp_path / "units"
    code = deploy(tmp_path, "--store", "/nonexistent", "--install", str(units))
    assert code == DeployError.return_code
    err = capsys.readouterr().err
    assert "payloads gemma-4-12b-q4_k_m are not there (/nonexistent does not exist)" in err
    assert f"lockpipe payloads --store /nonexistent {TARGET}" in err
    assert not units.exists()


def test_rendering_for_another_host_only_warns_about_missing_payloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result()]})
    assert deploy(tmp_path, "--store", str(tmp_path / "elsewhere")) == 0
    err = capsys.readouterr().err
    assert "warning: llama-cpu's payloads gemma-4-12b-q4_k_m are not in" in err


# --- 2. what the unit runs at start --------------------------------------------------------


def test_the_unit_runs_nothing_from_this_checkout_or_venv(tmp_path: Path) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert deploy(tmp_path) == 0
    text = unit_text(tmp_path)
    for local in (sys.prefix, sys.executable, str(REPO), "-m lockpipe", "deploy --wait-port"):
        assert local not in text, local
    (pre,) = parse_unit(text).values("Service", "ExecStartPre")
    assert pre.startswith('/bin/sh -c "') and pre.endswith('" wait-port 8080 90')


@pytest.mark.parametrize(("given", "waits"), [("0.5", "1"), ("2.01", "3"), ("0", "0")])
def test_a_fractional_port_timeout_is_rounded_up_to_whole_seconds(
    tmp_path: Path, given: str, waits: str
) -> None:
    """The unit's port wait counts whole seconds: --port-timeout 0.5 wrote wait-port 8080 0
    (int() rounded it down), a wait that gives up at once."""
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert deploy(tmp_path, "--port-timeout", given) == 0
    text = unit_text(tmp_path)
    (pre,) = parse_unit(text).values("Service", "ExecStartPre")
    assert pre.endswith(f'" wait-port 8080 {waits}')
    assert parse_unit(text).values("Service", "TimeoutStartSec") == [str(900 + int(waits))]


# --- 3. free text in the unit --------------------------------------------------------------


def test_percent_and_dollar_in_the_health_command_reach_podman_unexpanded(tmp_path: Path) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    cmd = 'test "$(date -u +%F)" != 1970-01-01 && curl -fsS -w %{http_code} http://x/health'
    assert deploy(tmp_path, "--health-cmd", cmd) == 0
    (health,) = parse_unit(unit_text(tmp_path)).values("Container", "HealthCmd")
    assert health == cmd.replace("%", "%%").replace("$", "$$")


@pytest.mark.parametrize(
    ("cmd", "why"),
    [
        ("curl -f http://x/health\nexit 0", "holds a line break"),
        ("curl -f http://x/health \\", "ends with a backslash"),
        ('"curl -f http://x/health"', "starts or ends with a double quote"),
        ('sh -c "curl -f http://x/health"', "starts or ends with a double quote"),
        (" curl -f http://x/health", "starts or ends with whitespace"),
    ],
)
def test_a_health_command_no_unit_line_can_hold_is_refused_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cmd: str, why: str
) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert deploy(tmp_path, "--health-cmd", cmd) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"error: --health-cmd {cmd!r} {why}" in err
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


@pytest.mark.parametrize("bind", ["localhost", "127.0.0.1\nExecStartPost=/bin/true", "1.2.3"])
def test_bind_must_be_an_ip_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bind: str
) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert deploy(tmp_path, "--bind", bind) == DeployError.return_code
    assert f"--bind {bind!r} is not an IP address" in capsys.readouterr().err


def test_an_ipv6_bind_is_bracketed(tmp_path: Path) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert deploy(tmp_path, "--bind", "::1") == 0
    assert parse_unit(unit_text(tmp_path)).values("Container", "PublishPort") == ["[::1]:8080:8080"]


def test_an_image_reference_that_would_add_a_unit_line_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = "r.example/x@sha256:" + "ab" * 32 + "\nExecStartPost=/bin/true"
    assert deploy(tmp_path, "--image", image, "--force") == DeployError.return_code
    err = capsys.readouterr().err  # refused as no reference by digest, before the unit
    assert "error: --image 'r.example/x@sha256:" in err and "not an image reference" in err
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


@pytest.mark.parametrize(
    ("option", "value"),
    [("--port-timeout", "nan"), ("--port-timeout", "inf"), ("--port-timeout", "-5"),
     ("--start-timeout", "-900"), ("--start-timeout", "\u00b2")],
)  # fmt: skip
def test_a_timeout_that_is_no_number_of_seconds_is_a_usage_error(
    option: str, value: str, tmp_path: Path
) -> None:
    """--port-timeout nan was a ValueError traceback (int(nan)), inf an OverflowError;
    -5 made the unit's port wait give up at once, and --start-timeout -900 wrote
    TimeoutStartSec=-810, which systemd ignores."""
    built(tmp_path / "state")
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "deploy", TARGET, "--lock", str(LOCK), "--state",
         str(tmp_path / "state"), "--podman-version", "5.4", "--no-inspect", "--no-verify",
         "--force", "--out", str(tmp_path / "out"), option, value],
        cwd=REPO, text=True, capture_output=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == UsageError.return_code, out.stderr
    assert f"argument {option}: {value!r} is not a " in out.stderr
    assert "number of seconds (0 or more)" in out.stderr
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


def test_a_port_timeout_over_an_hour_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--port-timeout 1e300 rendered wait-port with a 301-digit count and TimeoutStartSec
    past what systemd reads (its limit is some 584,000 years of microseconds)."""
    built(tmp_path / "state")
    with pytest.raises(SystemExit) as info:
        deploy(tmp_path, "--force", "--port-timeout", "1e300")
    assert info.value.code == UsageError.return_code
    err = capsys.readouterr().err
    assert "argument --port-timeout: '1e300' is over 3600 seconds" in err
    assert "ss -tanp" in err
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


def test_a_podman_version_of_5000_digits_is_a_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """int() refuses over 4,300 digits: --podman-version 111…1.2 was its ValueError
    traceback (podman --version output is read by the same parse)."""
    built(tmp_path / "state")
    assert deploy(tmp_path, "--force", "--podman-version", "1" * 5000 + ".2") == 64
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.startswith("error: --podman-version '1111") and "not a podman version" in line
    assert len(line) < 200, line  # the value cut to a line's worth
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


@pytest.mark.parametrize("odd", ["\x1c", "\x85", "\u2028", "\x0b", "\x0c"])
def test_verify_without_quadlet_checks_the_command_the_unit_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: str
) -> None:
    """The unit was read back with splitlines(), which ends a line at \\x1c, \\x85, \\u2028
    and more where systemd does not: --health-cmd 'x\\x1cy' was verified as 'x', so verify
    passed a service that runs another command than the unit's."""
    from lockpipe.cli import deploy as deploying
    from lockpipe.deploy.unit import split_words

    checked: list[str] = []

    def systemd_verify(text: str, name: str, *, user: bool) -> str:
        checked.append(text)
        return ""

    monkeypatch.setattr(deploying, "find_generator", lambda: None)
    monkeypatch.setattr(deploying, "systemd_verify", systemd_verify)
    built(tmp_path / "state")
    health = f"curl -f http://127.0.0.1:8080/health{odd}exit 0"
    code = main(["deploy", TARGET, "--lock", str(LOCK), "--state", str(tmp_path / "state"),
                 "--podman-version", "5.4", "--no-inspect", "--force", "--health-cmd", health,
                 "--out", str(tmp_path / "out")])  # fmt: skip
    assert code == 0
    assert f"HealthCmd={health}\n" in unit_text(tmp_path)
    (service,) = checked
    (start,) = [x for x in service.split("\n") if x.startswith("ExecStart=")]
    words = split_words(start.removeprefix("ExecStart="))
    assert words[words.index("--health-cmd") + 1] == health


@pytest.mark.parametrize("given", ["18446744073709", "9" * 30, "9" * 5000])
def test_a_start_timeout_systemd_cannot_read_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """TimeoutStartSec=18446744073709 and more overflow systemd's microseconds (parse_time:
    -ERANGE, so systemd ignores the line and the model gets the 90 s default); before, deploy
    wrote it and exited 0, and 5000 digits were int()'s ValueError."""
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    with pytest.raises(SystemExit) as caught:
        deploy(tmp_path, "--start-timeout", given)
    assert caught.value.code == UsageError.return_code
    err = capsys.readouterr().err
    assert "more than systemd reads as a TimeoutStartSec" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_longest_start_timeout_systemd_reads_is_written(tmp_path: Path) -> None:
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    longest = str((2**64 - 1) // 10**6 - 2 - 3600)
    assert deploy(tmp_path, "--start-timeout", longest, "--port-timeout", "3600") == 0
    (timeout,) = parse_unit(unit_text(tmp_path)).values("Service", "TimeoutStartSec")
    assert int(timeout) + 1 < (2**64 - 1) // 10**6  # what systemd's parse_time takes


@pytest.mark.parametrize("folder", ["my store", 'a"b', "a'b", "a\\b", "a$b"])
def test_a_store_whose_path_systemd_would_split_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    """quadlet copies Volume='s host path into RequiresMountsFor= as it is, and systemd
    splits that at whitespace and reads quotes and backslashes ('RequiresMountsFor= path is
    not absolute, ignoring: store', systemd-analyze verify): the unit no longer waited for
    the store's mount, and deploy wrote it and exited 0."""
    store = fetched(tmp_path / folder)
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=store)]})
    assert deploy(tmp_path) == DeployError.return_code
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: the payload store {store} has whitespace, a quote, a "), line
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


@pytest.mark.parametrize("bind", ["fe80::1%eth0", "fe80::1%x]:9"])
def test_a_bind_address_with_an_ipv6_zone_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bind: str
) -> None:
    """Python's ip_address takes any text after '%': 'fe80::1%x]:9' became
    PublishPort=[fe80::1%%x]:9]:8080:8080, which podman's --publish cannot read."""
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert deploy(tmp_path, "--bind", bind) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"error: --bind {bind!r} names an IPv6 zone" in err, err
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


@pytest.mark.parametrize(
    "image", ["Not A/Ref@sha256:zz", f"localhost/x@sha256:{'a' * 65}", "localhost/x:1"]
)
def test_an_image_that_is_no_reference_by_digest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], image: str
) -> None:
    """'@sha256:' in the text was enough: 'Not A/Ref@sha256:zz' was written into Image=
    (with --force), where smoke --image refuses it (issue 18)."""
    built(tmp_path / "state")
    code = deploy(tmp_path, "--image", image, "--force")
    err = capsys.readouterr().err
    assert code == DeployError.return_code, err
    assert "--image " in err and ("not an image reference" in err or "by digest" in err), err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
