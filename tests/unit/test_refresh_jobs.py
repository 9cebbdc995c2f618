"""The scheduled jobs, run as their hosts run them, with FAKE gh and nox and real git:
the workflow's pull-request step, and the systemd service's script; the units verified
by systemd-analyze where docs/refresh.md's install steps put them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lockpipe.cli.main import parse
from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[2]
FLOW = REPO / ".github/workflows/refresh.yml"
UNITS = REPO / "jobs/systemd"
DOC = REPO / "docs/refresh.md"
FAKE_GH = """#!/bin/sh
# FAKE gh, for tests only: logs its arguments; `pr list` prints the open pull request.
here=$(dirname "$0")
echo "$*" >> "$here/gh.log"
case "$1 $2" in "pr list") cat "$here/open";; esac
"""
FAKE_NOX = """#!/bin/sh
# FAKE nox, for tests only: logs its arguments, where it ran and the lock it found there,
# writes the reports, moves the lock when FAKE_MOVE is set, fails when FAKE_FAIL is.
{ echo "$*"; echo "pwd=$PWD"; echo "lock=$(cat locks/digests.json)"; } >> "$FAKE_LOG"
while [ $# -gt 0 ]; do
  case "$1" in --report-md) echo "# report" > "$2";; --report-json) echo "{}" > "$2";; esac
  shift
done
[ -n "$FAKE_MOVE" ] && echo '{"moved": true}' > locks/digests.json
[ -z "$FAKE_FAIL" ]
"""
# git with no identity and no configuration but the repository's own, as the service's
# user has: the script must bring its own identity.
BARE_GIT = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def git(cwd: Path, *args: str) -> str:
    """git for the test's own set-up commits (the scripts under test get no identity)."""
    env = {**os.environ, **BARE_GIT}
    argv = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


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


def branches(origin: Path) -> str:
    return git(origin, "branch", "--list", "--format=%(refname:short)")


# --- the workflow's publish job -------------------------------------------------------


def publish_job() -> dict[str, Any]:
    job = yaml.safe_load(FLOW.read_text())["jobs"]["publish"]
    assert isinstance(job, dict)
    return job


def pr_step(
    tmp_path: Path, work: Path, open_pr: str, lock: str
) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the publish job's step `pr` in ``work`` with ``lock`` as the artifact's lock."""
    job = publish_job()
    (step,) = [s for s in job["steps"] if s.get("id") == "pr"]
    bin_ = fake(tmp_path, "gh", FAKE_GH)
    (bin_ / "open").write_text(open_pr)
    refreshed = tmp_path / "artifact"
    refreshed.mkdir()
    (refreshed / "digests.json").write_text(lock)
    (refreshed / "refresh.md").write_text("## the report\n")
    script = tmp_path / "pr.sh"
    script.write_text(step["run"])
    env = {**os.environ, **BARE_GIT, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}",
           "GH_TOKEN": "x", "BRANCH": job["env"]["BRANCH"], "REFRESHED": str(refreshed),
           "BASE": "main", "HOME": str(tmp_path), "RUN_URL": "https://run/1"}  # fmt: skip
    argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)]
    result = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, check=False)
    log = bin_ / "gh.log"
    return result, log.read_text() if log.is_file() else ""


MOVED = '{"moved": true}\n'
SAME = '{"moved": false}\n'


def test_nothing_moved_opens_no_pull_request(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    result, gh = pr_step(tmp_path, work, "", SAME)
    assert result.returncode == 0, result.stderr
    assert "every pin is current" in result.stdout
    assert "pr create" not in gh and "pr close" not in gh
    assert branches(origin) == "main\n"


def test_nothing_moved_closes_a_stale_pull_request_and_deletes_its_branch(
    tmp_path: Path,
) -> None:
    origin, work = checkout(tmp_path)
    git(work, "push", "--quiet", "origin", "main:refs/heads/lockpipe/refresh")
    assert "lockpipe/refresh" in branches(origin)
    result, gh = pr_step(tmp_path, work, "17\n", SAME)
    assert result.returncode == 0, result.stderr
    assert "pr close 17 --comment Every pin is current again (https://run/1)" in gh
    assert branches(origin) == "main\n"
    assert "pr edit" not in gh and "pr create" not in gh


def test_a_moved_lock_is_pushed_to_the_one_branch_and_a_pull_request_opened(
    tmp_path: Path,
) -> None:
    origin, work = checkout(tmp_path)
    result, gh = pr_step(tmp_path, work, "", MOVED)
    assert result.returncode == 0, result.stderr
    assert git(origin, "show", "lockpipe/refresh:locks/digests.json") == MOVED
    assert git(origin, "log", "--format=%s", "main..lockpipe/refresh") == "lockpipe: refresh pins\n"
    report = str(tmp_path / "artifact/refresh.md")
    assert (f"pr create --base main --head lockpipe/refresh --title lockpipe: refresh pins "
            f"--body-file {report}") in gh  # fmt: skip


def test_an_open_pull_request_is_updated_not_duplicated(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    result, gh = pr_step(tmp_path, work, "17\n", MOVED)
    assert result.returncode == 0, result.stderr
    assert f"pr edit 17 --body-file {tmp_path / 'artifact/refresh.md'}" in gh
    assert "pr create" not in gh and "pr close" not in gh
    assert git(origin, "show", "lockpipe/refresh:locks/digests.json") == MOVED


def test_an_artifact_lock_that_is_not_json_is_refused_before_anything_is_pushed(
    tmp_path: Path,
) -> None:
    origin, work = checkout(tmp_path)
    result, gh = pr_step(tmp_path, work, "", "<html>not a lock</html>\n")
    assert result.returncode != 0
    assert gh == "" and branches(origin) == "main\n"
    assert (work / "locks/digests.json").read_text() == SAME


# --- the systemd service's script -----------------------------------------------------


def service_script(tmp_path: Path, work: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bin_ = fake(tmp_path, "nox", FAKE_NOX)
    full = {**os.environ, **BARE_GIT, "HOME": str(tmp_path), "LOCKPIPE_CHECKOUT": str(work),
            "LOCKPIPE_NOX": str(bin_ / "nox"), "LOCKPIPE_REPORTS": str(tmp_path / "reports"),
            "FAKE_LOG": str(tmp_path / "nox.log"), "FAKE_MOVE": "", "FAKE_FAIL": "",
            "TMPDIR": str(tmp_path), **env}  # fmt: skip
    for name in ("LOCKPIPE_BRANCH", "LOCKPIPE_GIT_NAME", "LOCKPIPE_GIT_EMAIL"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([str(UNITS / "lockpipe-refresh.sh")], env=full, capture_output=True,
                          text=True, check=False)  # fmt: skip


def advance_main(tmp_path: Path, origin: Path, lock: str) -> None:
    """Someone else moves main at the remote after the service's clone was made."""
    other = tmp_path / "other"
    git(tmp_path, "clone", "--quiet", str(origin), str(other))
    (other / "locks/digests.json").write_text(lock)
    git(other, "commit", "--quiet", "-am", "newer lock")
    git(other, "push", "--quiet", "origin", "main")


def nox_log(tmp_path: Path) -> str:
    return (tmp_path / "nox.log").read_text()


def test_report_only_compares_against_the_newest_base_not_the_old_checkout(
    tmp_path: Path,
) -> None:
    origin, work = checkout(tmp_path)
    head = git(work, "rev-parse", "HEAD")
    advance_main(tmp_path, origin, '{"newer": true}\n')
    result = service_script(tmp_path, work)
    assert result.returncode == 0, result.stderr
    log = nox_log(tmp_path)
    assert log.startswith("-s refresh-digests -- --dry-run ")
    # the timer writes the proposals too, with a first-seen record kept across worktrees
    record = tmp_path / "reports" / "first-seen.json"
    assert f"--propose --min-age 3d --first-seen {record}" in log
    argv = log.splitlines()[0].split(" -- ", 1)[1].split()
    args = parse(["refresh-digests", *argv])  # lockpipe's own parser takes them
    assert (args.propose, args.min_age, args.first_seen) == (True, "3d", record)
    assert 'lock={"newer": true}' in log, "the refresh saw the old lock"
    ran_in = Path(re.findall(r"^pwd=(.*)$", log, re.M)[0])
    assert ran_in != work and not ran_in.exists(), "the worktree was not cleaned up"
    assert (tmp_path / "reports/latest.md").read_text() == "# report\n"
    assert git(work, "status", "--porcelain") == "" and git(work, "rev-parse", "HEAD") == head
    assert git(work, "worktree", "list", "--porcelain").count("worktree ") == 1


def test_the_service_script_pushes_a_moved_lock_with_its_own_identity(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    who_env = {"LOCKPIPE_GIT_NAME": "Fleet Bot", "LOCKPIPE_GIT_EMAIL": "bot@fleet"}
    result = service_script(tmp_path, work, LOCKPIPE_BRANCH="lockpipe/refresh", FAKE_MOVE="1",
                            **who_env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--dry-run" not in nox_log(tmp_path)
    assert git(origin, "show", "lockpipe/refresh:locks/digests.json") == MOVED
    assert git(origin, "log", "-1", "--format=%B", "lockpipe/refresh").startswith("# report")
    who = git(origin, "log", "-1", "--format=%an <%ae> %cn <%ce>", "lockpipe/refresh")
    assert who == "Fleet Bot <bot@fleet> Fleet Bot <bot@fleet>\n"
    assert git(origin, "rev-parse", "lockpipe/refresh~1") == git(origin, "rev-parse", "main")


def test_without_a_configured_identity_the_commit_still_has_one(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    result = service_script(tmp_path, work, LOCKPIPE_BRANCH="lockpipe/refresh", FAKE_MOVE="1")
    assert result.returncode == 0, result.stderr
    who = git(origin, "log", "-1", "--format=%an <%ae>", "lockpipe/refresh")
    assert who.startswith("lockpipe refresh <lockpipe@"), who


def test_nothing_moved_deletes_a_stale_branch(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    git(work, "push", "--quiet", "origin", "main:refs/heads/lockpipe/refresh")
    result = service_script(tmp_path, work, LOCKPIPE_BRANCH="lockpipe/refresh")
    assert result.returncode == 0, result.stderr
    assert branches(origin) == "main\n" and "deleted the stale" in result.stdout


def test_an_interrupted_run_does_not_wedge_the_next(tmp_path: Path) -> None:
    """A run killed mid-way leaves a registered worktree whose folder PrivateTmp threw
    away, and perhaps a dirty checkout; the next run goes through all the same."""
    origin, work = checkout(tmp_path)
    git(work, "worktree", "add", "--quiet", "--detach", str(tmp_path / "gone"), "HEAD")
    shutil.rmtree(tmp_path / "gone")
    (work / "locks/digests.json").write_text("half-written")
    result = service_script(tmp_path, work, LOCKPIPE_BRANCH="lockpipe/refresh", FAKE_MOVE="1")
    assert result.returncode == 0, result.stderr
    assert git(origin, "show", "lockpipe/refresh:locks/digests.json") == MOVED


def test_a_failed_refresh_fails_the_run_and_still_cleans_up(tmp_path: Path) -> None:
    origin, work = checkout(tmp_path)
    result = service_script(tmp_path, work, LOCKPIPE_BRANCH="lockpipe/refresh", FAKE_MOVE="1",
                            FAKE_FAIL="1")  # fmt: skip
    assert result.returncode != 0
    assert branches(origin) == "main\n"
    assert git(work, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not list(tmp_path.glob("lockpipe-refresh.*"))


def test_old_reports_are_pruned_to_the_configured_count(tmp_path: Path) -> None:
    _, work = checkout(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    old = [f"2020010{day}T000000Z" for day in range(1, 6)]
    for stamp in old:
        (reports / f"{stamp}.md").write_text("old\n")
        (reports / f"{stamp}.json").write_text("{}\n")
    (reports / "notes.txt").write_text("not a report\n")
    result = service_script(tmp_path, work, LOCKPIPE_KEEP_REPORTS="3")
    assert result.returncode == 0, result.stderr
    kept = sorted(p.name for p in reports.iterdir())
    newest = os.readlink(reports / "latest.md")
    assert kept == sorted([f"{old[3]}.md", f"{old[3]}.json", f"{old[4]}.md", f"{old[4]}.json",
                           newest, newest.replace(".md", ".json"), "latest.md",
                           "notes.txt"])  # fmt: skip


@pytest.mark.parametrize(
    ("setting", "words"),
    [({"LOCKPIPE_KEEP_REPORTS": "0"}, "LOCKPIPE_KEEP_REPORTS=0 is not a whole number >= 1"),
     ({"LOCKPIPE_CHECKOUT": "/nonexistent"}, "LOCKPIPE_CHECKOUT=/nonexistent is not a git "
                                             "checkout; clone the repository there")],
)  # fmt: skip
def test_a_bad_setting_is_one_line_that_names_it(
    tmp_path: Path, setting: dict[str, str], words: str
) -> None:
    _, work = checkout(tmp_path)
    result = service_script(tmp_path, work, **setting)
    assert result.returncode == 64
    assert result.stderr.count("\n") == 1 and words in result.stderr, result.stderr


# --- the units, where docs/refresh.md's install steps put them ------------------------


def documented_installs() -> list[list[str]]:
    """The `install` commands of docs/refresh.md's systemd install block, as argv."""
    text = DOC.read_text().split("### systemd", 1)[1]
    block = text.split("```sh\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    commands = [shlex.split(line) for line in block.splitlines()]
    return [c[2:] for c in commands if c[:2] == ["sudo", "install"]]


def install_as_documented(root: Path) -> None:
    """Run the documented `install` commands with their targets (the last argument, or
    each folder of `install -d`) under ``root``, and without owners (-o/-g: the
    lockpipe user does not exist here). The root starts with what every systemd host
    has, /etc/systemd/system; not /usr/local/libexec, which Debian does not create."""
    (root / "etc/systemd/system").mkdir(parents=True)
    for argv in documented_installs():
        args: list[str] = []
        words = iter(argv)
        for word in words:
            if word in ("-o", "-g"):
                next(words)
            else:
                args.append(word)
        targets = range(len(args)) if "-d" in args else [len(args) - 1]
        for i in targets:
            if args[i].startswith("/"):
                args[i] = str(root) + args[i]
        subprocess.run(["install", *args], cwd=REPO, check=True)


def _systemd_root(root: Path) -> None:
    """Give ``root`` this host's systemd units: systemd-analyze resolves the units'
    dependencies (sysinit.target, timers.target) inside the root."""
    if shutil.which("systemd-analyze") is None:
        unavailable("systemd-analyze is not installed (apt-get install systemd)")
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)


def _verify(root: Path, *units: str) -> subprocess.CompletedProcess[str]:
    _systemd_root(root)
    argv = ["systemd-analyze", "verify", f"--root={root}", *units]
    return subprocess.run(argv, capture_output=True, text=True, check=False)


def test_the_documented_install_puts_the_script_where_the_service_runs_it(tmp_path: Path) -> None:
    service = (UNITS / "lockpipe-refresh.service").read_text()
    (exec_start,) = re.findall(r"^ExecStart=(\S+)$", service, re.M)
    install_as_documented(tmp_path)
    installed = tmp_path / exec_start.lstrip("/")
    assert installed.read_bytes() == (UNITS / "lockpipe-refresh.sh").read_bytes()
    assert os.access(installed, os.X_OK)
    for unit in ("lockpipe-refresh.service", "lockpipe-refresh.timer"):
        assert (tmp_path / "etc/systemd/system" / unit).is_file(), unit


def test_the_installed_units_verify_unpatched(tmp_path: Path) -> None:
    """No path is patched: systemd-analyze checks ExecStart's program inside the root
    that the documented install steps filled."""
    install_as_documented(tmp_path)
    result = _verify(tmp_path, "lockpipe-refresh.service", "lockpipe-refresh.timer")
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_verify_does_fail_when_the_script_is_not_installed(tmp_path: Path) -> None:
    install_as_documented(tmp_path)
    (tmp_path / "usr/local/libexec/lockpipe-refresh").unlink()
    result = _verify(tmp_path, "lockpipe-refresh.service")
    assert result.returncode != 0 and "is not executable" in result.stderr


@pytest.mark.parametrize(
    ("unit", "line", "bad"),
    [("lockpipe-refresh.service", "Type=oneshot", "Type=sometimes"),
     ("lockpipe-refresh.service", "ProtectSystem=strict", "ProtectSystem=very"),
     ("lockpipe-refresh.timer", "OnCalendar=*-*-* 05:23:00 UTC", "OnCalendar=the 32nd")],
)  # fmt: skip
def test_systemd_analyze_does_reject_a_broken_unit(
    tmp_path: Path, unit: str, line: str, bad: str
) -> None:
    """The check above can fail: a bad Type=, ProtectSystem= or OnCalendar= is rejected."""
    install_as_documented(tmp_path)
    path = tmp_path / "etc/systemd/system" / unit
    assert f"\n{line}\n" in path.read_text()
    path.write_text(path.read_text().replace(f"\n{line}\n", f"\n{bad}\n"))
    result = _verify(tmp_path, "lockpipe-refresh.service", "lockpipe-refresh.timer")
    assert result.returncode != 0 or result.stderr != ""


HARDENING = {"User": "lockpipe", "Group": "lockpipe", "StateDirectory": "lockpipe",
             "WorkingDirectory": "/var/lib/lockpipe", "ProtectSystem": "strict",
             "ProtectHome": "yes", "PrivateTmp": "yes", "NoNewPrivileges": "yes"}  # fmt: skip


def test_the_service_runs_hardened_as_its_own_user(tmp_path: Path) -> None:
    settings = dict(
        line.split("=", 1)
        for line in (UNITS / "lockpipe-refresh.service").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert {key: settings.get(key) for key in HARDENING} == HARDENING
    install_as_documented(tmp_path)
    _systemd_root(tmp_path)
    # systemd's own score: 0 (locked down) to 10 (exposed); 2.0 and under reads "OK"
    argv = ["systemd-analyze", "security", "--offline=true", "--threshold=20",
            f"--root={tmp_path}", "lockpipe-refresh.service"]  # fmt: skip
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-600:] + result.stderr


def test_the_documented_user_and_state_folder_match_the_unit() -> None:
    install = DOC.read_text().split("### systemd", 1)[1].split("```sh\n", 1)[1]
    block = install.split("```", 1)[0]
    assert "useradd --system" in block and " lockpipe\n" in block
    assert "--home-dir /var/lib/lockpipe" in block
    assert "/var/lib/lockpipe/checkout" in block


def test_the_first_seen_record_outlives_each_actions_runner() -> None:
    """--min-age on Actions: the refresh job restores the newest first-seen record from the
    Actions cache before it runs, passes that file, and saves it under a key of its own."""
    steps = yaml.safe_load(FLOW.read_text())["jobs"]["refresh"]["steps"]
    at = {i: s for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/cache@")
          and "first-seen" in s["with"]["path"]}  # fmt: skip
    assert len(at) == 1, "one actions/cache step of the first-seen record in the refresh job"
    ((where, cache),) = at.items()
    assert re.fullmatch(r"actions/cache@[0-9a-f]{40}", cache["uses"])
    run = next(i for i, s in enumerate(steps) if s.get("name") == "refresh")
    assert where < run, "the record is restored before the refresh reads it"
    command = " ".join(steps[run]["run"].split())
    assert "--min-age 3d" in command
    record = re.search(r'--first-seen "([^"]+)"', command)
    assert record and record[1].rsplit("/", 1)[0] == "$RUNNER_TEMP/first-seen"
    assert cache["with"]["path"] == "${{ runner.temp }}/first-seen"
    prefix = cache["with"]["restore-keys"]
    assert cache["with"]["key"].startswith(prefix) and "github.run_id" in cache["with"]["key"]


def test_the_refresh_builds_vllm_s_parser_so_its_verdicts_come_from_code() -> None:
    """Before the refresh: a Python that has vLLM parser constraints sets (none exists for
    ubuntu-24.04's 3.12), nox on it, the environments restored from the Actions cache under
    a key of their inputs, then `nox -s vllm-parser -- --all` builds what is missing, where
    the refresh's --cache default (~/.cache/lockpipe) looks for them."""
    from lockpipe.preflight import vllm_parser_env

    flow = yaml.safe_load(FLOW.read_text())
    steps = flow["jobs"]["refresh"]["steps"]

    def at(uses: str = "", name: str = "", path: str = "") -> int:
        (i,) = [i for i, s in enumerate(steps) if s.get("uses", "").startswith(uses)
                and s.get("name", "").startswith(name)
                and path in s.get("with", {}).get("path", "")]  # fmt: skip
        return i

    assert flow["jobs"]["refresh"]["runs-on"] == "ubuntu-24.04"
    assert vllm_parser_env.with_sets(REPO, (3, 12)) == [], "3.12 has a set now: drop setup-python"
    py, nox = at(uses="actions/setup-python@"), at(name="install nox")
    cache, build = at(uses="actions/cache@", path="vllm-parser"), at(name="vLLM's parser")
    assert py < nox < cache < build < at(name="refresh")
    assert re.fullmatch(r"actions/setup-python@[0-9a-f]{40}", steps[py]["uses"])
    major, minor = map(int, str(steps[py]["with"]["python-version"]).split("."))
    assert vllm_parser_env.with_sets(REPO, (major, minor)) == ["0.29.0", "0.33.0"]
    outputs = f"steps.{steps[py]['id']}.outputs"
    assert steps[nox]["env"]["PYTHON"] == "${{ " + outputs + ".python-path }}"
    assert steps[nox]["run"].startswith('"$PYTHON" -m venv "$RUNNER_TEMP/nox-venv"')
    assert steps[cache]["uses"] == "actions/cache@0057852bfaa89a56745cba8c7296529d2fc39830"
    assert steps[cache]["with"]["path"] == "~/.cache/lockpipe/vllm-parser"
    key = steps[cache]["with"]["key"]
    assert f"{outputs}.python-version" in key
    inputs = "'constraints/vllm-parser-*.txt', 'lockpipe/preflight/data/vllm-*.json'"
    assert f"hashFiles({inputs})" in key
    assert steps[build]["run"].strip() == "nox -s vllm-parser -- --all"
    command = " ".join(steps[at(name="refresh")]["run"].split())
    assert "--cache" not in command and "--propose" in command
