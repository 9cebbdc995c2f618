"""The GPU workflow: valid for GitHub, clean under zizmor, least privilege, and its
frank-small gate, run as the runner runs it (bash -eo pipefail) with a FAKE nox.

check-jsonschema and zizmor run offline (their schema and audits are bundled). Where
they are not installed the test skips, except on CI, where it fails: CI installs the
dev extra, which has them.
"""

from __future__ import annotations

import json
import os
import re
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
    env = _flow()["jobs"]["smoke"]["env"]["LOCKPIPE_GPU_MODE"]
    assert env.endswith("|| 'manual' }}") and "vars.LOCKPIPE_GPU_MODE" in env
    header = WORKFLOW.read_text().split("\nname:")[0]
    for words in ("nvidia-container-toolkit", "manual", "cdi", "docker-gpus",
                  "LOCKPIPE_GPU_MODE"):  # fmt: skip
        assert words in header


# `lockpipe plan frank-small` as it prints today (abridged), and once pinned.
UNPINNED_PLAN = """\
frank-small -> localhost/vllm/vllm-openai:frank-small  (linux/amd64, SOURCE_DATE_EPOCH=1793491200)
  payload     gemma-4-12b-qat-w4a16 [model] google/gemma-4-12B-it-qat-w4a16-ct@dcfe122/ (snapshot)
              model.safetensors UNPINNED: no size, sha256 or git_sha1
  serve       vllm :7771 context=131072, parallel=2, kv=bfloat16
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


def test_pull_requests_that_move_the_lock_are_smoked_but_never_a_fork_s() -> None:
    """The refresh pull request gets its GPU smoke; a fork's code never reaches the
    self-hosted runner."""
    assert "locks/**" in _triggers()["pull_request"]["paths"]
    condition = _flow()["jobs"]["smoke"]["if"]
    fork = "github.event.pull_request.head.repo.full_name == github.repository"
    assert condition == f"github.event_name != 'pull_request' || {fork}"


# Every workflow of the repository: valid, pinned, and each expression where GitHub
# allows its contexts.
FLOWS = sorted((REPO / ".github/workflows").glob("*.yml"))
REFRESH = REPO / ".github/workflows/refresh.yml"
CI = REPO / ".github/workflows/ci.yml"


def _load(path: Path) -> dict[Any, Any]:
    flow = yaml.safe_load(path.read_text())
    assert isinstance(flow, dict)
    return flow


def _on(flow: dict[Any, Any]) -> dict[str, Any]:
    on = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert isinstance(on, dict)
    return on


@pytest.mark.parametrize("path", FLOWS, ids=lambda p: p.name)
def test_every_workflow_matches_github_s_workflow_schema(path: Path) -> None:
    argv = [_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", [REFRESH, CI], ids=lambda p: p.name)
def test_the_hosted_workflows_are_clean_under_zizmor_s_auditor_persona(path: Path) -> None:
    """gpu-smoke.yml is held to the default persona above: the auditor persona flags
    any self-hosted runner, which a GPU smoke needs."""
    argv = [_tool("zizmor"), "--offline", "--no-progress", "--persona", "auditor", str(path)]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", FLOWS, ids=lambda p: p.name)
def test_every_workflow_is_least_privilege_and_pinned(path: Path) -> None:
    flow = _load(path)
    assert flow["permissions"] == {}, "nothing by default; each job asks for what it needs"
    for name, job in flow["jobs"].items():
        assert "permissions" in job, name
        for step in job["steps"]:
            if "uses" in step:
                ref = step["uses"].rpartition("@")[2]
                assert re.fullmatch("[0-9a-f]{40}", ref), f"{path.name}: {step['uses']}"


# GitHub's "Context availability" table, as its rows read in GitHub's docs
# (docs.github.com/en/actions/reference/workflows-and-actions/contexts, "Context
# availability"): the contexts and special functions an expression may use under each
# workflow key. Unlisted functions may be used anywhere.
GITHUB_TABLE = """\
| run-name | github, inputs, vars | None |
| concurrency | github, inputs, vars | None |
| env | github, secrets, inputs, vars | None |
| jobs.<job_id>.concurrency | github, needs, strategy, matrix, inputs, vars | None |
| jobs.<job_id>.container | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.container.credentials | github, needs, strategy, matrix, env, vars, secrets, inputs | None |
| jobs.<job_id>.container.env.<env_id> | github, needs, strategy, matrix, job, runner, env, vars, secrets, inputs | None |
| jobs.<job_id>.container.image | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.continue-on-error | github, needs, strategy, vars, matrix, inputs | None |
| jobs.<job_id>.defaults.run | github, needs, strategy, matrix, env, vars, inputs | None |
| jobs.<job_id>.env | github, needs, strategy, matrix, vars, secrets, inputs | None |
| jobs.<job_id>.environment | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.environment.url | github, needs, strategy, matrix, job, runner, env, vars, steps, inputs | None |
| jobs.<job_id>.if | github, needs, vars, inputs | always, canceled, success, failure |
| jobs.<job_id>.name | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.outputs.<output_id> | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | None |
| jobs.<job_id>.runs-on | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.secrets.<secrets_id> | github, needs, strategy, matrix, secrets, inputs, vars | None |
| jobs.<job_id>.services | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.services.<service_id>.credentials | github, needs, strategy, matrix, env, vars, secrets, inputs | None |
| jobs.<job_id>.services.<service_id>.env.<env_id> | github, needs, strategy, matrix, job, runner, env, vars, secrets, inputs | None |
| jobs.<job_id>.steps.continue-on-error | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.steps.env | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.steps.if | github, needs, strategy, matrix, job, runner, env, vars, steps, inputs | always, canceled, success, failure, hashFiles |
| jobs.<job_id>.steps.name | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.steps.run | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.steps.timeout-minutes | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.steps.with | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.steps.working-directory | github, needs, strategy, matrix, job, runner, env, vars, secrets, steps, inputs | hashFiles |
| jobs.<job_id>.strategy | github, needs, vars, inputs | None |
| jobs.<job_id>.timeout-minutes | github, needs, strategy, matrix, vars, inputs | None |
| jobs.<job_id>.with.<with_id> | github, needs, strategy, matrix, inputs, vars | None |
| on.workflow_call.inputs.<inputs_id>.default | github, inputs, vars | None |
| on.workflow_call.outputs.<output_id>.value | github, jobs, vars, inputs | None |
"""  # noqa: E501 (GitHub's rows, kept whole so they can be compared with the docs)


def _table() -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """GITHUB_TABLE by key, each <…_id> written as "*": (contexts, special functions)."""
    rows = {}
    for line in GITHUB_TABLE.splitlines():
        key, contexts, functions = (cell.strip() for cell in line.strip("| ").split(" | "))
        key = re.sub(r"<\w+>", "*", key)
        names = frozenset(contexts.split(", "))
        rows[key] = (
            names,
            frozenset() if functions == "None" else frozenset(functions.split(", ")),
        )
    return rows


CONTEXTS = _table()
_RUN_STATUS = frozenset({"always", "canceled", "success", "failure"})
_SPECIAL = _RUN_STATUS | {"hashFiles"}
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_LITERAL = re.compile(r"'(?:[^']|'')*'")
_WORD = re.compile(r"(?<![\w.-])([A-Za-z_][\w-]*)(\s*\()?")


def _key(path: tuple[str, ...]) -> str:
    """The table's row for a place in a workflow: the longest key that matches the start
    of its path, the job id and step index left out ("jobs.x.steps.3.env.A" ->
    "jobs.*.steps.env"); the path itself when no row matches."""
    if path[:1] == ("jobs",) and len(path) > 1:
        path = ("jobs", "*", *path[2:])
        if path[2:3] == ("steps",):
            path = (*path[:3], *path[4:])
    best = ".".join(path)
    for key in sorted(CONTEXTS, key=len):
        parts = key.split(".")
        if len(parts) <= len(path) and all(
            k in ("*", p) for k, p in zip(parts, path[: len(parts)], strict=True)
        ):
            best = key
    return best


def _expressions(node: Any, path: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(row, expression) for every expression in a workflow; an `if` is one whole."""
    if isinstance(node, dict):
        return [found for k, v in node.items() for found in _expressions(v, (*path, str(k)))]
    if isinstance(node, list):
        return [found for i, v in enumerate(node) for found in _expressions(v, (*path, str(i)))]
    if not isinstance(node, str):
        return []
    key = _key(path)
    if key.endswith(".if") and "${{" not in node:
        return [(key, node)]
    return [(key, found) for found in _EXPRESSION.findall(node)]


def context_errors(flow: dict[Any, Any]) -> list[str]:
    """Each expression that uses a context or special function GitHub does not offer
    where it sits, or sits under a key the table above lacks."""
    errors = []
    for key, expression in _expressions(flow):
        if key not in CONTEXTS:
            errors.append(f"{key}: `{expression.strip()}`: no row for this key; add it "
                          "from GitHub's context-availability table")  # fmt: skip
            continue
        contexts, functions = CONTEXTS[key]
        for name, call in _WORD.findall(_LITERAL.sub("''", expression)):
            if call and name in _SPECIAL and name not in functions:
                errors.append(f"{key}: `{expression.strip()}`: {name}() is not available here")
            elif not call and name not in ("true", "false", "null") and name not in contexts:
                errors.append(f"{key}: `{expression.strip()}`: the {name} context is not "
                              f"available here (only {', '.join(sorted(contexts))})")  # fmt: skip
    return errors


@pytest.mark.parametrize("path", FLOWS, ids=lambda p: p.name)
def test_every_expression_uses_only_contexts_available_where_it_sits(path: Path) -> None:
    assert context_errors(_load(path)) == []


def test_the_context_check_catches_what_github_rejects() -> None:
    flow = {"env": {"A": "${{ github.sha }}", "B": "${{ runner.temp }}"},
            "jobs": {"j": {"env": {"R": "${{ runner.temp }}/x", "S": "${{ secrets.T }}"},
                           "if": "always() && secrets.T != ''",
                           "runs-on": "${{ matrix.os }}",
                           "steps": [{"env": {"R": "${{ runner.temp }}"},
                                      "if": "${{ hashFiles('x') != '' && 'runner' }}",
                                      "with": {"p": "${{ steps.a.outputs.b || env.C }}"},
                                      "run": "echo ${{ job.status }}"},
                                     {"if": "secrets.T", "shell": "${{ env.S }}"}]}}}  # fmt: skip
    errors = context_errors(flow)
    assert errors == [
        "env: `runner.temp`: the runner context is not available here "
        "(only github, inputs, secrets, vars)",
        "jobs.*.env: `runner.temp`: the runner context is not available here "
        "(only github, inputs, matrix, needs, secrets, strategy, vars)",
        "jobs.*.if: `always() && secrets.T != ''`: the secrets context is not available "
        "here (only github, inputs, needs, vars)",
        "jobs.*.steps.if: `secrets.T`: the secrets context is not available here "
        "(only env, github, inputs, job, matrix, needs, runner, steps, strategy, vars)",
        "jobs.*.steps.shell: `env.S`: no row for this key; add it from GitHub's "
        "context-availability table",
    ]


def test_the_refresh_runs_project_code_with_a_read_only_token() -> None:
    flow = _load(REFRESH)
    on = _on(flow)
    assert on["schedule"][0]["cron"] and "workflow_dispatch" in on
    refresh, publish = flow["jobs"]["refresh"], flow["jobs"]["publish"]
    assert refresh["permissions"] == {"contents": "read"}
    (run,) = [s["run"] for s in refresh["steps"] if s.get("name") == "refresh"]
    assert "nox -s refresh-digests -- --report-md" in run
    assert publish["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert publish["needs"] == "refresh"
    uploaded = next(s["with"] for s in refresh["steps"] if "upload-artifact@" in s.get("uses", ""))
    downloaded = next(s["with"] for s in publish["steps"]
                      if "download-artifact@" in s.get("uses", ""))  # fmt: skip
    assert uploaded["name"] == downloaded["name"]
    (pr,) = [s for s in publish["steps"] if s.get("id") == "pr"]
    assert pr["env"]["REFRESHED"] == downloaded["path"].rstrip("/")


def test_the_job_that_can_write_runs_nothing_from_the_repository() -> None:
    """publish: only actions/checkout and actions/download-artifact, and shell lines
    that start with the runner's own tools; the write token is read there alone."""
    flow = _load(REFRESH)
    publish = flow["jobs"]["publish"]
    actions = {s["uses"].partition("@")[0] for s in publish["steps"] if "uses" in s}
    assert actions == {"actions/checkout", "actions/download-artifact"}
    tools = {"python3", "cp", "gh", "git", "if", "fi", "else", "exit", "echo", "open=$(gh"}
    for step in publish["steps"]:
        for line in step.get("run", "").replace("\\\n", " ").splitlines():
            words = line.split()
            if words and not words[0].startswith("#"):
                assert words[0] in tools, line
                assert words[0] != "python3" or words[1:3] == ["-m", "json.tool"], line
    refresh = json.dumps(flow["jobs"]["refresh"])
    assert "secrets.REFRESH_TOKEN" in json.dumps(publish)
    assert "secrets.REFRESH_TOKEN" not in refresh and "secrets.HF_TOKEN" in refresh
    assert "secrets.HF_TOKEN" not in json.dumps(publish)


def test_ci_runs_the_project_s_entry_point_on_pull_requests_and_main() -> None:
    flow = _load(CI)
    on = _on(flow)
    assert "pull_request" in on and on["push"]["branches"] == ["main"]
    (job,) = flow["jobs"].values()
    assert job["permissions"] == {"contents": "read"}
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs[-1] == "sudo CI=true bash .ci/run"
    assert (REPO / ".ci/run").is_file()
