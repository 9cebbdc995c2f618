from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.cli.main import FORCE, VERBS, parse
from lockpipe.engines import get_engine
from lockpipe.errors import EngineMissing, UsageError
from tests.lockfactory import make_repo

REPO = Path(__file__).resolve().parents[2]


def lockpipe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", *args], cwd=REPO, text=True, capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, check=False,
    )  # fmt: skip


def test_plan_prints_all_targets_from_the_committed_lock() -> None:
    out = lockpipe("plan")
    assert out.returncode == 0, out.stderr
    for name in ("frank-small", "llama-cuda", "llama-cuda-mtp", "llama-cuda-slots", "llama-cpu"):
        assert f"\n{name} -> " in f"\n{out.stdout}"
    assert "frank-large -> EXTERNAL (built elsewhere: no build, no payloads)" in out.stdout
    assert "UNPINNED: targets.frank-large.external.digest is absent" in out.stdout


def test_broken_lock_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "digests.json"
    bad.write_text("{")
    out = lockpipe("plan", "--lock", str(bad))
    assert out.returncode == 2
    assert "error:" in out.stderr and "not valid JSON" in out.stderr
    assert "Traceback" not in out.stderr


def test_lock_env_var_is_the_default(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    out = lockpipe("plan", env={"LOCKPIPE_LOCK": str(path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("app -> localhost/lockpipe-test/app:1")


def test_unknown_target_lists_the_known_ones() -> None:
    out = lockpipe("plan", "nope")
    assert out.returncode == 64
    assert (
        "no target 'nope' (targets: frank-large, frank-small, llama-cpu, llama-cuda, "
        "llama-cuda-mtp, llama-cuda-slots)" in out.stderr
    )


def test_build_llama_cuda_rejects_a_non_variant() -> None:
    out = lockpipe("build-llama-cuda", "frank-small", "--engine", "buildah")
    assert out.returncode == UsageError.return_code
    assert "not a llama-cuda variant; choose from llama-cuda, llama-cuda-mtp, llama-cuda-slots" in (
        out.stderr
    )


def test_drifted_lock_stops_the_plan(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    (tmp_path / "images/app/Dockerfile").write_text("FROM scratch\n")
    out = lockpipe("plan", "--lock", str(path))
    assert out.returncode == 3
    assert "run nox -s lock" in out.stderr


def test_lock_verb_updates_fingerprints_after_review(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    (tmp_path / "images/app/Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nRUN true\n")
    assert lockpipe("lock", "--check", "--lock", str(path)).returncode == 3
    assert lockpipe("lock", "--lock", str(path)).returncode == 0
    assert lockpipe("lock", "--check", "--lock", str(path)).returncode == 0


def test_no_engine_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("LOCKPIPE_PODMAN_URL", f"unix://{tmp_path}/none.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    with pytest.raises(EngineMissing) as info:
        get_engine()
    text = str(info.value)
    assert "apt-get install buildah" in text
    assert f"podman's API service does not answer at unix://{tmp_path}/none.sock" in text
    assert "dockerd does not answer" in text


def test_unknown_engine_lists_the_valid_names() -> None:
    with pytest.raises(UsageError, match="choose one of: buildah, podman, docker"):
        get_engine("kaniko")


def test_a_closed_stdout_is_not_a_traceback() -> None:
    """``lockpipe plan | head -1``: the reader leaves early; no BrokenPipeError trace."""
    cmd = f"{sys.executable} -m lockpipe plan | head -1"
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, cwd=REPO, check=False)
    assert out.stdout.strip() and "Traceback" not in out.stderr, out.stderr


def test_a_port_out_of_range_is_a_usage_error() -> None:
    out = lockpipe("deploy", "--wait-port", "99999")
    assert out.returncode == 64 and "99999 is not a port (1-65535)" in out.stderr


def test_force_belongs_to_the_verbs_it_changes() -> None:
    assert parse(["build", "--force"]).force and not parse(["build"]).force
    assert parse(["publish", "--force", "--to", "127.0.0.1:5000/x"]).force
    for verb in sorted(set(VERBS) - set(FORCE)):
        argv = [verb, "--force"] if verb != "refresh-digests" else [verb, "--check", "--force"]
        with pytest.raises(SystemExit) as refused:
            parse(argv)
        assert refused.value.code == UsageError.return_code, verb
    out = lockpipe("smoke", "--force")
    assert out.returncode == 64 and "smoke has no --force: drop it" in out.stderr
