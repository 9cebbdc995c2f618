"""What lockpipe.fs reads and writes, held to bounds (issue 18).

read_utf8 reads a regular file of at most READ_LIMIT bytes: ``plan --lock /dev/zero`` grew
to 24 GB, a FIFO blocked for ever, and a sparse 100 MiB file was read whole. write_atomic
writes UTF-8 only: a file name of other bytes (held as lone surrogates) in the text was
UnicodeEncodeError's traceback, after the work it reports on; now one line, nothing written.
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe import fs
from lockpipe.cli.main import main
from lockpipe.errors import LockError, UsageError
from tests.unit.test_deploy_cli import TARGET, built
from tests.unit.test_deploy_render import LOCK

REPO = Path(__file__).resolve().parents[2]
BAD_DIR = os.fsdecode(b"\xff")  # a folder name that is not UTF-8, as Python holds it


def _limited() -> None:
    # memory-safe: an unbounded read dies at 1 GiB, not at the host's last byte
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _plan_lock(lock: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``lockpipe plan --lock LOCK`` in its own process, under a memory and a time limit."""
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "plan", "--lock", lock],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, preexec_fn=_limited,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_a_lock_that_is_dev_zero_is_one_line_not_a_read_without_end(tmp_path: Path) -> None:
    done = _plan_lock("/dev/zero", tmp_path)
    assert done.returncode == LockError.return_code, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "/dev/zero: a character device, not a file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_lock_that_is_a_fifo_without_a_writer_is_read_as_empty_not_waited_on(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "lock.json"
    os.mkfifo(fifo)
    done = _plan_lock(str(fifo), tmp_path)  # before: blocked in open() until the timeout
    assert done.returncode == LockError.return_code, done.stderr
    assert str(fifo) in done.stderr and "Traceback" not in done.stderr


def test_a_pipe_is_read_to_its_end(tmp_path: Path) -> None:
    """``HF_TOKEN_PATH=<(pass hf)``: the shell hands over a pipe (/dev/fd/63)."""
    read, write = os.pipe()
    os.write(write, b"hf_secret\n")
    os.close(write)
    try:
        assert fs.read_utf8(Path(f"/proc/self/fd/{read}"), LockError) == "hf_secret\n"
    finally:
        os.close(read)


def test_a_lock_over_the_read_limit_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "digests.json"
    with big.open("wb") as fh:
        fh.truncate(100 << 20)  # sparse: no disk, but 100 MiB to read
    assert main(["plan", "--lock", str(big)]) == LockError.return_code
    err = capsys.readouterr().err
    assert f"{big}: 100.0 MiB, over the 64 MiB lockpipe reads of such a file" in err
    assert "Traceback" not in err


def test_read_utf8_reads_up_to_its_limit_and_keeps_read_texts_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a\r\nb\rc\n")
    assert fs.read_utf8(path, LockError) == path.read_text() == "a\nb\nc\n"
    assert fs.read_utf8(path, LockError, limit=7) == "a\nb\nc\n"
    with pytest.raises(LockError, match="over the"):
        fs.read_utf8(path, LockError, limit=6)
    assert fs.READ_LIMIT == 64 << 20
    with pytest.raises(IsADirectoryError):  # a folder stays the caller's OSError to word
        fs.read_utf8(tmp_path, LockError)


def test_a_smoke_report_path_that_is_not_utf8_is_one_line_and_no_unit_is_written(
    tmp_path: Path,
) -> None:
    built(tmp_path / "state")
    report = tmp_path / BAD_DIR / "smoke.json"  # the unit's note names it: it cannot be UTF-8
    argv = ["deploy", TARGET, "--lock", str(LOCK), "--state", str(tmp_path / "state"),
            "--podman-version", "5.4", "--no-inspect", "--no-verify", "--out",
            str(tmp_path / "out"), "--force", "--smoke-report", str(report)]  # fmt: skip
    # its own process: a real stderr, which shows the --force warning's name as \udcff
    done = subprocess.run(
        [sys.executable, "-m", "lockpipe", *argv], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path / "home")},
        check=False,
    )  # fmt: skip
    assert done.returncode == UsageError.return_code, done.stderr
    assert "Traceback" not in done.stderr and "UnicodeEncodeError" not in done.stderr
    line = next(x for x in done.stderr.splitlines() if "not written" in x)
    assert line.startswith(f"error: {tmp_path}/out/{TARGET}.container: not written: it would")
    assert "/\\xff/smoke.json" in line and "a name that is not UTF-8" in line
    assert not (tmp_path / "out" / f"{TARGET}.container").exists()


def test_write_atomic_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text("old\n")
    with pytest.raises(UsageError, match="not written"):
        fs.write_atomic(path, f'{{"log": "/tmp/{BAD_DIR}/x.log"}}\n')
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["report.json"]


def test_text_with_a_lone_surrogate_a_server_sent_is_one_usage_error_showing_it(
    tmp_path: Path,
) -> None:
    """A server's ``"\\ud800"`` (JSON allows it; UTF-8 cannot hold it) is not a file name's
    byte: surrogateescape cannot show it either, so the error itself was a traceback."""
    path = tmp_path / "report.md"
    with pytest.raises(
        UsageError, match=r"(?s)hold '\| llama\.cpp \| date \\ud800 .*a lone surrogate"
    ):
        fs.write_atomic(path, "| llama.cpp | date \ud800 | b1 |\n")
    assert os.listdir(tmp_path) == []


def test_a_device_or_a_link_to_one_is_written_to_never_replaced(tmp_path: Path) -> None:
    """``--json /dev/null``: the temporary file was renamed over the device, and as root a
    regular file took /dev/null's place (git then read it as its config). The test makes
    its own null device (root only), never the real one."""
    if os.geteuid() != 0:
        pytest.skip("mknod of a character device needs root (CI runs as root)")
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (tmp_path / "stdout").symlink_to(null)
    for path in (null, tmp_path / "stdout"):
        fs.write_atomic(path, '{"ok": true}\n')
        assert stat.S_ISCHR(os.stat(path).st_mode), path
    assert (tmp_path / "stdout").is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["null", "stdout"]  # no temporary file left


TO_STDOUT = (
    "from pathlib import Path; from lockpipe import fs; fs.write_atomic(Path('/dev/stdout'), "
)


def test_stdout_appended_to_a_log_keeps_the_log(tmp_path: Path) -> None:
    """``--json /dev/stdout >> log``: /dev/stdout is a link to /proc/self/fd/1, the log; its
    target was replaced whole, the log's earlier lines lost."""
    log = tmp_path / "log"
    log.write_text("line1\n")
    code = f"{TO_STDOUT}'new\\n')"
    with log.open("a") as out:
        subprocess.run([sys.executable, "-c", code], stdout=out, check=True,
                       env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert log.read_text() == "line1\nnew\n"
    assert stat.S_ISLNK(os.lstat("/dev/stdout").st_mode)


def test_stdout_that_is_a_pipe_is_written_to(tmp_path: Path) -> None:
    code = f"{TO_STDOUT}'j\\n')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)  # fmt: skip
    assert (done.returncode, done.stdout) == (0, "j\n"), done.stderr


def test_through_a_link_the_target_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("old\n")
    (tmp_path / "link.json").symlink_to("real.json")
    fs.write_atomic(tmp_path / "link.json", "new\n")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new\n"
