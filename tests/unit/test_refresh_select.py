"""Choosing what a refresh asks about (names, KIND.NAME, --kind), and the pure lock update
with an injected registry: only moved entries change, fresh origins only on them."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import DriftError, RegistryError, UsageError
from lockpipe.lock.model import Lock, load_lock
from lockpipe.refresh.api import Api
from lockpipe.refresh.bases import Registry
from lockpipe.refresh.plan import World, apply, no_drift, resolve_each, select
from lockpipe.refresh.plan import resolve as resolve_all
from lockpipe.refresh.sources import Archives
from lockpipe.registry.platforms import PlatformMissing
from tests.lockfactory import DIGEST, doc, make_repo

NEW = "sha256:" + "cd" * 32
ORIGIN = {"source": "by hand", "seen": "2026-01-01", "note": "keep me"}


def _lock(tmp_path: Path) -> Lock:
    document = doc()
    document["bases"]["busybox"]["origin"] = dict(ORIGIN)
    document["bases"]["other"] = {"ref": "127.0.0.1:5000/x/other:2", "digest": DIGEST,
                                  "origin": dict(ORIGIN)}  # fmt: skip
    document["sources"] = {"llama.cpp": {"repository": "https://github.com/ggml-org/llama.cpp"}}
    document["payloads"] = {"other": {"repository": "org/m", "filename": "m.gguf",
                                      "role": "model"}}  # fmt: skip
    return load_lock(make_repo(tmp_path, document))


def test_no_name_selects_every_entry_of_every_kind_or_of_the_kind(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    assert select(lock, [], None) == {"bases": ["busybox", "other"], "sources": ["llama.cpp"],
                                      "payloads": ["other"]}  # fmt: skip
    assert select(lock, [], "bases") == {"bases": ["busybox", "other"]}


def test_a_name_matches_every_kind_that_has_it_unless_kind_or_a_prefix_narrows(
    tmp_path: Path,
) -> None:
    lock = _lock(tmp_path)
    assert select(lock, ["other"], None) == {"bases": ["other"], "payloads": ["other"]}
    assert select(lock, ["payloads.other"], None) == {"payloads": ["other"]}
    assert select(lock, ["other"], "bases") == {"bases": ["other"]}
    assert select(lock, ["llama.cpp", "busybox"], None) == {"bases": ["busybox"],
                                                            "sources": ["llama.cpp"]}  # fmt: skip


def test_an_unknown_name_is_a_usage_error_listing_the_choices(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    with pytest.raises(UsageError, match=r"nope: not in bases of .*choose from busybox, other"):
        select(lock, ["nope"], "bases")
    with pytest.raises(UsageError, match=r"llama\.cpp: not in bases"):
        select(lock, ["llama.cpp"], "bases")


def test_a_target_name_selects_what_it_builds_from(tmp_path: Path) -> None:
    """issue 19: --only TARGET (or NAME) refreshes the entries the target uses."""
    lock = _lock(tmp_path)
    assert select(lock, ["app"], None) == {"bases": ["busybox"]}
    assert select(lock, ["app"], "sources") == {}
    with pytest.raises(UsageError, match=r"ap: .*nor a target \(did you mean app\?\)"):
        select(lock, ["ap"], None)


@dataclass(frozen=True, kw_only=True)
class Answer:
    digest: str
    platforms: dict[str, str] = field(default_factory=dict)
    available: tuple[str, ...] = ("linux/amd64",)
    version_label: str | None = None


def _registry(answers: dict[str, Any], gone: tuple[str, ...] = ()) -> Registry:
    def resolve_many(refs: Any, platforms: tuple[str, ...]) -> list[Any]:
        return [answers[r] for r in refs]

    return Registry(resolve_many=resolve_many, exists=lambda ref: ref.split("@")[1] not in gone)


def _world(registry: Registry) -> World:
    """Only the registry is asked in these tests; the other clients point nowhere."""

    def nowhere(*args: Any) -> Any:
        raise AssertionError("a unit test reached for an archive")

    api = Api(base="http://127.0.0.1:9", name="nothing", refused="nothing")
    archives = Archives(fetch=nowhere, tree=nowhere, cache=Path("/nonexistent"))
    return World(registry=registry, github=api, hub=api, pypi=api, archives=archives)


def test_only_the_moved_base_changes_and_gets_a_fresh_origin(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    registry = _registry({"127.0.0.1:5000/lockpipe-test/busybox:1": Answer(digest=NEW),
                          "127.0.0.1:5000/x/other:2": Answer(digest=DIGEST)})  # fmt: skip
    world = _world(registry)
    outcome = resolve_all(lock, {"bases": ["busybox", "other"]}, world)
    (change,) = outcome.changes
    assert (change.key, change.moved[0].old, change.moved[0].new) == ("bases.busybox", DIGEST, NEW)
    new = apply(lock, outcome, today="2026-11-30")
    assert new["bases"]["busybox"]["digest"] == NEW
    assert new["bases"]["busybox"]["origin"] == {
        "source": "registry 127.0.0.1:5000: the tag's manifest", "seen": "2026-11-30"}  # fmt: skip
    assert new["bases"]["other"] == lock.document["bases"]["other"]
    assert new["fingerprints"]["app"] != lock.document["fingerprints"]["app"]


def test_nothing_moved_gives_back_the_very_same_document(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    before = copy.deepcopy(dict(lock.document))
    registry = _registry({"127.0.0.1:5000/lockpipe-test/busybox:1": Answer(digest=DIGEST)})
    world = _world(registry)
    outcome = resolve_all(lock, {"bases": ["busybox"]}, world)
    assert outcome.changes == () and apply(lock, outcome) == before


def test_one_failing_base_fails_the_whole_refresh_naming_it(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    refused = RegistryError("x/other:2: refused")
    registry = _registry({"127.0.0.1:5000/lockpipe-test/busybox:1": Answer(digest=NEW),
                          "127.0.0.1:5000/x/other:2": refused})  # fmt: skip
    world = _world(registry)
    with pytest.raises(RegistryError, match=r"bases.other: x/other:2: refused; nothing was"):
        resolve_all(lock, {"bases": ["busybox", "other"]}, world)


def test_a_dry_run_resolves_every_entry_and_reports_the_unreachable_one(tmp_path: Path) -> None:
    """issue 19: --dry-run goes on past an unreachable registry; the report has both."""
    lock = _lock(tmp_path)
    refused = RegistryError("x/other:2: cannot be reached")
    registry = _registry({"127.0.0.1:5000/lockpipe-test/busybox:1": Answer(digest=NEW),
                          "127.0.0.1:5000/x/other:2": refused})  # fmt: skip
    outcome, failed = resolve_each(lock, {"bases": ["other", "busybox"]}, _world(registry))
    assert [c.key for c in outcome.changes] == ["bases.busybox"]
    (warn,) = outcome.warnings
    assert (warn.kind, warn.name, warn.rule) == ("bases", "other", "unfetchable")
    assert "not resolved: bases.other: x/other:2: cannot be reached" in warn.message
    assert [type(e) for e in failed] == [RegistryError]
    assert outcome.checked == {"bases": ("other", "busybox")}


def _multi_arch_lock(tmp_path: Path) -> Lock:
    document = doc()
    document["bases"]["busybox"].update(
        version_label="1.0", platform="linux/amd64",
        platforms={"linux/amd64": "sha256:" + "1" * 64, "linux/arm64": "sha256:" + "2" * 64},
    )  # fmt: skip
    return load_lock(make_repo(tmp_path, document))


def _platform_missing(platform: str, available: tuple[str, ...]) -> PlatformMissing:
    return PlatformMissing("127.0.0.1:5000/lockpipe-test/busybox:1", platform, available,
                           index=True)  # fmt: skip


def test_a_recorded_platform_gone_fails_naming_it_and_what_is_available(tmp_path: Path) -> None:
    lock = _multi_arch_lock(tmp_path)
    calls: list[tuple[str, ...]] = []

    def resolve_many(refs: Any, platforms: tuple[str, ...]) -> list[Any]:
        calls.append(platforms)
        return [_platform_missing("linux/arm64", ("linux/amd64", "linux/s390x"))]

    world = _world(Registry(resolve_many=resolve_many, exists=lambda ref: True))
    with pytest.raises(RegistryError, match=r"bases\.busybox: platform gone: linux/arm64 "
                       r"\(recorded in platforms\).*available: linux/amd64, linux/s390x.*"
                       r"nothing was written"):  # fmt: skip
        resolve_all(lock, {"bases": ["busybox"]}, world)
    assert calls == [("linux/amd64", "linux/arm64")]  # never asked again with fewer platforms


def test_a_transient_failure_is_an_error_never_a_retry_with_fewer_platforms(
    tmp_path: Path,
) -> None:
    lock = _multi_arch_lock(tmp_path)
    calls: list[tuple[str, ...]] = []

    def resolve_many(refs: Any, platforms: tuple[str, ...]) -> list[Any]:
        calls.append(platforms)
        if len(platforms) > 1:
            return [RegistryError("127.0.0.1:5000 answered 503 after 4 tries")]
        return [Answer(digest=NEW, platforms={"linux/amd64": "sha256:" + "3" * 64})]

    world = _world(Registry(resolve_many=resolve_many, exists=lambda ref: True))
    with pytest.raises(RegistryError, match=r"bases\.busybox: .*503.*nothing was written"):
        resolve_all(lock, {"bases": ["busybox"]}, world)
    assert calls == [("linux/amd64", "linux/arm64")]


def test_base_warnings_label_unchanged_and_unfetchable(tmp_path: Path) -> None:
    lock = _multi_arch_lock(tmp_path)
    children = {"linux/amd64": "sha256:" + "3" * 64, "linux/arm64": "sha256:" + "4" * 64}

    def resolve_many(refs: Any, platforms: tuple[str, ...]) -> list[Any]:
        return [Answer(digest=NEW, platforms=children, available=tuple(children),
                       version_label="1.0")]  # fmt: skip

    world = _world(Registry(resolve_many=resolve_many, exists=lambda ref: False))
    outcome = resolve_all(lock, {"bases": ["busybox"]}, world)
    assert sorted(w.rule for w in outcome.warnings) == ["label-unchanged", "unfetchable"]
    (change,) = outcome.changes
    assert change.updates["platforms"] == children


def test_an_index_that_became_one_manifest_drops_its_child_digests(tmp_path: Path) -> None:
    lock = _multi_arch_lock(tmp_path)
    document = copy.deepcopy(dict(lock.document))
    document["bases"]["busybox"]["platforms"] = {"linux/amd64": "sha256:" + "1" * 64}
    lock = load_lock(make_repo(tmp_path / "one", document))
    single = Answer(digest=NEW, platforms={}, available=("linux/amd64",), version_label="1.1")
    world = _world(_registry({"127.0.0.1:5000/lockpipe-test/busybox:1": single}))
    outcome = resolve_all(lock, {"bases": ["busybox"]}, world)
    (warn,) = outcome.warnings
    assert warn.rule == "index-gone" and "no longer a multi-arch index" in warn.message
    (change,) = outcome.changes
    assert change.updates["platforms"] is None
    assert ("platforms.linux/amd64", "sha256:" + "1" * 64, None) in [
        (m.key, m.old, m.new) for m in change.moved]  # fmt: skip
    entry = apply(lock, outcome, today="2026-11-30")["bases"]["busybox"]
    assert "platforms" not in entry and entry["digest"] == NEW


def test_a_hand_edit_not_yet_relocked_is_refused_before_anything_is_asked(
    tmp_path: Path,
) -> None:
    document = doc()
    document["targets"]["other"] = {**document["targets"]["app"], "context": "images/other",
                                    "tag": "localhost/lockpipe-test/other:1"}  # fmt: skip
    lock = load_lock(make_repo(tmp_path, document))
    no_drift(lock)  # freshly locked: no drift
    (tmp_path / "images" / "app" / "Dockerfile").write_text("FROM ${BASE}\nRUN rm -rf /\n")
    with pytest.raises(DriftError, match=r"drift before refreshing: fingerprints\.app: "
                       r"images/app/.*run nox -s lock first"):  # fmt: skip
        no_drift(lock)


def test_a_requirements_file_edited_after_the_lock_is_drift_naming_nox_lock(
    tmp_path: Path,
) -> None:
    document = doc()
    document["pip"] = {"app": {"file": "images/app/requirements.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["app"]
    (tmp_path / "images" / "app").mkdir(parents=True)
    (tmp_path / "images" / "app" / "requirements.txt").write_text("idna==3.7\n")
    lock = load_lock(make_repo(tmp_path, document))
    no_drift(lock)
    (tmp_path / "images" / "app" / "requirements.txt").write_text("idna==3.8\n")
    with pytest.raises(DriftError, match=r"pip\.app: images/app/requirements\.txt has sha256 "
                       r".*run nox -s lock first"):  # fmt: skip
        no_drift(lock)


def test_a_refresh_changes_only_the_fingerprints_of_targets_built_on_what_moved(
    tmp_path: Path,
) -> None:
    document = doc()
    document["bases"]["other"] = {"ref": "127.0.0.1:5000/x/other:2", "digest": DIGEST}
    document["targets"]["other"] = {**document["targets"]["app"], "context": "images/other",
                                    "tag": "localhost/lockpipe-test/other:1",
                                    "bases": {"BASE": "other"}}  # fmt: skip
    lock = load_lock(make_repo(tmp_path, document))
    world = _world(_registry({"127.0.0.1:5000/lockpipe-test/busybox:1": Answer(digest=NEW)}))
    new = apply(lock, resolve_all(lock, {"bases": ["busybox"]}, world))
    assert new["fingerprints"]["app"] != lock.document["fingerprints"]["app"]
    assert new["fingerprints"]["other"] == lock.document["fingerprints"]["other"]
