"""The scheduled jobs, run as their hosts run them, with FAKE gh and nox and real git:
the workflow's pull-request step, and the systemd service's script; the units verified
by systemd-analyze."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[2]
FLOW = REPO / ".github/workflows/refresh.yml"
UNITS = REPO / "jobs/systemd"
FAKE_GH = """#!/bin/sh
# FAKE gh, for tests only: logs its arguments; `pr list` prints the open pull request.
here=$(dirname "$0")
echo "$*" >> "$here/gh.log"
case "$1 $2" in "pr list") cat "$here/open";; esac
"""
FAKE_NOX = """#!/bin/sh
# FAKE nox, for tests only: logs its arguments, writes the reports, moves the lock.
echo "$*" >> "$FAKE_LOG"
while [ $# -gt 0 ]; do
  case "$1" in --report-md) echo "# report" > "$2";; --report-json) echo "{}" > "$2";; esac
  shift
done
[ -n "$FAKE_MOVE" ] && echo '{"moved": true}' > locks/digests.json
exit 0
"""


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True)  # fmt: skip
    return done.stdout


def checkout(tmp_path: Path) -> tuple[Path, Path]:
    """A bare ``origin`` with main holding a lock, and a clone of it; (origin, clone)."""
    if shutil.which("git") is None:
        unavailable("git is not installed")
    origin, work = tmp_path / "origin.git", tmp_path / "work"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    git(tmp_path, "clone", "--quiet", str(origin), str(work))
    (work / "locks").mkdir()
    (work / "locks/digests.json").write_text('{"moved": false}\n')
    git(work, "checkout", "--quiet", "-b", "main")
    git(work, "add", "locks/digests.json")
    git(work, "commit", "--quiet", "-m", "lock")
    git(work, "push", "--quiet", "origin", "main")
    return origin, work


def fake(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "fake-bin"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text)
    (folder / name).chmod(0o755)
    return folder


def pr_step(
    tmp_path: Path, work: Path, open_pr: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    flow = yaml.safe_load(FLOW.read_text())
    (job,) = flow["jobs"].values()
    (step,) = [s for s in job["steps"] if s.get("id") == "pr"]
    bin_ = fake(tmp_path, "gh", FAKE_GH)
    (bin_ / "open").write_text(open_pr)
    (tmp_path / "report.md").write_text("## the report\n")
    script = tmp_path / "pr.sh"
    script.write_text(step["run"])
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "GH_TOKEN": "x",
           "BRANCH": job["env"]["BRANCH"], "REPORT": str(tmp_path / "report.md"),
           "BASE": "main", "HOME": str(tmp_path)}  # fmt: skip
    argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    result = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    log = bin_ / "gh.log"
    return result, log.read_text() if log.is_file() else ""


def test_nothing_moved_opens_no_pull_request(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    result, gh = pr_step(tmp_path, work, "")
    assert result.returncode == 0, result.stderr
    assert "every pin is current" in result.stdout and gh == ""
    assert "lockpipe/refresh" not in git(origin, "branch", "--list")


def test_a_moved_lock_is_pushed_to_the_one_branch_and_a_pull_request_opened(
    tmp_path: Path,
) -> None:
    origin, work = checkout(tmp_path)
    (work / "locks/digests.json").write_text('{"moved": true}\n')
    result, gh = pr_step(tmp_path, work, "")
    assert result.returncode == 0, result.stderr
    assert git(origin, "show", "lockpipe/refresh:locks/digests.json") == '{"moved": true}\n'
    assert git(origin, "log", "--format=%s", "main..lockpipe/refresh") == "lockpipe: refresh pins\n"
    report = str(tmp_path / "report.md")
    assert (f"pr create --base main --head lockpipe/refresh --title lockpipe: refresh pins "
            f"--body-file {report}") in gh  # fmt: skip


def test_an_open_pull_request_is_updated_not_duplicated(tmp_path: Path) -> None:
    _, work = checkout(tmp_path)
    (work / "locks/digests.json").write_text('{"moved": true}\n')
    result, gh = pr_step(tmp_path, work, "17\n")
    assert result.returncode == 0, result.stderr
    assert f"pr edit 17 --body-file {tmp_path / 'report.md'}" in gh and "pr create" not in gh


def service_script(tmp_path: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bin_ = fake(tmp_path, "nox", FAKE_NOX)
    full = {**os.environ, "LOCKPIPE_CHECKOUT": str(work), "LOCKPIPE_NOX": str(bin_ / "nox"),
            "LOCKPIPE_REPORTS": str(tmp_path / "reports"), "FAKE_LOG": str(tmp_path / "nox.log"),
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t", **env}  # fmt: skip
    return subprocess.run([str(UNITS / "lockpipe-refresh.sh")], env=full, capture_output=True,
                          text=True, check=False)  # fmt: skip


def test_the_service_script_reports_only_unless_a_branch_is_set(tmp_path: Path) -> None:
    _, work = checkout(tmp_path)
    result = service_script(tmp_path, work)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "nox.log").read_text().startswith("-s refresh-digests -- --dry-run ")
    assert (tmp_path / "reports/latest.md").read_text() == "# report\n"
    assert git(work, "status", "--porcelain") == ""


def test_the_service_script_pushes_a_moved_lock_to_its_branch(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    result = service_script(tmp_path, work, LOCKPIPE_BRANCH="lockpipe/refresh", FAKE_MOVE="1")
    assert result.returncode == 0, result.stderr
    assert "--dry-run" not in (tmp_path / "nox.log").read_text()
    assert git(origin, "show", "lockpipe/refresh:locks/digests.json") == '{"moved": true}\n'
    assert git(origin, "log", "-1", "--format=%B", "lockpipe/refresh").startswith("# report")


def _verify(folder: Path) -> subprocess.CompletedProcess[str]:
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze is not installed (apt-get install systemd)")
    units = [str(folder / "lockpipe-refresh.service"), str(folder / "lockpipe-refresh.timer")]
    return subprocess.run(["systemd-analyze", "verify", *units], capture_output=True, text=True,
                          check=False)  # fmt: skip


def test_the_units_verify_with_the_script_where_the_service_runs_it(tmp_path: Path) -> None:
    """systemd-analyze checks that ExecStart's program exists. It is installed at
    /usr/local/libexec/lockpipe-refresh (docs/refresh.md), which this machine lacks: the
    service is verified with that one path pointed at the script in this checkout."""
    service = (UNITS / "lockpipe-refresh.service").read_text()
    assert "ExecStart=/usr/local/libexec/lockpipe-refresh\n" in service
    (tmp_path / "lockpipe-refresh.service").write_text(
        service.replace("/usr/local/libexec/lockpipe-refresh", str(UNITS / "lockpipe-refresh.sh"))
    )
    shutil.copy(UNITS / "lockpipe-refresh.timer", tmp_path)
    result = _verify(tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr


@pytest.mark.parametrize("broken", ["Type=oneshot\n", "OnCalendar=*-*-* 05:23:00 UTC\n"])
def test_systemd_analyze_does_reject_a_broken_unit(tmp_path: Path, broken: str) -> None:
    """The check above can fail: a bad Type= or OnCalendar= is rejected."""
    service = (UNITS / "lockpipe-refresh.service").read_text()
    timer = (UNITS / "lockpipe-refresh.timer").read_text()
    service = service.replace(
        "/usr/local/libexec/lockpipe-refresh", str(UNITS / "lockpipe-refresh.sh")
    )
    if broken.startswith("Type"):
        service = service.replace(broken, "Type=sometimes\n")
    else:
        timer = timer.replace(broken, "OnCalendar=the 32nd\n")
    (tmp_path / "lockpipe-refresh.service").write_text(service)
    (tmp_path / "lockpipe-refresh.timer").write_text(timer)
    result = _verify(tmp_path)
    assert result.returncode != 0 or result.stderr != ""
