"""More bytes lockpipe reads that are not UTF-8, each one lockpipe error naming the file or
a name shown as it can be, never UnicodeDecodeError's traceback (issue 18): the refresh
report the workflow turns into pull requests, a constraints set's ``.in``, and a process
whose name (``/proc/PID/comm``, ``/proc/PID/stat``) is not UTF-8, as an executable's file
name may be. The JSON files :mod:`tests.unit.test_deep_json` reads (a smoke report, the
published images, the first-seen record...) already said so; that they do is pinned here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lockpipe import cmd
from lockpipe.engines.podman import kill_cgroup
from lockpipe.errors import LockpipeError, UsageError
from lockpipe.preflight.vllm_parser_env import constraint_sets
from lockpipe.smoke.ports import PortBusy, wait_port_clear
from tests.unit.test_deep_json import READERS

REPO = Path(__file__).resolve().parents[2]
BAD = b"\xff\xfe bad"


def _said(path: Path) -> str:
    return f"{path}: not UTF-8 text (byte 0xff at offset 0); re-save it as UTF-8"


# the closure's reader is given text: its file is read (read_utf8) by lock's own callers
JSON_READERS = {what: read for what, read in READERS.items() if what != "pip closure"}


@pytest.mark.parametrize("reader", JSON_READERS.values(), ids=JSON_READERS.keys())
def test_a_json_file_that_is_not_utf8_is_an_error_naming_it(
    tmp_path: Path, reader: Callable[[Path], object]
) -> None:
    path = tmp_path / "file.json"
    path.write_bytes(BAD)
    with pytest.raises(LockpipeError) as raised:
        reader(path)
    assert str(path) in str(raised.value)


def test_the_workflow_s_pull_request_step_names_a_report_that_is_not_utf8(
    tmp_path: Path,
) -> None:
    report = tmp_path / "refresh.json"
    report.write_bytes(BAD)
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe.refresh.prs", str(report), str(tmp_path / "out")],
        cwd=REPO, text=True, capture_output=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == UsageError.return_code, out.stderr
    assert out.stderr.splitlines() == [f"error: {_said(report)}"]
    assert not (tmp_path / "out").exists()


def test_a_constraints_set_s_in_that_is_not_utf8_names_it(tmp_path: Path) -> None:
    source = tmp_path / "constraints" / "vllm-parser-0.1.0.in"
    source.parent.mkdir()
    source.write_bytes(BAD)
    with pytest.raises(LockpipeError) as raised:
        constraint_sets(tmp_path, "0.1.0")
    assert str(raised.value) == _said(source)


def test_a_port_s_owner_whose_name_is_not_utf8_is_shown_escaped(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid"
        "  timeout inode\n"
        "   0: 0100007F:1E5B 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000"
        "        0 4242 1\n"
    )
    pid = tmp_path / "12"
    (pid / "fd").mkdir(parents=True)
    (pid / "fd" / "3").symlink_to("socket:[4242]")
    (pid / "comm").write_bytes(b"\xffserver\n")
    with pytest.raises(PortBusy) as raised:
        wait_port_clear(7771, 0.0, proc=tmp_path, clock=lambda: 0.0, sleep=lambda s: None)
    assert "pid 12 (\\xffserver)" in str(raised.value)


def test_a_process_whose_name_is_not_utf8_is_counted_in_its_group(tmp_path: Path) -> None:
    """The kernel names a process after its executable's file name, bytes as they are."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    exe = os.fsencode(tmp_path) + b"/\xff\xfesleep"
    shutil.copy(os.fsencode(sleep), exe)
    child = subprocess.Popen([exe, "30"], start_new_session=True)
    try:
        assert cmd._running_in_group(child.pid) is True
    finally:
        child.kill()
        child.wait()


PIP_REPORT = """
import json, sys
from pathlib import Path
from lockpipe.refresh import pip

def fake_pip(args, quiet):
    report = {"environment": {"sys_platform": "linux", "platform_machine": "x86_64"},
              "install": [{"metadata": {"summary": "caf\\u00e9"}}]}
    out = Path(args[args.index("--report") + 1])
    out.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")

pip.call = fake_pip
doc = pip.pip_report(["x"], pip.Spec(package="x", extra="y", version="1"), Path(sys.argv[1]))
print(doc["install"][0]["metadata"]["summary"].encode("unicode_escape").decode())
"""


def test_pip_s_report_is_read_as_the_utf8_pip_writes_in_any_locale(tmp_path: Path) -> None:
    """pip writes its --report as UTF-8 (ensure_ascii=False: a summary of "café"); read in
    the locale's encoding, a C locale without UTF-8 mode was UnicodeDecodeError."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "LC_ALL": "C", "PYTHONUTF8": "0",
           "PYTHONCOERCECLOCALE": "0"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", PIP_REPORT, str(tmp_path)], cwd=REPO, env=env,
                         text=True, capture_output=True, check=False)  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout.strip() == "caf\\xe9"


def test_a_build_s_cgroup_is_found_beside_one_whose_path_is_not_utf8(tmp_path: Path) -> None:
    """A cgroup is a folder: its name may be any bytes (``mkdir`` in a delegated tree)."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        for pid, path in ((4_194_305, b"/user.slice/\xff"), (child.pid, b"/\xfe/lockpipe-build-1")):
            (tmp_path / str(pid)).mkdir()
            (tmp_path / str(pid) / "cgroup").write_bytes(b"0::" + path + b"\n")
        assert kill_cgroup("lockpipe-build-1", proc=tmp_path) == 1
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()
        child.wait()
