from __future__ import annotations

import os
from pathlib import Path

from lockpipe.fs import write_atomic


def test_a_new_file_gets_the_umask_mode_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        path = tmp_path / "new.json"
        write_atomic(path, "{}\n")
        assert path.stat().st_mode & 0o777 == 0o644
        path.chmod(0o640)
        write_atomic(path, "{}\n")
        assert path.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)
