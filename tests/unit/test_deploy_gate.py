"""The deploy gate: a build record to pin, and a smoke report that passed on that image."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from lockpipe.deploy.gate import check_fingerprint, check_smoke, pinned_image
from lockpipe.errors import DeployError
from lockpipe.imagebuild.records import write_record
from tests.unit.test_deploy_render import IMAGE_ID, pinned


def smoke(path: Path, *, ok: bool, image: str = IMAGE_ID) -> Path:
    report = {"target": "llama-cuda", "image_id": f"sha256:{image}", "ok": ok,
              "results": [{"name": "generation", "status": "PASS" if ok else "FAIL"}]}  # fmt: skip
    path.write_text(json.dumps({"reports": [report]}))
    return path


def test_no_record_names_the_path_and_the_build(tmp_path: Path) -> None:
    with pytest.raises(DeployError, match=r"records/podman/llama-cuda\.json.*lockpipe build "):
        pinned_image(tmp_path, "llama-cuda")


def test_record_pins_the_bare_image_id(tmp_path: Path) -> None:
    record = pinned("llama-cuda", "localhost/x:1").record
    write_record(tmp_path, record)
    assert pinned_image(tmp_path, "llama-cuda").image == IMAGE_ID
    assert asdict(pinned_image(tmp_path, "llama-cuda").record) == asdict(record)


def test_docker_images_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DeployError, match="docker-daemon"):
        pinned_image(tmp_path, "llama-cuda", "docker")


def test_failed_smoke_refuses_naming_report_and_fix(tmp_path: Path) -> None:
    report = smoke(tmp_path / "smoke.json", ok=False)
    with pytest.raises(DeployError) as info:
        check_smoke(report, pinned("llama-cuda", "t"), force=False)
    assert str(report) in str(info.value) and "failed (generation)" in str(info.value)
    assert "lockpipe smoke --gpu llama-cuda" in str(info.value) and "--force" in str(info.value)


def test_force_deploys_with_a_loud_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = smoke(tmp_path / "smoke.json", ok=False)
    assert check_smoke(report, pinned("llama-cuda", "t"), force=True) == "smoke failed (forced)"
    assert "WARNING (--force)" in capsys.readouterr().err


def test_smoke_of_another_image_refuses(tmp_path: Path) -> None:
    report = smoke(tmp_path / "smoke.json", ok=True, image="ee" * 32)
    with pytest.raises(DeployError, match=r"tested image eeeeeeeeeeee, not 3f3f3f3f3f3f"):
        check_smoke(report, pinned("llama-cuda", "t"), force=False)


def test_passing_smoke_and_missing_report(tmp_path: Path) -> None:
    report = smoke(tmp_path / "smoke.json", ok=True)
    assert check_smoke(report, pinned("llama-cuda", "t"), force=False).startswith("smoke passed")
    missing = check_smoke(tmp_path / "none.json", pinned("llama-cuda", "t"), force=False)
    assert "untested" in missing


def test_fingerprint_drift_refuses() -> None:
    with pytest.raises(DeployError, match="rebuild: lockpipe build llama-cuda"):
        check_fingerprint(pinned("llama-cuda", "t"), "0" * 64, force=False)
    check_fingerprint(pinned("llama-cuda", "t"), "f" * 64, force=False)
