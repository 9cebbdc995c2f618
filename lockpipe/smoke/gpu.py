"""How a container gets the host's NVIDIA GPU, per mode and per engine; pure except discovery.

Three modes (``--gpu-mode``):

- ``docker-gpus``: docker's ``--gpus all``, a device request the daemon hands to the
  nvidia-container-toolkit. docker only.
- ``cdi``: the CDI name ``nvidia.com/gpu=all``, resolved by the engine from the spec that
  ``nvidia-ctk cdi generate`` wrote (podman ≥ 4.1; docker ≥ 25 with CDI enabled).
- ``manual``: for hosts without the toolkit (the fleet's frank-small host): the device
  nodes plus read-only bind mounts of the driver's user-space libraries, the same set
  libnvidia-container mounts (its ``utility_libs`` and ``compute_libs``).

:func:`discover_host` reads the host; :func:`plan_gpu` turns mode, engine and host into a
:class:`GpuAttach`; :func:`with_gpu` puts it on a RunSpec, which each engine translates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from lockpipe.engines.base import GPU_MODES, DeviceRequest, GpuMode, Mount, RunSpec
from lockpipe.errors import GpuAttachError

CDI_ALL = "nvidia.com/gpu=all"
# nvidia/cuda images (and so vllm/vllm-openai) already list this dir in LD_LIBRARY_PATH:
# it is where the toolkit's legacy mode put the driver, so mounting there needs no env edit.
CONTAINER_LIB_DIR = "/usr/local/nvidia/lib64"
CONTAINER_SMI = "/usr/bin/nvidia-smi"
# Required: without these CUDA cannot open a context, so manual mode refuses to start.
REQUIRED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
OPTIONAL_NODES = ("/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
# libnvidia-container's utility_libs + compute_libs (src/nvc_info.c), minus OpenCL/graphics.
LIB_PREFIXES = (
    "libcuda.so", "libcudadebugger.so", "libnvidia-ml.so", "libnvidia-cfg.so",
    "libnvidia-nscq.so", "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so",
    "libnvidia-gpucomp.so", "libnvidia-allocator.so", "libnvidia-fatbinaryloader.so",
    "libnvidia-pkcs11.so", "libnvidia-pkcs11-openssl3.so", "libnvidia-tileiras.so",
)  # fmt: skip
REQUIRED_LIBS = ("libcuda.so.1", "libnvidia-ml.so.1")  # CUDA driver API; NVML (vLLM's probe)
LIB_DIRS = (
    "usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib",
    "lib/x86_64-linux-gnu", "lib64",
)  # fmt: skip
BIN_DIRS = ("usr/bin", "usr/local/bin", "bin", "usr/sbin")
_LDCONFIG_LINE = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")
_GPU_NODE = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True, kw_only=True)
class HostGpu:
    """What discovery found: device nodes and driver files, as host paths."""

    root: Path
    device_nodes: tuple[str, ...]
    libraries: Mapping[str, Path] = field(default_factory=dict)  # name in container -> file
    nvidia_smi: Path | None = None
    searched: str = ""  # where libraries were looked for, for error messages


@dataclass(frozen=True, kw_only=True)
class GpuAttach:
    mode: GpuMode
    devices: tuple[str, ...] = ()  # CDI names, or host device paths
    device_requests: tuple[DeviceRequest, ...] = ()
    mounts: tuple[Mount, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


def parse_ldconfig(text: str) -> dict[str, Path]:
    """Map each 64-bit library name in ``ldconfig -p`` output to its path (first wins)."""
    out: dict[str, Path] = {}
    for line in text.splitlines():
        m = _LDCONFIG_LINE.match(line)
        # "(libc6)" alone is the 32-bit ABI; 64-bit entries carry ",x86-64" or ",AArch64".
        if m and "," in m.group(2):
            out.setdefault(m.group(1), Path(m.group(3)))
    return out


def _wanted(name: str) -> bool:
    return any(name.startswith(p + ".") or name == p for p in LIB_PREFIXES)


def discover_host(
    root: Path = Path("/"), *, ldconfig: str | None = None, gpus: Sequence[int] | None = None
) -> HostGpu:
    """Find NVIDIA device nodes, driver libraries and nvidia-smi under ``root``; never raises.

    Libraries come from ``ldconfig`` (the text of ``ldconfig -p``) when given, paths in it
    taken relative to ``root``; otherwise from a scan of the usual library dirs. ``gpus``
    limits /dev/nvidiaN to those indices (default: every one present).
    """
    dev = root / "dev"
    found = sorted(
        (int(m.group(1)), p.name)
        for p in (dev.iterdir() if dev.is_dir() else ())
        if (m := _GPU_NODE.match(p.name))
    )
    nodes = [f"/dev/{n}" for i, n in found if gpus is None or i in gpus]
    nodes += [n for n in (*REQUIRED_NODES, *OPTIONAL_NODES) if (root / n.lstrip("/")).exists()]
    libs: dict[str, Path] = {}
    if ldconfig is not None:
        searched = "ldconfig -p"
        for name, path in parse_ldconfig(ldconfig).items():
            host = root / str(path).lstrip("/")
            if _wanted(name) and host.exists():
                libs[name] = host.resolve()
    else:
        searched = ", ".join(f"/{d}" for d in LIB_DIRS)
        for d in LIB_DIRS:
            for p in sorted((root / d).glob("lib*.so*")) if (root / d).is_dir() else ():
                if _wanted(p.name) and p.name not in libs and p.exists():
                    libs[p.name] = p.resolve()
    # Triton links its launcher with -lcuda, which needs the unversioned name.
    if "libcuda.so.1" in libs:
        libs.setdefault("libcuda.so", libs["libcuda.so.1"])
    smi = next((root / d / "nvidia-smi" for d in BIN_DIRS if (root / d / "nvidia-smi").is_file()),
               None)  # fmt: skip
    return HostGpu(
        root=root, device_nodes=tuple(nodes), libraries=libs, nvidia_smi=smi, searched=searched
    )


def _check_manual(host: HostGpu) -> None:
    gpus = [n for n in host.device_nodes if _GPU_NODE.match(n.removeprefix("/dev/"))]
    missing = [n for n in REQUIRED_NODES if n not in host.device_nodes]
    missing_libs = [lib for lib in REQUIRED_LIBS if lib not in host.libraries]
    if gpus and not missing and not missing_libs:
        return
    where = "" if host.root == Path("/") else f" under {host.root}"
    problems = []
    if not gpus:
        problems.append("no /dev/nvidia0 … /dev/nvidiaN")
    problems += [f"no {n}" for n in missing]
    problems += [f"no {lib} (searched {host.searched})" for lib in missing_libs]
    raise GpuAttachError(
        f"--gpu-mode manual: {'; '.join(problems)}{where}. Looked for "
        f"/dev/nvidia[0-9]*, {', '.join(REQUIRED_NODES + OPTIONAL_NODES)} and "
        f"{', '.join(REQUIRED_LIBS)}. Fix: load the driver (nvidia-smi must work on the host; "
        "/dev/nvidia-uvm appears after nvidia-modprobe -u -c=0), or use --gpu-mode cdi on a "
        "host with nvidia-container-toolkit"
    )


def _join_path(dir_: str, current: str | None) -> str | None:
    """The LD_LIBRARY_PATH that also finds ``dir_``, or None when it already does."""
    parts = [p for p in (current or "").split(":") if p]
    return None if dir_ in parts else ":".join([dir_, *parts])


def plan_gpu(
    mode: GpuMode, *, engine: str, host: HostGpu | None = None, image_ld_path: str | None = None
) -> GpuAttach:
    """The attach for ``mode`` on ``engine`` (docker, podman, buildah); GpuAttachError if none.

    ``manual`` needs ``host`` (from :func:`discover_host`) and ``image_ld_path``, the image's
    own LD_LIBRARY_PATH (None if unset): a container env replaces the image's value, so the
    plan sets LD_LIBRARY_PATH only when the image's does not list the library dir, and then
    keeps the image's entries after it.
    """
    if mode not in GPU_MODES:
        raise GpuAttachError(f"--gpu-mode {mode!r} is not one of {', '.join(GPU_MODES)}")
    if engine not in ("docker", "podman", "buildah"):
        raise GpuAttachError(f"no GPU attach for engine {engine!r}; use docker, podman or buildah")
    if mode == "docker-gpus":
        if engine != "docker":
            raise GpuAttachError(
                f"--gpu-mode docker-gpus is docker's --gpus flag and does not exist for the "
                f"{engine} engine; use --gpu-mode cdi (needs nvidia-ctk cdi generate on the "
                "host) or --gpu-mode manual (no toolkit needed)"
            )
        # What the docker CLI sends for --gpus all: no driver, so the daemon picks the one
        # registered for the "gpu" capability (the toolkit's).
        return GpuAttach(
            mode=mode,
            device_requests=(DeviceRequest(driver="", count=-1, capabilities=(("gpu",),)),),
        )
    if mode == "cdi":
        if engine == "docker":
            # dockerd takes CDI names only as a DeviceRequest with driver "cdi" (moby's
            # integration/container/cdi_test.go); in HostConfig.Devices a CDI name is
            # treated as a host path and fails to stat.
            return GpuAttach(
                mode=mode,
                device_requests=(DeviceRequest(driver="cdi", count=0, device_ids=(CDI_ALL,)),),
            )
        # podman's specgen moves qualified names out of Devices into its CDI list.
        return GpuAttach(mode=mode, devices=(CDI_ALL,))
    if host is None:
        raise GpuAttachError("--gpu-mode manual needs the host's GPU discovery; call discover_host")
    _check_manual(host)
    mounts = [Mount(p, f"{CONTAINER_LIB_DIR}/{n}") for n, p in sorted(host.libraries.items())]
    if host.nvidia_smi is not None:
        mounts.append(Mount(host.nvidia_smi, CONTAINER_SMI))
    # Triton finds libcuda through the ldconfig cache, which does not know the mounted dir.
    env = {"TRITON_LIBCUDA_PATH": CONTAINER_LIB_DIR}
    ld_path = _join_path(CONTAINER_LIB_DIR, image_ld_path)
    if ld_path is not None:
        env["LD_LIBRARY_PATH"] = ld_path
    return GpuAttach(mode=mode, devices=host.device_nodes, mounts=tuple(mounts), env=env)


def with_gpu(spec: RunSpec, attach: GpuAttach) -> RunSpec:
    """``spec`` plus the attach's devices, mounts and env (the attach's env wins on a clash)."""
    return replace(
        spec,
        devices=(*spec.devices, *attach.devices),
        device_requests=(*spec.device_requests, *attach.device_requests),
        mounts=(*spec.mounts, *attach.mounts),
        env={**spec.env, **attach.env},
    )
