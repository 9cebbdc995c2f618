"""Download throughput, side by side: lockpipe vs curl, aria2c and hf_hub_download.

    python benchmarks/bench_download.py [--size-mib 1024] [--cap 50m] [--connections 8 16]

One loopback nginx serves one generated file in the Hub's resolve/ layout twice:
under /capped/ with ``limit_rate`` per connection, and uncapped. For each, it
times (wall clock, fresh destination each time):

- lockpipe (``python -m lockpipe payloads``), sha256 included, per --connections;
- ``curl -o`` (one stream, no hash) and curl followed by ``sha256sum``;
- ``aria2c -x8 -s8 --checksum=sha-256=…`` (hash included);
- huggingface_hub's ``hf_hub_download`` with ``HF_ENDPOINT`` at nginx, which adds
  the X-Repo-Commit and ETag headers its HEAD request needs.

Then the warm re-verify of the store (verification cache) against a full
re-hash of the same file. Prints a Markdown table (docs/payloads.md keeps one).

Fairness: the served file is in the page cache for every tool (it was just
written), and ``sync`` runs before each timed command, so no tool pays for the
previous one's dirty pages. The goal column is measured in the same run: each
capped lockpipe row against min(connections x cap, ceiling), the ceiling being
the best uncapped lockpipe run (what the CPUs allow, sha256 and fsync
included). ``curl xN`` (N parallel ranged curls to /dev/null) shows
what nginx itself delivers over N capped connections with no client work.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.integration.payload_servers import REV, Nginx, entry, make_lock  # noqa: E402

REPO, NAME = "bench/model", "model.bin"


def make_file(path: Path, size: int) -> str:
    """``size`` bytes (a random 64 MiB block repeated: hashing cost is the same) and its sha256."""
    block = os.urandom(64 << 20)
    sha = hashlib.sha256()
    with path.open("wb") as fh:
        left = size
        while left:
            piece = block[: min(left, len(block))]
            fh.write(piece)
            sha.update(piece)
            left -= len(piece)
    return sha.hexdigest()


def timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    os.sync()  # no dirty pages left over from the previous command
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    took = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({done.returncode}): {done.stderr[-800:]}")
    return took


def lockpipe_payloads(lock: Path, store: Path, connections: int) -> list[str]:
    """``lockpipe payloads`` into ``store``, as a user runs it."""
    cmd = [sys.executable, "-m", "lockpipe", "payloads", "--quiet"]
    return [*cmd, "--connections", str(connections), "--lock", str(lock), "--store", str(store)]


def parallel_curl(url: str, size: int, n: int) -> float:
    """N ranged curls at once to /dev/null: what the server gives N connections."""
    os.sync()
    step = -(-size // n)
    start = time.monotonic()
    procs = [
        subprocess.Popen(
            ["curl", "-sf", "-o", "/dev/null", "-r", f"{s}-{min(s + step, size) - 1}", url]
        )
        for s in range(0, size, step)
    ]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("curl failed")
    return time.monotonic() - start


def rate_of(cap: str) -> float:
    """nginx's size syntax: 50m is 50 MiB/s."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return float(cap[:-1]) * units[cap[-1].lower()] if cap[-1].isalpha() else float(cap)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--cap", default="50m", help="nginx limit_rate per connection")
    ap.add_argument("--connections", type=int, nargs="+", default=[8, 16])
    args = ap.parse_args()
    size = args.size_mib << 20
    with tempfile.TemporaryDirectory(prefix="bench-dl-") as tmp_s:
        tmp = Path(tmp_s)
        www_file = tmp / "nginx" / "www" / REPO / "resolve" / REV / NAME
        www_file.parent.mkdir(parents=True)
        sha = make_file(www_file, size)
        # hf_hub_download's HEAD needs the commit and the ETag (the sha256 for LFS files)
        hub = f"etag off; add_header X-Repo-Commit {REV} always; "
        hub += f'add_header ETag "\\"{sha}\\"" always;'
        nginx = Nginx(tmp / "nginx", rate=args.cap, headers=hub)
        base = nginx.url
        lock = make_lock(tmp, {"bench": {**entry(b"", NAME, REPO), "size": size, "sha256": sha}})
        rows: list[tuple[str, str, float]] = []
        try:
            for label, prefix in (("capped", "/capped"), ("uncapped", "")):
                url = f"{base}{prefix}/{REPO}/resolve/{REV}/{NAME}"
                for n in args.connections:
                    store = tmp / f"store-{label}-{n}"
                    env = {**os.environ, "HF_ENDPOINT": base + prefix, "HOME": str(tmp)}
                    cmd = lockpipe_payloads(lock.path, store, n)
                    rows.append((label, f"lockpipe -c{n} (sha256 incl.)", timed(cmd, env)))
                    if n == args.connections[-1] and label == "uncapped":
                        rows.append(
                            ("warm", "lockpipe re-run (verification cache)", timed(cmd, env))
                        )
                        blob = next(store.rglob(f"blobs/{sha}"))
                        start = time.monotonic()
                        hashlib.sha256(blob.read_bytes()).hexdigest()
                        rows.append(
                            ("warm", "full sha256 of the file (python)", time.monotonic() - start)
                        )
                    shutil.rmtree(store)
                    if label == "capped":
                        rows.append(
                            (
                                label,
                                f"curl x{n} parallel ranges, no hash (nginx's share)",
                                parallel_curl(url, size, n),
                            )
                        )
                out = tmp / "out.bin"
                rows.append((label, "curl (no hash)", timed(["curl", "-sf", "-o", str(out), url])))
                rows.append(
                    (label, "curl + sha256sum", rows[-1][2] + timed(["sha256sum", str(out)]))
                )
                out.unlink()
                aria_cmd = [
                    "aria2c",
                    "-q",
                    "-x8",
                    "-s8",
                    "-k1M",
                    f"--checksum=sha-256={sha}",
                    "--allow-overwrite=true",
                    "--auto-file-renaming=false",
                    "-d",
                    str(tmp),
                    "-o",
                    "aria.bin",
                    url,
                ]
                rows.append((label, "aria2c -x8 -s8 --checksum", timed(aria_cmd)))
                (tmp / "aria.bin").unlink()
                hf = (
                    "from huggingface_hub import hf_hub_download as d; import sys; "
                    f"d('{REPO}', '{NAME}', revision='{REV}', cache_dir=sys.argv[1])"
                )
                hf_env = {
                    **os.environ,
                    "HF_ENDPOINT": base + prefix,
                    "HF_HUB_DISABLE_XET": "1",
                    "HF_HUB_DISABLE_TELEMETRY": "1",
                    "HOME": str(tmp),
                }
                try:
                    rows.append(
                        (
                            label,
                            "hf_hub_download",
                            timed([sys.executable, "-c", hf, str(tmp / "hf")], hf_env),
                        )
                    )
                except RuntimeError as exc:
                    rows.append((label, f"hf_hub_download failed: {str(exc)[-120:]}", float("nan")))
                shutil.rmtree(tmp / "hf", ignore_errors=True)
        finally:
            nginx.stop()
    aria = {label: t for label, tool, t in rows if tool.startswith("aria2c")}
    cap = rate_of(args.cap)
    print(
        f"file {size / 1e9:.2f} GB, cap {args.cap}B/s = {cap / 1e6:.1f} MB/s per connection, "
        f"{os.cpu_count()} CPUs\n"
    )
    print("| case | tool | wall s | MB/s | vs aria2c | goal: % of min(N x cap, ceiling) |")
    print("|---|---|---:|---:|---:|---|")
    for label, tool, t in rows:
        rate = size / t if t == t and label != "warm" else float("nan")
        ratio = f"{aria[label] / t:.2f}x" if label in aria and t == t else ""
        goal = ""
        if label == "capped" and tool.startswith("lockpipe"):
            n = int(tool.split()[1][2:])
            ceiling = max(size / u[2] for u in rows if u[0] == "uncapped" and "lockpipe" in u[1])
            target = min(n * cap, ceiling)
            goal = (
                f"{100 * rate / target:.0f} % of {target / 1e6:.0f} "
                f"({'N x cap' if n * cap <= ceiling else 'ceiling: uncapped lockpipe'})"
            )
        print(f"| {label} | {tool} | {t:.2f} | {rate / 1e6:.0f} | {ratio} | {goal} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
