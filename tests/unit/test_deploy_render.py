"""Quadlet rendering: golden units for llama-cuda (manual GPU) and frank-small (CDI).

The goldens are rendered from a frozen copy of the committed lock
(tests/data/deploy/lock.json), a fixed build record and a fixed host, for
podman 5.4 (Debian 13). Regenerate after a deliberate change with
LOCKPIPE_UPDATE_GOLDEN=1 pytest tests/unit/test_deploy_render.py, and review the diff.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from lockpipe.deploy import keys
from lockpipe.deploy.gate import Pinned
from lockpipe.deploy.plan import DeployGpuMode, DeployOptions, HostFacts, inputs_for_target
from lockpipe.deploy.render import (
    WAIT_PORT_SH,
    DeployInputs,
    Health,
    render_quadlet,
    split_entrypoint,
)
from lockpipe.deploy.unit import (
    Unit,
    label,
    parse_unit,
    quote_word,
    sections,
    split_args,
    split_words,
    verbatim,
)
from lockpipe.errors import DeployError, GpuAttachError
from lockpipe.imagebuild.records import BuildRecord
from lockpipe.lock.model import Lock, load_lock
from lockpipe.smoke.gpu import HostGpu

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "deploy"
STORE = Path("/var/lib/lockpipe/payloads")
IMAGE_ID = "3f" * 32
DRIVER = Path("/usr/lib/x86_64-linux-gnu")
HOST = HostGpu(
    root=Path("/"),
    device_nodes=("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"),
    libraries={
        "libcuda.so": DRIVER / "libcuda.so.610.57.04",
        "libcuda.so.1": DRIVER / "libcuda.so.610.57.04",
        "libnvidia-ml.so.1": DRIVER / "libnvidia-ml.so.610.57.04",
        "libnvidia-ptxjitcompiler.so.1": DRIVER / "libnvidia-ptxjitcompiler.so.610.57.04",
    },
    nvidia_smi=Path("/usr/bin/nvidia-smi"),
)


LOCK = GOLDEN / "lock.json"  # the committed lock, frozen: goldens move only when this does


def lock() -> Lock:
    return load_lock(LOCK)


def pinned(target: str, tag: str) -> Pinned:
    record = BuildRecord(
        target=target, tag=tag, key="k" * 64, image_id=f"sha256:{IMAGE_ID}", engine="podman",
        engine_version="5.4.2", reproducible=True, reproducible_how="test",
        fingerprint="f" * 64, source_date_epoch=1700000000,
        built_at="2026-11-01T00:00:00Z", seconds=1.0,
    )  # fmt: skip
    return Pinned(record=record, image=IMAGE_ID)


def inputs(
    target: str,
    mode: DeployGpuMode,
    *,
    podman: keys.Version = (5, 4),
    entrypoint: tuple[str, ...] | None = None,
) -> DeployInputs:
    loaded = lock()
    facts = HostFacts(podman=podman, image_entrypoint=entrypoint, image_ld_path=None,
                      gpu_host=HOST)  # fmt: skip
    opts = DeployOptions(gpu_mode=mode, note="Smoke: passed on 3f3f3f3f3f3f (test).")
    return inputs_for_target(loaded, target, pinned(target, loaded.target(target).tag), STORE,
                             facts, opts)  # fmt: skip


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("LOCKPIPE_UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path} differs; see the module docstring"


def render(i: DeployInputs) -> Unit:
    return render_quadlet(i)


def test_llama_cuda_manual_gpu_golden() -> None:
    i = inputs("llama-cuda", "manual", entrypoint=("/usr/local/bin/llama-server",))
    golden("llama-cuda.container", render(i).render())


def test_frank_small_cdi_golden() -> None:
    golden("frank-small.container", render(inputs("frank-small", "cdi")).render())


def test_image_pinned_by_id_and_store_read_only() -> None:
    unit = render(inputs("frank-small", "cdi"))
    assert unit.values("Container", "Image") == [IMAGE_ID]
    assert f"{STORE}:/store:ro" in unit.values("Container", "Volume")
    assert unit.values("Container", "AddDevice") == ["nvidia.com/gpu=all"]
    assert unit.values("Container", "PublishPort") == ["127.0.0.1:7771:7771"]


def test_exec_round_trips_the_resolved_command() -> None:
    i = inputs("frank-small", "cdi")
    unit = render(i)
    assert unit.values("Container", "Entrypoint") == ["vllm"]
    (exec_line,) = unit.values("Container", "Exec")
    assert split_args(exec_line) == list(i.command[1:])
    assert not any("{payload" in a for a in i.command)  # placeholders resolved into /store
    assert any(a.startswith("/store/models--google--") for a in i.command)


def test_manual_gpu_mounts_driver_read_only_and_sets_env() -> None:
    unit = render(inputs("llama-cuda", "manual"))
    assert "/dev/nvidiactl" in unit.values("Container", "AddDevice")
    assert f"{DRIVER}/libcuda.so.610.57.04:/usr/local/nvidia/lib64/libcuda.so.1:ro" in (
        unit.values("Container", "Volume")
    )
    assert "LD_LIBRARY_PATH=/usr/local/nvidia/lib64" in unit.values("Container", "Environment")
    assert "TRITON_LIBCUDA_PATH=/usr/local/nvidia/lib64" in unit.values("Container", "Environment")


def test_manual_gpu_without_a_driver_names_the_fix() -> None:
    bare = HostGpu(root=Path("/"), device_nodes=())
    i = inputs("llama-cuda", "cdi")
    from lockpipe.deploy.plan import _gpu

    with pytest.raises(GpuAttachError, match="load the driver"):
        _gpu(DeployOptions(gpu_mode="manual"), HostFacts(podman=(5, 4), gpu_host=bare))
    assert i.gpu is not None and i.gpu.mode == "cdi"


def test_service_waits_for_the_port_with_the_hosts_shell_and_restarts() -> None:
    unit = render(inputs("llama-cuda", "cdi"))
    (pre,) = unit.values("Service", "ExecStartPre")
    assert split_args(pre) == ["/bin/sh", "-c", WAIT_PORT_SH, "wait-port", "7771", "90"]
    assert unit.values("Service", "Restart") == ["on-failure"]
    assert unit.values("Unit", "After") == ["network-online.target"]
    assert unit.values("Install", "WantedBy") == ["default.target"]
    assert unit.values("Container", "Notify") == ["healthy"]


def test_entrypoint_kept_when_the_image_runs_the_program() -> None:
    cmd = ("vllm", "serve", "/m", "--port", "1")
    assert split_entrypoint(cmd, ("vllm", "serve")) == (None, ("/m", "--port", "1"))
    assert split_entrypoint(cmd, ("/usr/bin/vllm",)) == (None, cmd[1:])
    assert split_entrypoint(cmd, ("/bin/sh", "-c")) == ("vllm", cmd[1:])
    assert split_entrypoint(cmd, None) == ("vllm", cmd[1:])


def test_podman_4_has_no_entrypoint_or_notify_healthy() -> None:
    unit = render(inputs("frank-small", "cdi", podman=(4, 9)))
    assert unit.values("Container", "Entrypoint") == []
    assert unit.values("Container", "PodmanArgs") == ["--entrypoint=vllm"]
    assert unit.values("Container", "Notify") == []
    old = render(inputs("frank-small", "cdi", podman=(4, 4)))
    (args,) = [a for a in old.values("Container", "PodmanArgs") if "health" in a]
    assert "--health-start-period=600s" in split_args(args)
    assert old.values("Container", "HealthCmd") == []


@pytest.mark.parametrize("version", sorted(keys.ADDED))
def test_every_quadlet_release_accepts_the_render(version: keys.Version) -> None:
    unit = render(inputs("llama-cuda", "manual", podman=version))
    assert keys.problems(unit.section("Container"), version) == []


# --- free text: escaped or refused, never written raw -----------------------------------------


def test_free_text_is_escaped_for_systemd_in_the_rendered_unit() -> None:
    i = inputs("llama-cpu", "cdi")
    health = Health(cmd='curl -w %{http_code} "$URL" -o /dev/null')
    odd = i.__class__(**{**vars(i), "description": "gemma at 100%\nof ${HOME} \\",
                         "health": health})  # fmt: skip
    text = render(odd).render()
    assert "\nDescription=gemma at 100%% of ${HOME}\n" in text
    assert '\nHealthCmd=curl -w %%{http_code} "$$URL" -o /dev/null\n' in text


def test_a_health_command_on_podman_4_4_is_escaped_inside_podman_args() -> None:
    i = inputs("llama-cpu", "cdi", podman=(4, 4))
    unit = render(i.__class__(**{**vars(i), "health": Health(cmd="date +%F; echo $X")}))
    (args,) = [a for a in unit.values("Container", "PodmanArgs") if "health" in a]
    assert "--health-cmd=date +%F; echo $X" in split_args(args)
    assert "%%F" in args and "$$X" in args


@pytest.mark.parametrize(
    ("value", "why"),
    [("a\nb", "holds a line break"), ("a\\", "ends with a backslash"),
     (" a", "starts or ends with whitespace"), ('"a b"', "starts or ends with a double quote"),
     ('sh -c "curl x"', "starts or ends with a double quote"),
     ('"a b', "starts or ends with a double quote")],
)  # fmt: skip
def test_verbatim_refuses_what_no_unit_line_holds_naming_the_input(value: str, why: str) -> None:
    with pytest.raises(DeployError, match=rf"^--store {re.escape(repr(value))} (is )?{why}"):
        verbatim(value, "--store")
    assert verbatim("/srv/100%/$x", "--store") == "/srv/100%%/$$x"


def test_render_refuses_a_value_that_would_spill_onto_another_line() -> None:
    unit = Unit(header=("two\nlines",), sections=sections(("Unit", [("Description", "ok")])))
    assert unit.render().startswith("# two\n# lines\n\n[Unit]\nDescription=ok\n")
    for bad in ("a\nExecStartPost=/bin/true", "continued \\"):
        broken = Unit(header=(), sections=sections(("Unit", [("Description", bad)])))
        with pytest.raises(DeployError, match=r"\[Unit\] Description="):
            broken.render()


def test_labels_are_one_line_with_percent_doubled() -> None:
    assert label("a\n  b\t100% \\\\") == "a b 100%%"


@pytest.mark.parametrize(
    ("word", "quoted"),
    [("plain", "plain"), ("%t/%N.cid", "%t/%N.cid"), ("$$HOME", "$$HOME"),
     ("a b", '"a b"'), ('say "hi"', '"say \\"hi\\""'), ("back\\slash", '"back\\\\slash"'),
     ("it's", '"it\'s"'), ("tab\there", '"tab\\there"')],
)  # fmt: skip
def test_quote_word_writes_a_word_as_podmans_quadlet_does(word: str, quoted: str) -> None:
    assert quote_word(word) == quoted
    assert split_words(quoted) == [word]


@pytest.mark.parametrize("odd", ["\x1c", "\x85", "\u2028", "\x0b"])
def test_a_unit_is_read_back_at_systemds_line_ends_only(odd: str) -> None:
    """parse_unit split at splitlines()'s 8 more line ends: a serve argument 'x\\x1cy' was
    read back (and verified) as 'x', a command other than the one the unit runs."""
    text = f"[Container]\nExec=--alias x{odd}y\r\nImage=i\rNotify=true\n"
    unit = parse_unit(text)
    assert unit.values("Container", "Exec") == [f"--alias x{odd}y"]
    assert unit.values("Container", "Image") == ["i"]  # \r\n and \r end lines, as in systemd
    assert unit.values("Container", "Notify") == ["true"]


def test_a_built_targets_serve_env_is_in_the_unit() -> None:
    """serve.env of a built target was counted in the served digest deploy gates on, but
    the unit had no Environment= line for it (issue 18)."""
    loaded = lock()
    target = loaded.targets["llama-cpu"]
    env = {"LLAMA_ARG_THREADS": "2", "CUDA_VISIBLE_DEVICES": "1"}
    changed = dataclasses.replace(target, serve=dataclasses.replace(target.serve, env=env))
    loaded = dataclasses.replace(loaded, targets={**loaded.targets, "llama-cpu": changed})
    facts = HostFacts(podman=(5, 4), image_entrypoint=None, image_ld_path=None, gpu_host=HOST)
    i = inputs_for_target(loaded, "llama-cpu", pinned("llama-cpu", changed.tag), STORE, facts,
                          DeployOptions(gpu_mode="manual"))  # fmt: skip
    lines = render(i).render().splitlines()
    assert "Environment=CUDA_VISIBLE_DEVICES=1" in lines
    assert "Environment=LLAMA_ARG_THREADS=2" in lines


def test_an_empty_argument_of_the_command_is_refused_naming_it() -> None:
    """quadlet reads an empty word as the end of Exec= (podman 5.4.2's quadlet -dryrun:
    'Exec=--alias "" --port 8080' ran '--alias' alone), so the unit served another
    command than the smoke run did (issue 18)."""
    i = inputs("llama-cpu", "cdi")
    odd = i.__class__(**{**vars(i), "command": (*i.command, "--alias", "", "--port", "8080")})
    with pytest.raises(DeployError) as caught:
        render(odd)
    said = str(caught.value)
    assert said.startswith("targets.llama-cpu.serve.command: argument ") and "is empty" in said
    assert split_words('--alias "" --port 8080') == ["--alias"]  # as quadlet reads it
