"""One pull request per proposed upgrade: the bodies lockpipe writes from the report, and
the workflow's publish-upgrades step run as the runner runs it, with a FAKE gh and real git
(the helpers of test_refresh_jobs.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lockpipe.errors import UsageError
from lockpipe.refresh import prs
from lockpipe.refresh.model import Outcome
from lockpipe.refresh.proposal import Proposal, Verdict
from lockpipe.refresh.report import as_json
from tests.unit.test_refresh_jobs import BARE_GIT, FAKE_GH, FLOW, branches, checkout, fake, git

BROKEN = Verdict(target="frank-small", check="preflight:backend", status="fail",
                 detail="vLLM 0.33.0 (its wheel): a forced backend refuses a layer",
                 fix="drop --attention-backend")  # fmt: skip
PROPOSED = Proposal(kind="bases", name="vllm-openai", pinned="v0.29.0-cu129", version="0.33.0",
                    new="vllm/vllm-openai:v0.33.0-cu129", targets=("frank-small",),
                    first_seen="2026-11-28T00:00:00Z", verdicts=(BROKEN,))  # fmt: skip
HELD = Proposal(kind="bases", name="vllm-openai", pinned="v0.29.0-cu129", version="0.30.0",
                new="vllm/vllm-openai:v0.30.0-cu129", targets=("frank-small",),
                held="first seen …, 0.1 days ago; --min-age 3.0 days")  # fmt: skip


def _report() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(as_json(Outcome(proposals=(PROPOSED, HELD)), "locks/x"))
    return doc


def test_a_pull_request_for_each_proposal_not_held_with_its_verdicts() -> None:
    (pr,) = prs.pull_requests(_report())
    assert (pr.name, pr.version, pr.branch) == ("vllm-openai", "0.33.0",
                                                "lockpipe/upgrade/vllm-openai-0.33.0")  # fmt: skip
    assert pr.title == "lockpipe: upgrade vllm-openai to 0.33.0 (would break frank-small " \
        "(preflight:backend))"  # fmt: skip
    assert "| frank-small | preflight:backend | ❌ fail |" in pr.body
    assert (
        "drop --attention-backend" in pr.body and "`lockpipe upgrade vllm-openai 0.33.0`" in pr.body
    )
    assert prs.from_json(_report()["proposals"][0]) == PROPOSED  # the JSON round-trips


def _step(tmp_path: Path, work: Path, patch: str) -> tuple[subprocess.CompletedProcess[str], str]:
    job = yaml.safe_load(FLOW.read_text())["jobs"]["publish-upgrades"]
    (step,) = [s for s in job["steps"] if s.get("id") == "upgrade-prs"]
    bin_ = fake(tmp_path, "gh", FAKE_GH)
    (bin_ / "open").write_text("")
    out = tmp_path / "upgrades"
    prs.write(prs.pull_requests(_report()), out)
    (out / "01" / "change.patch").write_text(patch)
    script = tmp_path / "upgrade-prs.sh"
    script.write_text(step["run"])
    path = f"{bin_}{os.pathsep}{os.environ['PATH']}"
    env = {**os.environ, **BARE_GIT, "PATH": path, "GH_TOKEN": "x", "UPGRADES": str(out),
           "BASE": "main", "HOME": str(tmp_path)}  # fmt: skip
    argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    result = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    log = bin_ / "gh.log"
    return result, log.read_text() if log.is_file() else ""


def _patch(work: Path, path: str, text: str) -> str:
    """The staged change of ``path`` in a scratch copy of ``work``, as `git diff --cached`."""
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text)
    git(work, "add", "-A")
    patch = git(work, "diff", "--cached", "--binary")
    git(work, "reset", "--quiet", "--hard")
    return patch


def test_each_upgrade_is_its_own_branch_and_pull_request(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    patch = _patch(work, "locks/digests.json", '{"upgraded": true}\n')
    result, gh = _step(tmp_path, work, patch)
    assert result.returncode == 0, result.stderr
    branch = "lockpipe/upgrade/vllm-openai-0.33.0"
    assert git(origin, "show", f"{branch}:locks/digests.json") == '{"upgraded": true}\n'
    assert git(origin, "rev-parse", f"{branch}~1") == git(origin, "rev-parse", "main")
    body = tmp_path / "upgrades" / "01" / "body.md"
    assert f"pr create --base main --head {branch} --title lockpipe: upgrade vllm-openai" in gh
    assert f"--body-file {body}" in gh
    assert "lockpipe/refresh" not in branches(origin)  # apart from the digest refresh


def test_a_patch_outside_what_upgrade_writes_is_refused(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    patch = _patch(work, ".github/workflows/evil.yml", "on: push\n")
    result, gh = _step(tmp_path, work, patch)
    assert result.returncode != 0 and ".github/workflows/evil.yml" in result.stdout
    assert gh == "" or "pr create" not in gh
    assert branches(origin) == "main\n"


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ([], "the report is a list, not an object"),
        ({"proposals": 3}, "proposals is an integer, not a list"),
        ({"proposals": [1]}, "proposals[0] is an integer, not an object"),
        ({"proposals": [{"name": "x"}]}, "the report has no proposals[0].kind"),
        (
            {
                "proposals": [
                    {
                        "kind": "pip",
                        "name": 7,
                        "pinned": "1",
                        "version": "2",
                        "new": "x",
                        "targets": [],
                    }
                ]
            },
            "proposals[0].name is an integer, not a string",
        ),
        (
            {
                "proposals": [
                    {
                        "kind": "pip",
                        "name": "x",
                        "pinned": "1",
                        "version": "2",
                        "new": "x",
                        "targets": [3],
                    }
                ]
            },
            "proposals[0].targets[0] is an integer, not a string",
        ),
    ],
)
def test_a_report_of_another_shape_is_one_line_naming_it(
    doc: Any, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, ``[]`` was an AttributeError's traceback in the workflow's log."""
    report = tmp_path / "refresh.json"
    report.write_text(json.dumps(doc))
    assert prs.main([str(report), str(tmp_path / "out")]) == UsageError.return_code
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {report}: not a refresh report"), err
    assert said in err[0] and "pass the JSON report refresh-digests wrote" in err[0], err
    assert not (tmp_path / "out").exists()
