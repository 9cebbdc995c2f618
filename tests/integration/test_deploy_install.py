"""Deploy against this host: a held port blocks install, an old instance is stopped first,
the unit's port wait runs with the host's shell, systemd and podman check the units.

systemd-analyze verify runs on the service systemd would run: podman's generator output
where installed, else the equivalent plain ``podman run`` service. Debian 12's podman 4.3
has no quadlet (it came in 4.4), so there the generator test says so and skips; with a
podman >= 4.4 it must run (on CI, its absence fails). systemctl is a FAKE on PATH where a
test stops or starts a unit: no test touches this host's systemd.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.cli.deploy import do_deploy, podman_version
from lockpipe.cli.main import main
from lockpipe.deploy import cdi, keys
from lockpipe.deploy.install import default_dir, install
from lockpipe.deploy.render import DeployInputs, Health, render_quadlet
from lockpipe.deploy.unit import parse_unit, split_args
from lockpipe.deploy.verify import find_generator, generator_dryrun, plain_service, systemd_verify
from lockpipe.errors import DeployError, UsageError
from lockpipe.imagebuild.records import BuildRecord, write_record
from lockpipe.lock.model import load_lock
from lockpipe.smoke.ports import PortBusy, free_port
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable
from tests.unit.test_deploy_cdi import NVIDIA_YAML
from tests.unit.test_deploy_cli import built, fetched, result, smoke_json
from tests.unit.test_deploy_render import IMAGE_ID, LOCK, REPO, inputs

pytestmark = pytest.mark.integration
# A health command whose specifiers systemd would expand (%F: refused by systemd 252,
# whose table has no %F) and whose variable it would substitute, were they not escaped.
HEALTH = 'test -n "$(date -u +%F)" && curl -fsS -o /dev/null http://127.0.0.1:7771/health'


@pytest.fixture
def listener() -> Iterator[int]:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        yield port


def test_held_port_blocks_install_with_the_socket_table(listener: int, tmp_path: Path) -> None:
    with pytest.raises(PortBusy) as info:
        install("x\n", "frank-small", tmp_path, port=listener, port_timeout=0.3)
    text = str(info.value)
    assert f"port {listener} is still in use" in text
    assert "LISTEN" in text and f"127.0.0.1:{listener}" in text and f"pid {os.getpid()}" in text
    assert not (tmp_path / "frank-small.container").exists()


def test_install_writes_the_unit_once_the_port_is_clear(tmp_path: Path) -> None:
    done = install("[Container]\n", "llama-cuda", tmp_path / "q", port=free_port(),
                   port_timeout=1.0)  # fmt: skip
    path = done.path
    assert path.read_text() == "[Container]\n" and path.name == "llama-cuda.container"
    assert [p.name for p in path.parent.iterdir()] == ["llama-cuda.container"]  # no temp left
    assert not done.stopped


def test_default_install_dir_per_scope() -> None:
    assert default_dir({"HOME": "/home/u"}, root=False) == Path(
        "/home/u/.config/containers/systemd"
    )
    assert default_dir({}, root=True) == Path("/etc/containers/systemd")


def _verify_needs() -> None:
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze is not installed (apt-get install systemd)")
    if not Path("/usr/bin/podman").exists():
        unavailable("podman is not installed at /usr/bin/podman, the ExecStart program")


@pytest.mark.parametrize(("target", "mode"), [("llama-cuda", "manual"), ("frank-small", "cdi")])
def test_systemd_analyze_verifies_the_rendered_service(target: str, mode: str) -> None:
    _verify_needs()
    unit = render_quadlet(inputs(target, "manual" if mode == "manual" else "cdi"))
    service = plain_service(parse_unit(unit.render())).render()
    assert "ExecStart=/usr/bin/podman run --cidfile=%t/%N.cid" in service
    assert f" {IMAGE_ID} " in service and "--sdnotify=healthy" in service
    systemd_verify(service, target, user=os.geteuid() != 0)


def test_systemd_analyze_rejects_a_broken_service() -> None:
    _verify_needs()
    with pytest.raises(DeployError, match="systemd-analyze verify rejected"):
        systemd_verify("[Service]\nExecStart=/nonexistent/prog\n", "broken", user=False)


def test_systemd_analyze_rejects_a_line_systemd_would_ignore() -> None:
    """systemd-analyze verify exits 0 on a value it cannot parse: it says it ignores the
    line (a TimeoutStartSec=-810 from --start-timeout -900 left the 90 s default), so only
    its words tell; the unit systemd would run is not the one rendered."""
    _verify_needs()
    service = "[Service]\nExecStart=/bin/true\nTimeoutStartSec=-810\n"
    with pytest.raises(DeployError, match=r"rejected ignored\.service: .*ignored\.service:3: "
                       r"Failed to parse TimeoutStartSec= parameter, ignoring: -810"):  # fmt: skip
        systemd_verify(service, "ignored", user=False)


def test_a_notice_systemd_still_honours_is_no_rejection() -> None:
    """An obsolete key systemd updates itself names the file too ('PATH:3: Standard output
    type syslog is obsolete, automatically updating to journal'), but the unit runs."""
    _verify_needs()
    service = "[Service]\nExecStart=/bin/true\nStandardOutput=syslog\nMemoryLimit=1G\n"
    said = systemd_verify(service, "obsolete", user=False)
    assert "obsolete" in said and "MemoryMax" in said


def test_quadlet_generator_dry_run_where_present(tmp_path: Path) -> None:
    if shutil.which("podman") is None:
        unavailable("podman is not installed")
    version = podman_version(None)
    generator = find_generator()
    if generator is None and not keys.has_quadlet(version):
        pytest.skip(
            f"podman {keys.show(version)} has no quadlet generator (quadlet came in 4.4); "
            "units are checked by lockpipe's key table from podman's source"
        )
    if generator is None:
        unavailable(f"podman {keys.show(version)} should ship its quadlet generator "
                    "(/usr/libexec/podman/quadlet), but it is not there")  # fmt: skip
    assert generator is not None
    i = inputs("frank-small", "cdi", podman=version)
    unit = render_quadlet(_with(i, health=Health(cmd=HEALTH)))
    (tmp_path / "frank-small.container").write_text(unit.render())
    user = os.geteuid() != 0
    service = generator_dryrun(generator, tmp_path, user=user, expect="frank-small.service")
    assert IMAGE_ID in service and "--publish 127.0.0.1:7771:7771" in service
    assert "%%F" in service and "$$(date" in service  # quadlet left them for systemd
    systemd_verify(service, "frank-small", user=user)
    (tmp_path / "frank-small.container").write_text(
        unit.render().replace("Entrypoint=", "ContainerEntrypoint=")
    )
    with pytest.raises(DeployError, match=r"(?i)unsupported key"):
        generator_dryrun(generator, tmp_path, user=user, expect="frank-small.service")


def _args(tmp_path: Path, **over: object) -> argparse.Namespace:
    base: dict[str, object] = dict(
        lock=LOCK, engine=None, state=tmp_path / "state", force=False,
        targets=["frank-small"], wait_port=None, port_timeout=1.0, podman_version="5.4",
        no_inspect=True, gpu_mode="cdi", bind="127.0.0.1", health_cmd=None, start_timeout=900,
        smoke_report=None, store=tmp_path / "store", out=tmp_path / "out",
        no_verify=shutil.which("systemd-analyze") is None, install=str(tmp_path / "units"),
        start=False, image=None, published=False, artifacts=None,
    )  # fmt: skip
    return argparse.Namespace(**{**base, **over})


def _with(i: DeployInputs, **over: object) -> DeployInputs:
    return i.__class__(**{**vars(i), **over})


SYSTEMCTL = """#!/bin/sh
# FAKE systemctl: logs its arguments; `show` answers $STATE; `stop` ends $HOLDER's pid.
echo "$*" >> "$LOG"
case " $* " in
  *" show "*) [ "$STATE" = nobus ] && { echo "Failed to connect to bus" >&2; exit 1; }
              echo "$STATE" ;;
  *" stop "*) [ -n "$HOLDER" ] && kill "$(cat "$HOLDER")" ;;
esac
exit 0
"""


def fake_systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str,
                   holder: Path | None = None) -> Path:  # fmt: skip
    """Put the FAKE systemctl first on PATH; the file its calls are logged to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / "systemctl"
    tool.write_text(SYSTEMCTL)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "systemctl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LOG", str(log))
    monkeypatch.setenv("STATE", state)
    monkeypatch.setenv("HOLDER", str(holder or ""))
    return log


def test_cli_renders_verifies_and_installs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # frank-small is a --gpu-mode cdi unit: installing needs an nvidia.com/gpu CDI spec.
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    (spec_dir / "nvidia.yaml").write_text(NVIDIA_YAML)
    monkeypatch.setattr(cdi, "CDI_DIRS", (spec_dir,))
    log = fake_systemctl(tmp_path, monkeypatch, "inactive")
    built(tmp_path / "state", "frank-small")
    store = fetched(tmp_path / "store", "frank-small")
    smoke_json(tmp_path, {"reports": [result("frank-small", store=store)]})
    assert do_deploy(_args(tmp_path, store=None)) == 0
    text = (tmp_path / "units" / "frank-small.container").read_text()
    assert text == (tmp_path / "out" / "frank-small.container").read_text()
    assert f"Image={IMAGE_ID}" in text and "# Smoke: passed on 3f3f3f3f3f3f" in text
    assert f"Volume={store}:/store:ro" in text
    assert "stop" not in log.read_text()  # nothing ran: nothing stopped, nothing started


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """Another process listening on a free port, as the old instance's container does:
    (port, the file holding its pid)."""
    port = free_port()
    code = ("import socket, sys, time; s = socket.socket(); "
            "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); print('ready', flush=True); "
            "time.sleep(600)")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code, str(port)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    pid = tmp_path / "holder.pid"
    pid.write_text(str(proc.pid))
    try:
        yield port, pid
    finally:
        proc.kill()
        proc.wait()


def _app(tmp_path: Path, port: int) -> Path:
    """A CPU target without payloads serving on ``port``, built, with a passing smoke run."""
    document = doc()
    document["targets"]["app"]["build_args"]["GGML_CUDA"] = "OFF"
    document["targets"]["app"]["serve"]["port"] = port
    lock = make_repo(tmp_path / "repo", document)
    loaded, state = load_lock(lock), tmp_path / "state"
    write_record(state, BuildRecord(
        target="app", tag=loaded.target("app").tag, key="k" * 64, image_id=f"sha256:{IMAGE_ID}",
        engine="podman", engine_version="5.4.2", reproducible=True, reproducible_how="test",
        fingerprint=loaded.fingerprints["app"], source_date_epoch=0, built_at="now", seconds=0.0,
    ))  # fmt: skip
    smoke_json(tmp_path, {"reports": [result("app", lock=loaded)]})
    return lock


def _install_app(tmp_path: Path, lock: Path) -> int:
    return main(["deploy", "app", "--lock", str(lock), "--state", str(tmp_path / "state"),
                 "--podman-version", "5.4", "--no-inspect", "--no-verify", "--port-timeout", "5",
                 "--install", str(tmp_path / "units")])  # fmt: skip


def test_an_upgrade_stops_the_old_instance_then_replaces_and_restarts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holder: tuple[int, Path]
) -> None:
    port, pid = holder
    lock = _app(tmp_path, port)
    old = tmp_path / "units" / "app.container"
    old.parent.mkdir()
    old.write_text("# the old unit\n")
    log = fake_systemctl(tmp_path, monkeypatch, "active", holder=pid)
    assert _install_app(tmp_path, lock) == 0
    calls = [line.removeprefix("--user ") for line in log.read_text().splitlines()]
    assert calls == ["show --property=ActiveState --value app.service", "stop app.service",
                     "daemon-reload", "start app.service"]  # fmt: skip
    assert old.read_text() == (tmp_path / "state" / "deploy" / "app.container").read_text()


def test_a_replaced_unit_whose_state_systemd_cannot_tell_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = _app(tmp_path, free_port())
    old = tmp_path / "units" / "app.container"
    old.parent.mkdir()
    old.write_text("# the old unit\n")
    fake_systemctl(tmp_path, monkeypatch, "nobus")
    assert _install_app(tmp_path, lock) == DeployError.return_code
    err = capsys.readouterr().err
    assert f"{old} is installed, but systemd cannot say whether app.service runs" in err
    assert "stop app.service`) and rerun" in err
    assert old.read_text() == "# the old unit\n"


def test_the_units_port_wait_needs_only_the_hosts_shell(listener: int) -> None:
    """ExecStartPre as systemd runs it (its words unescaped), with no venv on PATH."""
    unit = render_quadlet(_with(inputs("llama-cuda", "cdi"), port=listener, port_wait=1))
    (pre,) = unit.values("Service", "ExecStartPre")
    bare = {"PATH": "/usr/bin:/bin"}
    busy = subprocess.run(split_args(pre), env=bare, capture_output=True, text=True, timeout=30)
    assert busy.returncode == 1
    assert f"port {listener} still in use after 1 s (ss -tanp sport = :{listener})" in busy.stderr
    unit = render_quadlet(_with(inputs("llama-cuda", "cdi"), port=free_port(), port_wait=1))
    (pre,) = unit.values("Service", "ExecStartPre")
    free = subprocess.run(split_args(pre), env=bare, capture_output=True, text=True, timeout=30)
    assert free.returncode == 0, free.stderr


def test_systemd_analyze_sees_the_health_command_as_quadlet_passes_it(tmp_path: Path) -> None:
    _verify_needs()
    built(tmp_path / "state")
    smoke_json(tmp_path, {"reports": [result(store=fetched(tmp_path / "store"))]})
    assert main(["deploy", "llama-cpu", "--lock", str(LOCK), "--state", str(tmp_path / "state"),
                 "--podman-version", "5.4", "--no-inspect", "--out", str(tmp_path / "out"),
                 "--health-cmd", HEALTH]) == 0  # fmt: skip
    text = (tmp_path / "out" / "llama-cpu.container").read_text()
    health = HEALTH.replace("%", "%%").replace("$", "$$")
    assert f"HealthCmd={health}\n" in text
    # The same unit with the value unescaped, as before: systemd refuses its ExecStart.
    raw = plain_service(parse_unit(text.replace(health, HEALTH))).render()
    with pytest.raises(DeployError, match=r"(?s)rejected llama-cpu\.service.*%F"):
        systemd_verify(raw, "llama-cpu", user=os.geteuid() != 0)


def test_cli_wait_port_mode(listener: int, tmp_path: Path) -> None:
    assert do_deploy(_args(tmp_path, wait_port=free_port(), targets=[])) == 0
    with pytest.raises(PortBusy):
        do_deploy(_args(tmp_path, wait_port=listener, targets=[], port_timeout=0.2))


def test_wait_port_runs_from_the_command_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "lockpipe", "deploy", "--wait-port",
                          str(free_port())], capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("option", "where", "code"),
    [("--out", "/proc/self", UsageError.return_code),
     ("--install", "/proc/self/fdinfo", DeployError.return_code)],
    ids=["out", "install"],
)  # fmt: skip
def test_a_folder_no_unit_can_be_written_in_is_one_line_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    option: str,
    where: str,
    code: int,
) -> None:
    lock = _app(tmp_path, free_port())
    fake_systemctl(tmp_path, monkeypatch, "inactive")
    got = main(["deploy", "app", "--lock", str(lock), "--state", str(tmp_path / "state"),
                "--podman-version", "5.4", "--no-inspect", "--no-verify", "--port-timeout", "1",
                option, where])  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    assert got == code, err
    assert f"{option}" in err and f"cannot write {where}/app.container" in err, err
    assert "writable" in err and len(err.strip().splitlines()) == 1, err
