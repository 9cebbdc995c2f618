"""The GPU workflow: valid for GitHub, clean under zizmor, least privilege, and its
frank-small gate, run as the runner runs it (bash -eo pipefail) with a FAKE nox.

check-jsonschema and zizmor run offline (their schema and audits are bundled). Where
they are not installed the test skips, except on CI, where it fails: CI installs the
dev extra, which has them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github/workflows/gpu-smoke.yml"


def _flow() -> dict[Any, Any]:
    flow = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(flow, dict)
    return flow


def _triggers() -> dict[str, Any]:
    flow = _flow()
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert isinstance(on, dict)
    return on


def _steps() -> list[dict[str, Any]]:
    steps = _flow()["jobs"]["smoke"]["steps"]
    assert isinstance(steps, list)
    return steps


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name  # the venv's bin, also when not activated
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed; pip install {name} (the dev extra has it)")
    return found


def test_the_workflow_matches_github_s_workflow_schema() -> None:
    argv = [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
            str(WORKFLOW)]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_finds_nothing_offline() -> None:
    argv = [_tool("zizmor"), "--offline", "--no-progress", str(WORKFLOW)]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_permissions_are_least_privilege() -> None:
    flow = _flow()
    assert flow["permissions"] == {}, "nothing by default; each job asks for what it needs"
    for name, job in flow["jobs"].items():
        assert job.get("permissions") == {"contents": "read"}, name


def test_every_action_is_pinned_by_a_full_commit_sha() -> None:
    for step in _steps():
        if "uses" in step:
            ref = step["uses"].rpartition("@")[2]
            assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), step["uses"]


def test_nox_goes_into_a_venv_not_pip_install_user() -> None:
    """Debian and Ubuntu mark the system Python externally managed (PEP 668)."""
    assert not [s["run"] for s in _steps() if "--user" in s.get("run", "")]
    (install,) = [s for s in _steps() if s.get("name") == "install nox"]
    assert "python3 -m venv" in install["run"] and "GITHUB_PATH" in install["run"]


def test_the_default_gpu_mode_is_manual_and_the_choice_is_documented() -> None:
    """The fleet's host has no nvidia-container-toolkit: cdi would fail there."""
    mode = _triggers()["workflow_dispatch"]["inputs"]["gpu_mode"]
    assert mode["default"] == "manual" and set(mode["options"]) == {"manual", "cdi", "docker-gpus"}
    env = _flow()["jobs"]["smoke"]["env"]["PIPELINE_GPU_MODE"]
    assert env.endswith("|| 'manual' }}") and "vars.PIPELINE_GPU_MODE" in env
    header = WORKFLOW.read_text().split("\nname:")[0]
    for words in ("nvidia-container-toolkit", "manual", "cdi", "docker-gpus",
                  "PIPELINE_GPU_MODE"):  # fmt: skip
        assert words in header


# `lockpipe plan frank-small` as it prints today (abridged), and once pinned.
UNPINNED_PLAN = """\
frank-small -> localhost/vllm/vllm-openai:frank-small  (linux/amd64, SOURCE_DATE_EPOCH=1793491200)
  payload     gemma-4-12b-qat-w4a16 [model] google/gemma-4-12B-it-qat-w4a16-ct@dcfe122/ (snapshot)
              model.safetensors UNPINNED: no size, sha256 or git_sha1
  serve       vllm :7771 context=262144, parallel=2, kv=turboquant_k8v4
"""
PINNED_PLAN = UNPINNED_PLAN.replace(
    "UNPINNED: no size, sha256 or git_sha1", "10999137120 B sha256 " + "5" * 64
)
FAKE_NOX = """#!/bin/sh
# FAKE nox, for tests only: logs its arguments, prints the plan file beside it.
here=$(dirname "$0")
echo "$*" >> "$here/calls.log"
cat "$here/plan.txt"
exit "$(cat "$here/rc")"
"""


def _choose(tmp_path: Path, plan: str, targets: str = "", rc: int = 0) -> tuple[int, str, str]:
    """Run the workflow's "choose targets" step: (exit status, its targets output, stdout)."""
    (step,) = [s for s in _steps() if s.get("id") == "choose"]
    fake = tmp_path / "fake-nox"
    fake.mkdir()
    (fake / "nox").write_text(FAKE_NOX)
    (fake / "nox").chmod(0o755)
    (fake / "plan.txt").write_text(plan)
    (fake / "rc").write_text(str(rc))
    script = tmp_path / "choose.sh"
    script.write_text(step["run"])
    output = tmp_path / "github-output"
    output.touch()
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}", "TARGETS": targets,
           "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(output)}  # fmt: skip
    # shell: bash in the workflow is this command line (GitHub's docs, "defaults.run")
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                            env=env, capture_output=True, text=True, check=False)  # fmt: skip
    if result.returncode == 0:
        assert (fake / "calls.log").read_text() == "-s plan -- frank-small\n"
    lines = output.read_text().splitlines()
    chosen = [line.removeprefix("targets=") for line in lines if line.startswith("targets=")]
    return result.returncode, chosen[0] if chosen else "", result.stdout + result.stderr


def test_frank_small_is_skipped_with_a_notice_while_its_plan_shows_unpinned(
    tmp_path: Path,
) -> None:
    rc, targets, out = _choose(tmp_path, UNPINNED_PLAN)
    assert rc == 0, out
    assert targets == "llama-cuda llama-cuda-mtp"
    assert "::notice title=frank-small smoke skipped::" in out and "UNPINNED" in out


def test_frank_small_is_smoked_as_soon_as_it_is_pinned(tmp_path: Path) -> None:
    rc, targets, out = _choose(tmp_path, PINNED_PLAN)
    assert rc == 0, out
    assert targets == "llama-cuda llama-cuda-mtp frank-small"
    assert "::notice" not in out


def test_asked_for_frank_small_alone_while_unpinned_nothing_runs(tmp_path: Path) -> None:
    rc, targets, out = _choose(tmp_path, UNPINNED_PLAN, targets="frank-small")
    assert (rc, targets) == (0, ""), out
    assert "smoking: nothing" in out
    for step in _steps():
        if step.get("name") in ("build", "payloads", "smoke"):
            assert step["if"] == "steps.choose.outputs.targets != ''"


def test_a_plan_that_fails_fails_the_step(tmp_path: Path) -> None:
    rc, _, out = _choose(tmp_path, "error: pip.frank-small-audio: drift\n", rc=3)
    assert rc == 3, out


@pytest.mark.parametrize("targets", ["llama-cuda; rm -rf /", "$(id)", "*"])
def test_a_target_input_that_is_not_a_name_is_refused(tmp_path: Path, targets: str) -> None:
    rc, chosen, out = _choose(tmp_path, PINNED_PLAN, targets=targets)
    assert (rc, chosen) == (64, ""), out
    assert "::error::not a target name" in out


# The scheduled refresh (.github/workflows/refresh.yml); its pull-request step is run
# with a FAKE gh in tests/unit/test_refresh_jobs.py.
REFRESH = REPO / ".github/workflows/refresh.yml"


def test_the_refresh_workflow_is_valid_and_clean_under_zizmor() -> None:
    schema = [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
              str(REFRESH)]  # fmt: skip
    for argv in (schema, [_tool("zizmor"), "--offline", "--no-progress", "--persona", "auditor",
                          str(REFRESH)]):  # fmt: skip
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout + result.stderr


def test_the_refresh_workflow_is_scheduled_least_privilege_and_pinned() -> None:
    flow = yaml.safe_load(REFRESH.read_text())
    on = flow.get("on", flow.get(True))
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    assert flow["permissions"] == {}
    (job,) = flow["jobs"].values()
    assert job["permissions"] == {"contents": "write", "pull-requests": "write"}
    for step in job["steps"]:
        if "uses" in step:
            ref = step["uses"].rpartition("@")[2]
            assert len(ref) == 40 and all(c in "0123456789abcdef" for c in ref), step["uses"]
    (run,) = [s["run"] for s in job["steps"] if s.get("name") == "refresh"]
    assert run.startswith("nox -s refresh-digests -- --report-md")
