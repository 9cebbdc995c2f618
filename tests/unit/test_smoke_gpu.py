"""GPU attach: the exact request each mode produces on each engine, from a fake host root."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.engines import buildah, docker, podman
from lockpipe.engines.base import DeviceRequest, Mount, RunSpec
from lockpipe.errors import GpuAttachError
from lockpipe.smoke.gpu import (
    CDI_ALL,
    CONTAINER_LIB_DIR,
    GpuAttach,
    HostGpu,
    discover_host,
    parse_ldconfig,
    plan_gpu,
    with_gpu,
)


def docker_run_kwargs(attach: GpuAttach) -> dict[str, object]:
    return docker.run_devices(with_gpu(RunSpec(image="img"), attach))


def podman_run_kwargs(attach: GpuAttach) -> dict[str, object]:
    return podman.run_devices(with_gpu(RunSpec(image="img"), attach))


def podman_cli_args(attach: GpuAttach) -> list[str]:
    """The buildah engine runs containers with the podman CLI: what comes before the image."""
    argv = buildah.run_argv(with_gpu(RunSpec(image="img"), attach))
    return [a for i, a in enumerate(argv) if "--device" in argv[max(i - 1, 0) : i + 1]]


DRIVER = "610.57.04"
LIBDIR = "usr/lib/x86_64-linux-gnu"


def fake_host(root: Path, *, gpus: int = 1, uvm: bool = True, libcuda: bool = True) -> Path:
    """A driver install as the .run/.deb installer lays it out: versioned file + soname links."""
    (root / "dev").mkdir()
    names = [f"nvidia{i}" for i in range(gpus)] + ["nvidiactl", "nvidia-modeset"]
    names += ["nvidia-uvm", "nvidia-uvm-tools"] if uvm else []
    names += ["nvidia-caps", "nvme0"]  # neither is a GPU node
    for n in names:
        (root / "dev" / n).touch()
    lib = root / LIBDIR
    lib.mkdir(parents=True)
    for stem, soname in [
        ("libcuda.so", "1"),
        ("libnvidia-ml.so", "1"),
        ("libnvidia-ptxjitcompiler.so", "1"),
        ("libnvidia-nvvm.so", "4"),
    ]:
        if stem == "libcuda.so" and not libcuda:
            continue
        (lib / f"{stem}.{DRIVER}").write_bytes(b"\x7fELF")
        (lib / f"{stem}.{soname}").symlink_to(f"{stem}.{DRIVER}")
    (lib / "libGLX_nvidia.so.0").write_bytes(b"\x7fELF")  # graphics: never mounted
    (lib / "libc.so.6").write_bytes(b"\x7fELF")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-smi").write_bytes(b"#!")
    return root


LDCONFIG = f"""\
1234 libs found in cache `/etc/ld.so.cache'
\tlibnvidia-ml.so.1 (libc6,x86-64) => /{LIBDIR}/libnvidia-ml.so.1
\tlibnvidia-ml.so.1 (libc6) => /usr/lib/i386-linux-gnu/libnvidia-ml.so.1
\tlibcuda.so.1 (libc6,x86-64) => /{LIBDIR}/libcuda.so.1
\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /{LIBDIR}/libc.so.6
\tlibnvidia-nvvm.so.4 (libc6,x86-64) => /{LIBDIR}/libnvidia-nvvm.so.4
\tlibnvidia-gpucomp.so.{DRIVER} (libc6,x86-64) => /{LIBDIR}/libnvidia-gpucomp.so.{DRIVER}
"""


def test_parse_ldconfig_keeps_64_bit_entries_only() -> None:
    libs = parse_ldconfig(LDCONFIG)
    assert libs["libcuda.so.1"] == Path(f"/{LIBDIR}/libcuda.so.1")
    assert libs["libnvidia-ml.so.1"] == Path(f"/{LIBDIR}/libnvidia-ml.so.1")
    assert "i386" not in str(libs.values())
    assert libs["libc.so.6"] == Path(f"/{LIBDIR}/libc.so.6")  # comma inside the flags


def test_discover_scans_devices_libs_and_smi(tmp_path: Path) -> None:
    host = discover_host(fake_host(tmp_path, gpus=2))
    assert host.device_nodes == (
        "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
    )  # fmt: skip
    lib = tmp_path / LIBDIR
    assert host.libraries == {
        "libcuda.so.1": lib / f"libcuda.so.{DRIVER}",
        "libcuda.so": lib / f"libcuda.so.{DRIVER}",
        f"libcuda.so.{DRIVER}": lib / f"libcuda.so.{DRIVER}",
        "libnvidia-ml.so.1": lib / f"libnvidia-ml.so.{DRIVER}",
        f"libnvidia-ml.so.{DRIVER}": lib / f"libnvidia-ml.so.{DRIVER}",
        "libnvidia-ptxjitcompiler.so.1": lib / f"libnvidia-ptxjitcompiler.so.{DRIVER}",
        f"libnvidia-ptxjitcompiler.so.{DRIVER}": lib / f"libnvidia-ptxjitcompiler.so.{DRIVER}",
        "libnvidia-nvvm.so.4": lib / f"libnvidia-nvvm.so.{DRIVER}",
        f"libnvidia-nvvm.so.{DRIVER}": lib / f"libnvidia-nvvm.so.{DRIVER}",
    }
    assert host.nvidia_smi == tmp_path / "usr/bin/nvidia-smi"


def test_discover_from_ldconfig_and_gpu_selection(tmp_path: Path) -> None:
    host = discover_host(fake_host(tmp_path, gpus=3), ldconfig=LDCONFIG, gpus=[1])
    assert [n for n in host.device_nodes if n[-1].isdigit()] == ["/dev/nvidia1"]
    # gpucomp is listed but absent on disk: not mounted; libc is not a driver library
    assert sorted(host.libraries) == [
        "libcuda.so", "libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-nvvm.so.4",
    ]  # fmt: skip
    assert host.searched == "ldconfig -p"


def test_docker_gpus_on_docker_is_the_cli_request() -> None:
    attach = plan_gpu("docker-gpus", engine="docker")
    assert attach.device_requests == (
        DeviceRequest(driver="", count=-1, device_ids=(), capabilities=(("gpu",),)),
    )
    assert docker_run_kwargs(attach) == {
        "device_requests": [
            {"driver": "", "count": -1, "device_ids": [], "capabilities": [["gpu"]]}
        ]
    }
    assert attach.mounts == () and dict(attach.env) == {}


@pytest.mark.parametrize("engine", ["podman", "buildah"])
def test_docker_gpus_elsewhere_names_mode_and_alternatives(engine: str) -> None:
    with pytest.raises(GpuAttachError, match=rf"docker-gpus .*{engine}.*cdi.*manual"):
        plan_gpu("docker-gpus", engine=engine)


def test_cdi_on_docker_is_a_cdi_device_request() -> None:
    attach = plan_gpu("cdi", engine="docker")
    assert docker_run_kwargs(attach) == {
        "device_requests": [
            {"driver": "cdi", "count": 0, "device_ids": [CDI_ALL], "capabilities": []}
        ]
    }
    with pytest.raises(GpuAttachError, match="device requests"):
        podman_run_kwargs(attach)


def test_cdi_on_podman_is_a_device_name() -> None:
    for engine in ("podman", "buildah"):
        attach = plan_gpu("cdi", engine=engine)
        assert podman_run_kwargs(attach) == {"devices": ["nvidia.com/gpu=all"]}
        assert podman_cli_args(attach) == ["--device", "nvidia.com/gpu=all"]


def test_manual_mounts_libs_smi_and_passes_device_nodes(tmp_path: Path) -> None:
    root = fake_host(tmp_path)
    attach = plan_gpu("manual", engine="podman", host=discover_host(root), image_ld_path=None)
    real = tmp_path / LIBDIR / f"libcuda.so.{DRIVER}"
    assert Mount(real, f"{CONTAINER_LIB_DIR}/libcuda.so.1", True) in attach.mounts
    assert Mount(real, f"{CONTAINER_LIB_DIR}/libcuda.so", True) in attach.mounts
    assert Mount(tmp_path / "usr/bin/nvidia-smi", "/usr/bin/nvidia-smi") in attach.mounts
    assert all(m.read_only for m in attach.mounts)
    assert not any("GLX" in m.target or "libc.so" in m.target for m in attach.mounts)
    devices = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
               "/dev/nvidia-modeset"]  # fmt: skip
    assert podman_run_kwargs(attach) == {"devices": devices}
    assert podman_cli_args(attach)[:4] == ["--device", "/dev/nvidia0", "--device", "/dev/nvidiactl"]
    assert docker_run_kwargs(attach) == {"devices": devices}
    assert dict(attach.env) == {
        "TRITON_LIBCUDA_PATH": CONTAINER_LIB_DIR,
        "LD_LIBRARY_PATH": CONTAINER_LIB_DIR,
    }


def test_manual_keeps_the_images_library_path(tmp_path: Path) -> None:
    host = discover_host(fake_host(tmp_path))
    cuda_image = "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"
    attach = plan_gpu("manual", engine="docker", host=host, image_ld_path=cuda_image)
    assert "LD_LIBRARY_PATH" not in attach.env  # the image already finds the dir
    other = plan_gpu("manual", engine="docker", host=host, image_ld_path="/opt/lib")
    assert other.env["LD_LIBRARY_PATH"] == f"{CONTAINER_LIB_DIR}:/opt/lib"


def test_manual_without_nodes_lists_what_was_looked_for(tmp_path: Path) -> None:
    host = discover_host(fake_host(tmp_path, gpus=0, uvm=False))
    with pytest.raises(GpuAttachError) as err:
        plan_gpu("manual", engine="podman", host=host)
    msg = str(err.value)
    assert "no /dev/nvidia0 … /dev/nvidiaN" in msg and "no /dev/nvidia-uvm" in msg
    assert "/dev/nvidia[0-9]*" in msg and "/dev/nvidiactl" in msg and "nvidia-modprobe" in msg
    empty = HostGpu(root=Path("/"), device_nodes=())
    with pytest.raises(GpuAttachError, match=r"libcuda\.so\.1"):
        plan_gpu("manual", engine="docker", host=empty)


def test_manual_without_libcuda_names_the_search(tmp_path: Path) -> None:
    host = discover_host(fake_host(tmp_path, libcuda=False))
    with pytest.raises(GpuAttachError, match=r"no libcuda\.so\.1 \(searched /usr/lib/x86_64"):
        plan_gpu("manual", engine="podman", host=host)


def test_unknown_mode_and_engine() -> None:
    with pytest.raises(GpuAttachError, match="docker-gpus, cdi, manual"):
        plan_gpu("nvidia", engine="docker")  # type: ignore[arg-type]
    with pytest.raises(GpuAttachError, match="'lxc'"):
        plan_gpu("cdi", engine="lxc")


def test_with_gpu_merges_mounts_and_env(tmp_path: Path) -> None:
    attach = plan_gpu("manual", engine="podman", host=discover_host(fake_host(tmp_path)))
    spec = RunSpec(image="img", mounts=(Mount(tmp_path, "/models"),), env={"A": "1"})
    merged = with_gpu(spec, attach)
    assert merged.mounts[0] == Mount(tmp_path, "/models")
    assert merged.mounts[1:] == attach.mounts
    assert merged.env == {"A": "1", **attach.env}
    assert spec.mounts == (Mount(tmp_path, "/models"),)  # the input is untouched
