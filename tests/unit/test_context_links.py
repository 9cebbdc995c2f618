"""Links in a build context: the fingerprint, the build key and staging use one file list.

A link that stays inside the context is followed (a linked folder's files are listed under
the link's name); one that leaves it is refused, naming it, as another checkout would not
have what it points to. Before, rglob listed no file under a linked folder while staging
copied them all: an edit there was no drift and the build stayed "up to date".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import DriftError, LockError
from lockpipe.imagebuild.context import stage
from lockpipe.imagebuild.plan import plan_target
from lockpipe.lock import fingerprint
from lockpipe.lock.fingerprint import check_drift, context_files, relock
from lockpipe.lock.model import dump_lock, load_lock
from tests.lockfactory import make_repo

REPO = Path(__file__).resolve().parents[2]


def lockpipe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", *args], cwd=REPO, text=True, capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )  # fmt: skip


def _relocked(path: Path) -> None:
    path.write_text(dump_lock(relock(load_lock(path))))


def test_a_file_under_a_folder_linked_inside_the_context_counts(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    ctx = tmp_path / "images/app"
    (ctx / "real").mkdir()
    (ctx / "real/x.txt").write_text("one\n")
    (ctx / "lib").symlink_to("real")
    _relocked(path)
    lock = load_lock(path)
    files = context_files(lock, lock.target("app"))
    assert sorted(files) == ["Dockerfile", "lib/x.txt", "real/x.txt"]
    assert dict(plan_target(lock, "app").files) == files  # the build key's list
    (ctx / "real/x.txt").write_text("two\n")
    with pytest.raises(DriftError, match=r"fingerprints\.app"):
        check_drift(lock, lock.target("app"))


def test_staging_copies_exactly_the_listed_files(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "real/deep").mkdir(parents=True)
    (ctx / "empty").mkdir()
    (ctx / "__pycache__").mkdir()
    (ctx / "__pycache__/m.pyc").write_bytes(b"x")
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    (ctx / "real/deep/y").write_text("y")
    (ctx / "lib").symlink_to("real")
    (ctx / "f").symlink_to("real/deep/y")
    listed = fingerprint.context_paths(ctx)
    assert listed == ["Dockerfile", "f", "lib/deep/y", "real/deep/y"]
    dest, _ = stage(ctx, "Dockerfile", {}, {}, tmp_path / "staged")
    staged = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert staged == listed
    assert (dest / "lib/deep/y").read_text() == "y" and not (dest / "lib").is_symlink()


def test_a_link_back_up_is_refused_naming_it(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "sub").mkdir(parents=True)
    (ctx / "sub/up").symlink_to("..")
    with pytest.raises(LockError, match=r"ctx/sub/up: a link to .*a folder that holds it"):
        fingerprint.context_paths(ctx)


def test_a_link_out_of_the_context_is_refused_by_plan_and_lock(tmp_path: Path) -> None:
    path = make_repo(tmp_path)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared/conf.txt").write_text("one\n")
    (tmp_path / "images/app/lib").symlink_to("../../shared")
    for verb in ("lock", "plan"):
        out = lockpipe(verb, "--lock", str(path))
        assert out.returncode == LockError.return_code, (verb, out.stdout, out.stderr)
        assert "images/app/lib: a link to" in out.stderr
        assert "outside the build context" in out.stderr
        assert "copy it into the context" in out.stderr


def test_a_file_linked_out_of_the_context_is_refused(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "conf.txt").write_text("x")
    (ctx / "conf.txt").symlink_to(tmp_path / "conf.txt")
    with pytest.raises(LockError, match=r"ctx/conf.txt: a link to .*copy it into the context"):
        stage(ctx, "Dockerfile", {}, {}, tmp_path / "staged")
