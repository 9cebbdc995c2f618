"""deploy's quadlet dry run is given the ``.artifact`` units beside the ``.container``, as
they are installed: quadlet resolves ``Mount=type=artifact,source=X.artifact`` against the
units in its folder (as it does a .volume or .image), so a dry run of the .container alone
checked another unit set than the one installed. The generator here is a FAKE that records
the folder it is handed: no podman 5.7 quadlet is installed to run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli import deploy, deployart
from lockpipe.cli.main import main
from tests.unit.test_artifact_units import IMAGE, _fake_pinned, _lock


def test_the_dry_run_folder_holds_the_artifact_units_beside_the_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, str] = {}

    def fake_generator_dryrun(generator: Path, unit_dir: Path, **_: Any) -> str:
        """A FAKE podman-system-generator -dryrun: records the unit files it was given."""
        seen.update({f: (unit_dir / f).read_text() for f in os.listdir(unit_dir)})
        return "[Service]\nExecStart=/bin/true\n"

    monkeypatch.setattr(deployart, "_pinned", _fake_pinned)
    monkeypatch.setattr(deploy, "find_generator", lambda: Path("/fake/quadlet-generator"))
    monkeypatch.setattr(deploy, "generator_dryrun", fake_generator_dryrun)
    monkeypatch.setattr(deploy, "systemd_verify", lambda *a, **k: None)  # a fake too
    lock = _lock(tmp_path, {"llama": "qwen-mmproj"})
    out = tmp_path / "out"
    code = main(["deploy", "llama", "--lock", str(lock), "--out", str(out), "--image", IMAGE,
                 "--force", "--no-inspect", "--podman-version", "5.7",
                 "--artifacts", "127.0.0.1:5000/models"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert sorted(seen) == ["llama-qwen-mmproj.artifact", "llama.container"]
    for name, text in seen.items():  # what the dry run checked is what deploy rendered
        assert (out / name).read_text() == text
    assert "source=llama-qwen-mmproj.artifact" in seen["llama.container"]
    assert "accepted llama.container, llama-qwen-mmproj.artifact" in captured.out
