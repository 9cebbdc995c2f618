"""Deploy against this host: a held port blocks install, systemd and podman check the units.

systemd-analyze verify runs on the service systemd would run: podman's generator output
where installed, else the equivalent plain ``podman run`` service. Debian 12's podman 4.3
has no quadlet (it came in 4.4), so there the generator test says so and skips; with a
podman >= 4.4 it must run (on CI, its absence fails).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.cli.deploy import do_deploy, podman_version
from lockpipe.deploy import cdi, keys
from lockpipe.deploy.install import default_dir, install
from lockpipe.deploy.render import render_quadlet
from lockpipe.deploy.unit import parse_unit
from lockpipe.deploy.verify import find_generator, generator_dryrun, plain_service, systemd_verify
from lockpipe.errors import DeployError
from lockpipe.imagebuild.records import write_record
from lockpipe.smoke.ports import PortBusy, free_port
from tests.policy import unavailable
from tests.unit.test_deploy_cdi import NVIDIA_YAML
from tests.unit.test_deploy_render import IMAGE_ID, LOCK, REPO, inputs, pinned

pytestmark = pytest.mark.integration
WAIT = ("/usr/bin/true",)  # an executable systemd-analyze can find; the real one is lockpipe


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
    path = install("[Container]\n", "llama-cuda", tmp_path / "q", port=free_port(),
                   port_timeout=1.0)  # fmt: skip
    assert path.read_text() == "[Container]\n" and path.name == "llama-cuda.container"
    assert [p.name for p in path.parent.iterdir()] == ["llama-cuda.container"]  # no temp left


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
    i = inputs(target, "manual" if mode == "manual" else "cdi")
    unit = render_quadlet(i.__class__(**{**vars(i), "wait_cmd": WAIT}))
    service = plain_service(parse_unit(unit.render())).render()
    assert "ExecStart=/usr/bin/podman run --cidfile=%t/%N.cid" in service
    assert f" {IMAGE_ID} " in service and "--sdnotify=healthy" in service
    systemd_verify(service, target, user=os.geteuid() != 0)


def test_systemd_analyze_rejects_a_broken_service() -> None:
    _verify_needs()
    with pytest.raises(DeployError, match="systemd-analyze verify rejected"):
        systemd_verify("[Service]\nExecStart=/nonexistent/prog\n", "broken", user=False)


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
    unit = render_quadlet(i.__class__(**{**vars(i), "wait_cmd": WAIT}))
    (tmp_path / "frank-small.container").write_text(unit.render())
    user = os.geteuid() != 0
    service = generator_dryrun(generator, tmp_path, user=user, expect="frank-small.service")
    assert IMAGE_ID in service and "--publish 127.0.0.1:7771:7771" in service
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
        start=False, image=None, published=False,
    )  # fmt: skip
    return argparse.Namespace(**{**base, **over})


def test_cli_renders_verifies_and_installs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # frank-small is a --gpu-mode cdi unit: installing needs an nvidia.com/gpu CDI spec.
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    (spec_dir / "nvidia.yaml").write_text(NVIDIA_YAML)
    monkeypatch.setattr(cdi, "CDI_DIRS", (spec_dir,))
    state = tmp_path / "state"
    record = pinned("frank-small", "localhost/vllm/vllm-openai:frank-small").record
    lock = json.loads(LOCK.read_text())
    fingerprint = lock["fingerprints"]["frank-small"]
    write_record(state, record.__class__(**{**vars(record), "fingerprint": fingerprint}))
    assert do_deploy(_args(tmp_path)) == 0
    text = (tmp_path / "units" / "frank-small.container").read_text()
    assert text == (tmp_path / "out" / "frank-small.container").read_text()
    assert f"Image={IMAGE_ID}" in text and "untested image" in text


def test_cli_wait_port_mode(listener: int, tmp_path: Path) -> None:
    assert do_deploy(_args(tmp_path, wait_port=free_port(), targets=[])) == 0
    with pytest.raises(PortBusy):
        do_deploy(_args(tmp_path, wait_port=listener, targets=[], port_timeout=0.2))


def test_wait_port_runs_as_the_units_exec_start_pre(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "lockpipe", "deploy", "--wait-port",
                          str(free_port())], capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert out.returncode == 0, out.stderr
