"""The deploy gate: a build record to pin, and a smoke result that passed on that image."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from lockpipe.deploy.gate import check_built, check_fingerprint, check_reference, pinned_image
from lockpipe.errors import DeployError
from lockpipe.imagebuild.records import write_record
from lockpipe.lock import fingerprint
from lockpipe.lock.fingerprint import served
from lockpipe.lock.model import load_lock, parse_lock
from tests.unit.test_deploy_render import IMAGE_ID, LOCK, pinned

SERVED = {"serve": "5" * 64, "payloads": "9" * 64}  # what the lock says now, in these tests


def entry(*, ok: bool, image: str = IMAGE_ID, **extra: object) -> dict[str, object]:
    return {"target": "llama-cuda", "image": "t", "image_id": f"sha256:{image}", "ok": ok,
            "results": [{"name": "generation", "status": "PASS" if ok else "FAIL"}],
            "served": SERVED, **extra}  # fmt: skip


def smoke(path: Path, *, ok: bool, image: str = IMAGE_ID, more: tuple[object, ...] = ()) -> Path:
    path.write_text(json.dumps({"reports": [*more, entry(ok=ok, image=image)]}))
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
        check_built(report, pinned("llama-cuda", "t"), served=SERVED, force=False)
    assert str(report) in str(info.value) and "failed (generation)" in str(info.value)
    assert "lockpipe smoke --gpu llama-cuda" in str(info.value) and "--force" in str(info.value)


def test_force_deploys_with_a_loud_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = smoke(tmp_path / "smoke.json", ok=False)
    verdict = check_built(report, pinned("llama-cuda", "t"), served=SERVED, force=True)
    assert verdict.note == "Smoke: failed on 3f3f3f3f3f3f (forced)."
    assert "WARNING (--force)" in capsys.readouterr().err


def test_smoke_of_another_image_refuses(tmp_path: Path) -> None:
    report = smoke(tmp_path / "smoke.json", ok=True, image="ee" * 32)
    with pytest.raises(DeployError, match=r"no smoke result for image 3f3f3f3f3f3f, only for "
                       r"image eeeeeeeeeeee \(passed\)"):  # fmt: skip
        check_built(report, pinned("llama-cuda", "t"), served=SERVED, force=False)


def test_the_latest_result_of_this_image_is_judged(tmp_path: Path) -> None:
    older = entry(ok=True)
    report = smoke(tmp_path / "smoke.json", ok=False, more=(older,))
    with pytest.raises(DeployError, match="failed"):
        check_built(report, pinned("llama-cuda", "t"), served=SERVED, force=False)
    report = smoke(tmp_path / "smoke.json", ok=True, more=(entry(ok=False),))
    assert check_built(
        report, pinned("llama-cuda", "t"), served=SERVED, force=False
    ).note.startswith("Smoke: passed on 3f3f3f3f3f3f")


def test_passing_smoke_gives_its_store_and_a_missing_report_refuses(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"reports": [entry(ok=True, store="/srv/store",
                                                  at="2026-11-02T10:00:00Z")]}))  # fmt: skip
    verdict = check_built(path, pinned("llama-cuda", "t"), served=SERVED, force=False)
    assert verdict.store == Path("/srv/store")
    assert verdict.note == f"Smoke: passed on 3f3f3f3f3f3f at 2026-11-02T10:00:00Z ({path})."
    with pytest.raises(DeployError, match=r"no smoke report at .*none\.json"):
        check_built(tmp_path / "none.json", pinned("llama-cuda", "t"), served=SERVED, force=False)


def test_a_published_image_is_judged_by_its_reference(tmp_path: Path) -> None:
    ref = "r.example/x@sha256:" + "ab" * 32
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"reports": [entry(ok=True, image=IMAGE_ID) | {"image": ref}]}))
    assert check_reference(path, "llama-cuda", ref, served=SERVED, force=False).note.startswith(
        "Smoke: passed"
    )
    with pytest.raises(DeployError, match=r"lockpipe smoke --gpu --image r\.example/y@"):
        check_reference(path, "llama-cuda", ref.replace("/x@", "/y@"), served=SERVED, force=False)


def test_fingerprint_drift_refuses() -> None:
    lock = Path("locks/digests.json")
    with pytest.raises(DeployError, match="rebuild: lockpipe build llama-cuda"):
        check_fingerprint(pinned("llama-cuda", "t"), "0" * 64, lock=lock, force=False)
    check_fingerprint(pinned("llama-cuda", "t"), "f" * 64, lock=lock, force=False)


def test_a_pass_that_served_other_payload_pins_refuses_naming_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"reports": [entry(ok=True, at="2026-11-02T10:00:00Z")]}))
    now = {**SERVED, "payloads": "0" * 64}
    with pytest.raises(DeployError) as info:
        check_built(path, pinned("llama-cuda", "t"), served=now, force=False)
    said = str(info.value)
    assert "llama-cuda: the lock's payload pins" in said and "serve section" not in said
    assert "run `lockpipe smoke --gpu llama-cuda` again; or pass --force" in said
    verdict = check_built(path, pinned("llama-cuda", "t"), served=now, force=True)
    assert verdict.note.endswith("payloads) changed since (forced).")
    assert "WARNING (--force)" in capsys.readouterr().err


def test_a_pass_without_served_digests_predates_the_check(tmp_path: Path) -> None:
    path = tmp_path / "smoke.json"
    old = entry(ok=True)
    del old["served"]
    path.write_text(json.dumps({"reports": [old]}))
    with pytest.raises(DeployError, match="predates the record of what a run served"):
        check_built(path, pinned("llama-cuda", "t"), served=SERVED, force=False)
    path.write_text(json.dumps({"reports": [entry(ok=True, served=None)]}))
    with pytest.raises(DeployError, match="predates"):
        check_built(path, pinned("llama-cuda", "t"), served=SERVED, force=False)


@pytest.mark.parametrize("bad", ["abc", {"serve": "a"}, {"serve": 1, "payloads": "b"}])
def test_a_served_field_of_another_shape_is_one_error(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"reports": [entry(ok=True, served=bad)]}))
    with pytest.raises(DeployError, match=r"not a smoke report: reports\[0\]\.served is "):
        check_built(path, pinned("llama-cuda", "t"), served=SERVED, force=False)


def test_served_digests_follow_serve_and_payload_pins_apart() -> None:
    lock = load_lock(LOCK)
    name = next(n for n, t in lock.targets.items() if t.payloads and t.external is None)
    before = served(lock, lock.target(name))
    assert before == served(lock, lock.target(name))

    def changed(mutate: Callable[[dict[str, Any]], None]) -> dict[str, str]:
        document = json.loads(json.dumps(lock.document))
        mutate(document)
        again = parse_lock(document, lock.path, lock.root)
        return served(again, again.target(name))

    flag = changed(lambda d: d["targets"][name]["serve"]["command"].append("--no-mmap"))
    assert flag["serve"] != before["serve"] and flag["payloads"] == before["payloads"]
    env = changed(lambda d: d["targets"][name]["serve"].setdefault("env", {}).update(X="1"))
    assert env["serve"] != before["serve"]
    first = lock.target(name).payloads[0]
    rev = changed(lambda d: d["payloads"][first].update(revision="0" * 40))
    assert rev["payloads"] != before["payloads"] and rev["serve"] == before["serve"]


def test_a_built_targets_env_is_part_of_what_its_run_served_as_given() -> None:
    """Before 825335d a built target's serve.env was counted in this digest but never given
    to the container: a PASS recorded then must not match the lock now, or deploy lets a
    run of another environment through (issue 18). An external target's env was given."""
    lock = load_lock(LOCK)
    name = next(n for n, t in lock.targets.items() if t.external is None)
    document = json.loads(json.dumps(lock.document))
    document["targets"][name]["serve"]["env"] = {"X": "1"}
    again = parse_lock(document, lock.path, lock.root)
    t = again.target(name)
    old = fingerprint._digest({f.name: fingerprint._plain(getattr(t.serve, f.name))
                               for f in dataclasses.fields(t.serve)})  # fmt: skip
    assert served(again, again.target(name))["serve"] != old  # the digest a run of then has
