"""refresh-digests --propose against the real loopback registry and PyPI: which tags are
proposed, the first-seen hold (injected clock), and the verdicts for frank-small."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import dump_lock, load_lock
from tests.upgrade_fixtures import SIX, checkout, lockpipe, vllm_tags

pytestmark = pytest.mark.integration
NOW = "2026-12-02T01:50:00Z"
LATER = "2026-12-05T01:50:00Z"  # three days on


def _propose(lock: Path, tmp: Path, now: str, *extra: str) -> dict[str, Any]:
    md, js = tmp / "report.md", tmp / "report.json"
    result = lockpipe("refresh-digests", "--lock", str(lock), "--only", "vllm-openai",
                      "--propose", "--dry-run", "--report-md", str(md), "--report-json", str(js),
                      "--first-seen", str(tmp / "first-seen.json"), *extra,
                      LOCKPIPE_NOW=now)  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(js.read_text())
    doc["_md"] = md.read_text()
    return doc


def test_exactly_the_compatible_newer_tags_are_proposed_and_held_then_released(
    registry: str, tmp_path: Path
) -> None:
    repo, digests = vllm_tags(registry, tmp_path / "tags")
    lock = checkout(tmp_path / "checkout", repo, digests["v0.29.0-cu129"])
    before = lock.read_bytes()

    held = _propose(lock, tmp_path, NOW, "--min-age", "3d")
    got = [(p["key"], p["pinned"], p["version"], p["new"]) for p in held["proposals"]]
    assert got == [
        ("bases.vllm-openai", "v0.29.0-cu129", "0.30.0", f"{repo}:v0.30.0-cu129"),
        ("bases.vllm-openai", "v0.29.0-cu129", "0.33.0", f"{repo}:v0.33.0-cu129"),
    ]
    assert all(p["held"] and p["first_seen"] == NOW for p in held["proposals"])
    assert all(not p["verdicts"] for p in held["proposals"])  # a held one is not judged
    assert "2 held by --min-age" in held["_md"]
    assert lock.read_bytes() == before  # never applied
    record = json.loads((tmp_path / "first-seen.json").read_text())
    assert record["first_seen"]["bases.vllm-openai"] == {"0.30.0": NOW, "0.33.0": NOW}

    # a cache of its own: no vLLM parser environment in it, whatever the machine's cache holds
    # (test_vllm_bump.py judges a proposal with 0.33.0's own parser)
    released = _propose(lock, tmp_path, LATER, "--min-age", "3d",
                        "--cache", str(tmp_path / "cache"))  # fmt: skip
    assert [p["held"] for p in released["proposals"]] == [None, None]
    assert [p["first_seen"] for p in released["proposals"]] == [NOW, NOW]  # from the record
    by = {p["version"]: p for p in released["proposals"]}
    # the pip side: vLLM 0.33.0 is on PyPI, so the audio extra moves with the base
    assert any("pip.frank-small-audio: images/frank-small/requirements-audio.txt derived "
               "again for vllm[audio]==0.33.0" in a for a in by["0.33.0"]["also"])  # fmt: skip
    assert "targets.frank-small.build_args.VLLM_VERSION: 0.29.0 -> 0.33.0" in by["0.33.0"]["also"]
    verdicts = {(v["target"], v["check"]): v for v in by["0.33.0"]["verdicts"]}
    # judged with vLLM 0.33.0's own rules (lockpipe/preflight/data/vllm-0.33.0.json)
    assert verdicts[("frank-small", "preflight")]["status"] == "pass"
    assert "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl" in verdicts[
        ("frank-small", "preflight")]["detail"]  # fmt: skip
    # vLLM 0.33.0's own parser has no environment in that cache: said, with what builds it
    # (this checkout has no constraints/, so pinning its imports comes first)
    parser = verdicts[("frank-small", "serve-args")]
    assert parser["status"] == "unknown" and "parser is not built" in parser["detail"]
    assert "constraints/vllm-parser-0.33.0.txt" in parser["fix"]
    assert "then nox -s vllm-parser -- 0.33.0 (builds " in parser["fix"]
    assert verdicts[("frank-small", "baselines")]["status"] == "warn"
    assert "pp@67k" in verdicts[("frank-small", "baselines")]["detail"]
    # 0.30.0 has no rules in lockpipe: it says so and how to derive them, not "passes"
    rules = {v["check"]: v for v in by["0.30.0"]["verdicts"]}["rules"]
    assert rules["status"] == "unknown" and "no preflight rules for vLLM 0.30.0" in rules["detail"]
    assert "### Proposed upgrades" in released["_md"]
    assert "`lockpipe upgrade vllm-openai 0.33.0`" in released["_md"]
    assert lock.read_bytes() == before


def test_every_page_of_tags_list_is_read(
    registry: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockpipe.registry import tags

    repo, _ = vllm_tags(registry, tmp_path / "tags")
    monkeypatch.setattr(tags, "PAGE", 2)  # distribution answers 2 a page, with Link: next
    assert sorted(tags.list_tags(f"{repo}:v0.29.0-cu129")) == sorted(SIX)


def test_a_tag_whose_vllm_pypi_lacks_breaks_the_audio_extra(registry: str, tmp_path: Path) -> None:
    # PyPI has vLLM 0.29.0 and 0.30.0 and nothing between them (pypi.org/pypi/vllm/json)
    repo, digests = vllm_tags(registry, tmp_path / "tags", ("v0.29.0-cu129", "v0.29.1-cu129"))
    lock = checkout(tmp_path / "checkout", repo, digests["v0.29.0-cu129"])
    (p,) = _propose(lock, tmp_path, NOW)["proposals"]
    assert p["version"] == "0.29.1" and p["summary"].startswith("would break frank-small (pip")
    pip = next(v for v in p["verdicts"] if v["check"] == "pip")
    assert "vllm 0.29.1 is not on the index" in pip["detail"]
    assert "requirements-audio.txt (vllm[audio]) cannot be derived for it" in pip["detail"]
    assert pip["fix"] == "wait for vllm 0.29.1 on PyPI, or stay on v0.29.0-cu129"


def test_dry_run_reports_the_proposals_when_another_base_cannot_be_asked(
    registry: str, tmp_path: Path
) -> None:
    """--dry-run: a base whose registry does not answer (a closed port) is one line of the
    report, "not proposed: …", and the other base's proposals are still listed and judged;
    once the report is out the run exits 18, naming that base. A run that is not a dry run
    stays everything-or-nothing."""
    repo, digests = vllm_tags(registry, tmp_path / "tags")
    lock = checkout(tmp_path / "checkout", repo, digests["v0.29.0-cu129"])
    doc = json.loads(lock.read_text())
    name = next(n for n, b in doc["bases"].items() if n != "vllm-openai")
    pinned = doc["bases"][name]["ref"].rsplit(":", 1)[1]
    doc["bases"][name]["ref"] = f"127.0.0.1:9/dead/base:{pinned}"
    lock.write_text(dump_lock(doc))
    lock.write_text(dump_lock(relock(load_lock(lock))))
    before = lock.read_bytes()
    md, js = tmp_path / "report.md", tmp_path / "report.json"
    args = ["refresh-digests", "--lock", str(lock), "--only", "vllm-openai", name,
            "--propose", "--first-seen", str(tmp_path / "first-seen.json"),
            "--cache", str(tmp_path / "cache")]  # fmt: skip
    result = lockpipe(*args, "--dry-run", "--report-md", str(md), "--report-json", str(js),
                      LOCKPIPE_NOW=LATER)  # fmt: skip
    assert result.returncode == 18, result.stderr
    assert "Traceback" not in result.stderr
    assert f"bases.{name}: not proposed: GET 127.0.0.1:9/dead/base tags/list" in result.stderr
    assert "could not be resolved" in result.stderr
    report = json.loads(js.read_text())
    assert [p["version"] for p in report["proposals"]] == ["0.30.0", "0.33.0"]
    lines = [w for w in report["warnings"] if w["name"] == name]
    assert any(w["rule"] == "unfetchable" and w["message"].startswith("not proposed:")
               for w in lines), lines  # fmt: skip
    assert "not proposed:" in md.read_text()
    # what it did see is recorded, so --min-age can release it on a host that never reaches
    # the dead base's registry
    record = json.loads((tmp_path / "first-seen.json").read_text())
    assert set(record["first_seen"]["bases.vllm-openai"]) == {"0.30.0", "0.33.0"}
    assert f"bases.{name}" not in record["first_seen"]
    assert lock.read_bytes() == before
    # not a dry run: the first failure ends it, and nothing is written
    whole = lockpipe(*args, LOCKPIPE_NOW=LATER)
    assert whole.returncode == 18 and "Traceback" not in whole.stderr
    assert lock.read_bytes() == before
