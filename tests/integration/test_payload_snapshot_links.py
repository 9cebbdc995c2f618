"""A snapshot folder another tool changed in the links' way (issue 18): a link to a folder
elsewhere where the lock lists files under it, a real folder where it lists a file. A
run makes the folder what the lock lists again, writing nothing outside the store."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lockpipe.payloads.run import run_payloads
from lockpipe.payloads.store import payload_path
from tests.integration.fake_hub import FakeHub, entry_from_tree
from tests.integration.payload_servers import make_lock
from tests.integration.test_payload_snapshot import (  # noqa: F401  (fixtures)
    REPO,
    REV,
    hub,
    minilm,
    options,
    tree,
)

pytestmark = pytest.mark.integration


def _held(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_symlink() or p.is_file()
    )


def test_a_linked_folder_in_the_snapshot_is_not_written_through(
    hub: FakeHub,  # noqa: F811
    tmp_path: Path,
) -> None:
    lock = make_lock(tmp_path, {"m": entry_from_tree(tree(hub, REPO), REPO, REV)})
    run_payloads(lock, [], options(tmp_path, hub))
    folder = payload_path(tmp_path / "store", lock.payloads["m"])
    right = os.readlink(folder / "1_Pooling" / "config.json")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(folder / "1_Pooling")
    os.symlink(elsewhere, folder / "1_Pooling")
    [result] = run_payloads(lock, [], options(tmp_path, hub))
    assert list(elsewhere.iterdir()) == []  # nothing written outside the store
    assert not (folder / "1_Pooling").is_symlink() and (folder / "1_Pooling").is_dir()
    assert os.readlink(folder / "1_Pooling" / "config.json") == right
    assert (folder / "1_Pooling" / "config.json").is_file()
    assert _held(folder) == sorted(f.path for f in lock.payloads["m"].files)
    assert result.status == "cached"


def test_a_real_folder_where_the_lock_lists_a_file_is_replaced_by_its_link(
    hub: FakeHub,  # noqa: F811
    tmp_path: Path,
) -> None:
    lock = make_lock(tmp_path, {"m": entry_from_tree(tree(hub, REPO), REPO, REV)})
    run_payloads(lock, [], options(tmp_path, hub))
    folder = payload_path(tmp_path / "store", lock.payloads["m"])
    right = os.readlink(folder / "config.json")
    (folder / "config.json").unlink()
    (folder / "config.json").mkdir()
    (folder / "config.json" / "inside").write_text("not verified")
    [result] = run_payloads(lock, [], options(tmp_path, hub))
    assert os.readlink(folder / "config.json") == right
    assert _held(folder) == sorted(f.path for f in lock.payloads["m"].files)
    assert result.status == "cached"
    assert not list((tmp_path / "store").rglob("*.lockpipe-*"))  # no temporary link left
