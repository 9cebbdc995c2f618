"""The demo's pure planning: its committed lock, the run-local lock, its stages, its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.cli.demo_options import DEMO_LOCK
from lockpipe.cli.main import parse
from lockpipe.cli.options import DEFAULT_LOCK
from lockpipe.demo import plan, report
from lockpipe.demo.gemma import GEMMA_SHA256, GEMMA_SIZE
from lockpipe.errors import LockError, UsageError
from lockpipe.lock.fingerprint import check_drift, fingerprint, relock
from lockpipe.lock.model import load_lock, parse_lock
from lockpipe.smoke.config import load_smoke

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / plan.LOCK
DIGESTS = {"debian-build": "sha256:" + "1" * 64, "debian-runtime": "sha256:" + "2" * 64}


def _doc() -> dict[str, object]:
    return dict(json.loads(COMMITTED.read_text()))


def test_the_committed_lock_leaves_the_base_digests_to_the_run_and_is_not_drifted() -> None:
    lock = load_lock(COMMITTED)
    assert plan.filled(lock.document) == [b.name for b in plan.BASES]
    assert all(lock.bases[b.name].digest is None for b in plan.BASES)
    check_drift(lock, lock.target(plan.TARGET))  # the recipe is what the lock was made from
    payload = lock.payloads[lock.target(plan.TARGET).payloads[0]]
    assert (payload.sha256, payload.size) == (GEMMA_SHA256, GEMMA_SIZE)  # what gemma.py makes
    assert load_smoke(REPO / plan.SMOKE)[plan.TARGET].generations  # real completions checked


def test_the_run_lock_pins_the_bases_built_and_moves_the_fingerprint() -> None:
    doc = _doc()
    run = plan.run_document(doc, DIGESTS, plan.REGISTRY, seen="2026-12-02")
    assert doc == _doc()  # the committed document is left alone
    for name, digest in DIGESTS.items():
        assert run["bases"][name]["digest"] == digest
        assert run["bases"][name]["ref"] == doc["bases"][name]["ref"]  # type: ignore[index]
        assert "built by lockpipe demo" in run["bases"][name]["origin"]["source"]
    lock = parse_lock(run, REPO / "x" / "digests.json", REPO)
    relocked = relock(lock)
    assert relocked["fingerprints"] != doc["fingerprints"]  # the digests are build inputs
    again = parse_lock(relocked, lock.path, REPO)
    assert again.fingerprints[plan.TARGET] == fingerprint(again, again.target(plan.TARGET))
    assert again.bases["debian-build"].pinned("x").endswith("@" + DIGESTS["debian-build"])


def test_the_same_bases_give_the_same_run_lock() -> None:
    one = relock(parse_lock(plan.run_document(_doc(), DIGESTS, plan.REGISTRY, "2026-12-02"),
                            REPO / "x.json", REPO))  # fmt: skip
    two = relock(parse_lock(plan.run_document(_doc(), DIGESTS, plan.REGISTRY, "2026-12-03"),
                            REPO / "x.json", REPO))  # fmt: skip
    assert one["fingerprints"] == two["fingerprints"]  # the day it ran is not a build input


def test_another_registry_moves_the_refs_and_a_pinned_digest_must_be_the_one_built() -> None:
    run = plan.run_document(_doc(), DIGESTS, "127.0.0.1:5001", seen="2026-12-02")
    assert run["bases"]["debian-build"]["ref"].startswith("127.0.0.1:5001/")
    pinned = _doc()
    pinned["bases"]["debian-build"]["digest"] = "sha256:" + "3" * 64  # type: ignore[index]
    with pytest.raises(LockError, match=r"bases.debian-build: the demo lock pins sha256:3"):
        plan.run_document(pinned, DIGESTS, plan.REGISTRY, seen="2026-12-02")


@pytest.mark.parametrize("text", ["127.0.0.1", "http://127.0.0.1:5000", "host:0", "host:99999"])
def test_a_bad_registry_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--registry"):
        plan.parse_registry(text)
    assert plan.parse_registry("registry.local:5000") == "registry.local:5000"


def test_the_stages_run_the_pipeline_verbs_on_the_run_lock(tmp_path: Path) -> None:
    paths = plan.Paths(checkout=REPO, work=tmp_path, cache=tmp_path / "c", inputs=tmp_path / "i",
                       state=tmp_path / "s", store=tmp_path / "st")  # fmt: skip
    stages = plan.stages(paths, "podman", "http://127.0.0.1:1", REPO / plan.SMOKE)
    assert [s.verb for s in stages] == ["plan", "build-llama-cpu", "payloads", "smoke", "deploy"]
    for s in stages:
        args = parse(list(s.argv))  # each is a command line the CLI accepts
        assert args.lock == paths.lock and args.targets == [plan.TARGET]
    by = {s.name: parse(list(s.argv)) for s in stages}
    assert by["build"].engine == by["smoke"].engine == by["deploy"].engine == "podman"
    assert by["build"].mirror == by["payloads"].mirror == "http://127.0.0.1:1"
    assert by["smoke"].expect == REPO / plan.SMOKE and by["smoke"].store == paths.store
    assert by["deploy"].install is None and by["deploy"].out == paths.deploy  # rendered only
    assert by["deploy"].podman_version is None
    older = plan.stages(paths, "buildah", "http://127.0.0.1:1", REPO / plan.SMOKE, "4.4")
    assert parse(list(older[-1].argv)).podman_version == "4.4"
    assert "(rendered for podman 4.4)" in older[-1].proves


def test_demo_has_its_own_lock_default_and_leaves_the_others_alone() -> None:
    assert DEMO_LOCK == plan.LOCK
    assert parse(["demo"]).lock == REPO / plan.LOCK  # found from any folder of the checkout
    for verb in ("plan", "smoke"):  # the main lock, wherever it is found from
        assert parse([verb]).lock.parts[-2:] == DEFAULT_LOCK.parts


def test_the_report_names_each_stage_and_the_smoke_run_of_this_image() -> None:
    doc = {"reports": [
        {"target": "llama-cpu", "image_id": "sha256:old", "results": []},
        {"target": "llama-cpu", "image_id": "sha256:new", "results": [
            {"name": "ready", "status": "PASS", "detail": "ready in 2 s"},
            {"name": "generation[0]", "status": "PASS", "detail": "' Paris, France.'"},
            {"name": "metrics", "status": "FAIL", "detail": "no"},
        ]},
    ]}  # fmt: skip
    assert report.smoke_summary(doc, "llama-cpu", "sha256:new") == (
        "2 of 3 checks passed; ' Paris, France.'"
    )
    assert "no run of llama-cpu" in report.smoke_summary(doc, "llama-cpu", "sha256:gone")
    proofs = [report.Proof(stage="build", seconds=300.04, proved="built"),
              report.Proof(stage="smoke", seconds=20.0, proved="served")]  # fmt: skip
    text = report.render("t", proofs)
    assert text.splitlines() == ["t", "  build    300.0 s  built", "  smoke     20.0 s  served",
                                 "  total    320.0 s"]  # fmt: skip


def test_the_ignored_mirror_is_named_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """demo's note printed --mirror (LOCKPIPE_MIRROR) as given, password and all; doctor
    already redacted the same value. A --registry it cannot read stops it right after."""
    from lockpipe.cli.main import main

    code = main(["demo", "--mirror", "http://alice:s3cret@m.example/", "--registry", "bad one!"])
    assert code == UsageError.return_code
    out = capsys.readouterr()
    assert "s3cret" not in out.out + out.err
    assert "--mirror (LOCKPIPE_MIRROR) http://***@m.example/ is not used" in out.out + out.err
