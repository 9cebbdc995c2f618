"""--gpu-mode cdi: an install needs a CDI spec for nvidia.com/gpu on this host; a render only
warns. --gpu-mode manual renders this machine's devices, and says so when it has none."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from lockpipe.cli.deploy import do_deploy
from lockpipe.deploy import cdi
from lockpipe.deploy import install as installing
from lockpipe.deploy.install import install
from lockpipe.deploy.plan import DeployOptions, HostFacts, _gpu
from lockpipe.deploy.render import render_quadlet
from lockpipe.errors import DeployError, GpuAttachError
from lockpipe.smoke.gpu import HostGpu
from lockpipe.smoke.ports import free_port
from tests.unit.test_deploy_cli import fetched
from tests.unit.test_deploy_render import LOCK, inputs

# What `nvidia-ctk cdi generate` writes (keys sorted, so `kind` comes last), cut short.
NVIDIA_YAML = """\
---
cdiVersion: 0.5.0
containerEdits:
  deviceNodes:
  - path: /dev/nvidiactl
  - path: /dev/nvidia-uvm
devices:
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: "0"
- containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
  name: all
kind: nvidia.com/gpu
"""


@pytest.fixture(autouse=True)
def _no_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing runs here to stop: installs ask no systemctl (test_deploy_install does)."""
    monkeypatch.setattr(installing, "stop_running", lambda name, **kw: False)


NVIDIA_JSON = {
    "cdiVersion": "0.6.0", "kind": "nvidia.com/gpu",
    "devices": [{"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
}  # fmt: skip
DIGEST_REF = "localhost/vllm/vllm-openai@sha256:" + "ab" * 32


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    static, dynamic = tmp_path / "etc-cdi", tmp_path / "run-cdi"
    static.mkdir()
    return static, dynamic  # the dynamic dir is absent, as on a host without the toolkit


def cdi_unit() -> str:
    return render_quadlet(inputs("frank-small", "cdi")).render()


def test_the_default_dirs_are_podmans() -> None:
    assert (Path("/etc/cdi"), Path("/var/run/cdi")) == cdi.CDI_DIRS


@pytest.mark.parametrize(
    ("name", "text"),
    [("nvidia.yaml", NVIDIA_YAML), ("nvidia.json", json.dumps(NVIDIA_JSON)),
     ("quoted.yaml", "cdiVersion: 0.6.0\nkind: 'nvidia.com/gpu'  # by hand\ndevices: []\n")],
)  # fmt: skip
def test_a_spec_of_kind_nvidia_gpu_is_found(tmp_path: Path, name: str, text: str) -> None:
    static, dynamic = dirs(tmp_path)
    (static / name).write_text(text)
    assert cdi.find_specs(cdi.NVIDIA_KIND, (static, dynamic)) == (static / name,)
    assert cdi.warn_if_missing((static, dynamic)) is True


def test_other_kinds_broken_files_and_other_suffixes_do_not_count(tmp_path: Path) -> None:
    static, dynamic = dirs(tmp_path)
    dynamic.mkdir()
    (static / "amd.yaml").write_text("cdiVersion: 0.6.0\nkind: amd.com/gpu\n")
    (static / "nested.yaml").write_text("devices:\n- name: all\n  kind: nvidia.com/gpu\n")
    (static / "broken.json").write_text("{kind: nvidia.com/gpu")
    (static / "nvidia.yaml.bak").write_text(NVIDIA_YAML)
    (dynamic / "sub").mkdir()
    (dynamic / "sub" / "nvidia.yaml").write_text(NVIDIA_YAML)  # podman reads no subdirs
    assert cdi.find_specs(cdi.NVIDIA_KIND, (static, dynamic)) == ()
    (dynamic / "nvidia.json").write_text(json.dumps(NVIDIA_JSON))
    assert cdi.find_specs(cdi.NVIDIA_KIND, (static, dynamic)) == (dynamic / "nvidia.json",)


def test_unit_kinds_reads_cdi_names_not_device_paths() -> None:
    assert cdi.unit_kinds(cdi_unit()) == ("nvidia.com/gpu",)
    manual = render_quadlet(inputs("llama-cuda", "manual")).render()
    assert "AddDevice=/dev/nvidia0" in manual and cdi.unit_kinds(manual) == ()


def test_install_of_a_cdi_unit_without_a_spec_names_the_fix(tmp_path: Path) -> None:
    static, dynamic = dirs(tmp_path)
    units = tmp_path / "units"
    with pytest.raises(DeployError) as info:
        install(cdi_unit(), "frank-small", units, port=free_port(), port_timeout=1.0,
                cdi_dirs=(static, dynamic))  # fmt: skip
    text = str(info.value)
    assert f"no CDI spec of kind nvidia.com/gpu is in {static} or {dynamic}" in text
    assert "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml" in text
    assert "--gpu-mode manual" in text
    assert not units.exists()


def test_install_of_a_cdi_unit_with_a_spec_writes_it(tmp_path: Path) -> None:
    static, dynamic = dirs(tmp_path)
    (static / "nvidia.yaml").write_text(NVIDIA_YAML)
    done = install(cdi_unit(), "frank-small", tmp_path / "units", port=free_port(),
                   port_timeout=1.0, cdi_dirs=(static, dynamic))  # fmt: skip
    assert "AddDevice=nvidia.com/gpu=all" in done.path.read_text()


def test_install_of_a_manual_unit_needs_no_spec(tmp_path: Path) -> None:
    static, dynamic = dirs(tmp_path)
    manual = render_quadlet(inputs("llama-cuda", "manual")).render()
    done = install(manual, "llama-cuda", tmp_path / "units", port=free_port(), port_timeout=1.0,
                   cdi_dirs=(static, dynamic))  # fmt: skip
    assert done.path.read_text() == manual


def test_rendering_for_cdi_without_a_spec_warns_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    static, dynamic = dirs(tmp_path)
    attach = _gpu(DeployOptions(gpu_mode="cdi", cdi_dirs=(static, dynamic)),
                  HostFacts(podman=(5, 4)))  # fmt: skip
    assert attach.devices == ("nvidia.com/gpu=all",)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: no CDI spec of kind nvidia.com/gpu")
    assert "nvidia-ctk cdi generate" in err


def _args(tmp_path: Path, **over: object) -> argparse.Namespace:
    base: dict[str, object] = dict(
        lock=LOCK, engine=None, state=tmp_path / "state",
        targets=["frank-small"], wait_port=None, port_timeout=1.0, podman_version="5.4",
        no_inspect=True, gpu_mode="cdi", bind="127.0.0.1", health_cmd=None, start_timeout=900,
        smoke_report=None, store=tmp_path / "store", out=tmp_path / "out", no_verify=True,
        install=None, start=False, image=DIGEST_REF, published=False, artifacts=None,
        force=True,  # the image has no smoke result: what is checked here is the CDI spec
    )  # fmt: skip
    return argparse.Namespace(**{**base, **over})


def test_cli_renders_without_a_spec_and_refuses_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cdi, "CDI_DIRS", dirs(tmp_path))
    fetched(tmp_path / "store", "frank-small")
    assert do_deploy(_args(tmp_path)) == 0
    assert f"Image={DIGEST_REF}" in (tmp_path / "out" / "frank-small.container").read_text()
    assert "warning: no CDI spec of kind nvidia.com/gpu" in capsys.readouterr().err
    units = tmp_path / "units"
    with pytest.raises(DeployError, match="nvidia-ctk cdi generate"):
        do_deploy(_args(tmp_path, install=str(units), start=True))
    assert not units.exists()


def test_manual_mode_without_local_gpus_says_to_render_on_the_gpu_host() -> None:
    bare = HostGpu(root=Path("/"), device_nodes=())
    with pytest.raises(GpuAttachError) as info:
        _gpu(DeployOptions(gpu_mode="manual"), HostFacts(podman=(5, 4), gpu_host=bare))
    text = str(info.value)
    assert "load the driver" in text  # smoke's own diagnosis stays first
    assert "run lockpipe deploy on the GPU host itself" in text
    assert "--gpu-mode cdi" in text.split("\n", 1)[1]


def test_a_value_holding_a_line_end_systemd_does_not_read_adds_no_cdi_device(
    tmp_path: Path,
) -> None:
    """unit_kinds read lines with splitlines(): a value holding \\x1c then 'AddDevice=…'
    was read as a CDI device the unit does not ask for, and install then refused it."""
    manual = render_quadlet(inputs("llama-cuda", "manual")).render()
    text = manual.replace("[Container]\n", "[Container]\nLabel=x\x1cAddDevice=nvidia.com/gpu=all\n")
    assert "\x1cAddDevice=nvidia.com/gpu=all" in text
    assert cdi.unit_kinds(text) == ()
    static, dynamic = dirs(tmp_path)
    done = install(text, "llama-cuda", tmp_path / "units", port=free_port(), port_timeout=1.0,
                   cdi_dirs=(static, dynamic))  # fmt: skip
    assert done.path.read_text() == text
