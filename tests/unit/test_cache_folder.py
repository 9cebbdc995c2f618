"""``--cache`` that is no writable folder (a regular file, a read-only folder) is one line
naming the option and the fix, for every verb that writes downloads into it."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import FetchError
from tests.lockfactory import doc, make_repo

SOURCE = {"repository": "org/src", "commit": "c" * 40, "sha256": "d" * 64,
          "url": "http://127.0.0.1:9/src.tar.gz"}  # fmt: skip


class _Engine:
    """Enough of an engine for build to reach its source fetch (nothing is built)."""

    name = "buildah"

    def version(self) -> str:
        return "1.0"


def _lock_with_source(tmp_path: Path) -> Path:
    document = doc(sources={"src": SOURCE})
    document["targets"]["app"]["source"] = "src"
    return make_repo(tmp_path, document)


def test_build_with_a_file_for_cache_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("lockpipe.cli.build.get_engine", lambda name: _Engine())
    lock = _lock_with_source(tmp_path)
    cache = tmp_path / "afile"
    cache.write_text("x")
    argv = ["build", "app", "--lock", str(lock), "--state", str(tmp_path / "state"),
            "--cache", str(cache)]  # fmt: skip
    assert main(argv) == FetchError.return_code
    err = capsys.readouterr().err
    assert f"--cache {cache}: cannot write the cache (" in err
    assert "set --cache or LOCKPIPE_CACHE to a writable folder" in err
    assert "Traceback" not in err
