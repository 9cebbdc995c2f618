"""Payloads from an OCI registry, side by side: lockpipe's --mirror oci:// vs oras and skopeo.

    python benchmarks/bench_oci.py [--size-mib 1024] [--cap 50m] [--connections 16] [--runs 3]

A real ``docker-registry`` (distribution 2.8) on 127.0.0.1 with its own storage
holds two payloads that ``lockpipe payloads publish`` pushed as ModelPack
artifacts: the real 253 MB Gemma 3 270M GGUF (tests/fixtures_gemma.py) and a
generated file of --size-mib. Each is pulled capped (through a loopback nginx in
front of the registry with ``limit_rate`` per connection, as the download
benchmark caps its HTTP server) and uncapped (the registry itself), by:

- lockpipe: ``python -m lockpipe payloads --mirror oci://…`` into a fresh store,
  sha256 computed while downloading, fsync and rename included (the Hub is a
  closed port: every byte comes from the registry);
- ``oras`` (PyPI's client, ``OrasClient.pull``) followed by a sha256 of the file;
- ``skopeo copy docker://… dir:…``, which checks each blob's digest itself.

The HTTP figure for the uncapped goal is lockpipe's own HTTP path in the same run:
the generated file from loopback nginx, uncapped. ``sync`` runs before each timed
command. Each tool runs each case --runs times (3), each into an empty folder, and the
table gives the median. Prints a Markdown table (docs/payloads.md keeps one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_download import lockpipe_payloads, make_file, rate_of, timed  # noqa: E402
from lockpipe.demo.gemma import GEMMA_FILE, assemble  # noqa: E402
from lockpipe.fs import sha256_file  # noqa: E402
from lockpipe.payloads.store import blob_path  # noqa: E402
from lockpipe.publish.artifacts import PublishOptions, publish_payloads  # noqa: E402
from tests.fixtures_gemma import cache_dir  # noqa: E402
from tests.integration.oci_servers import CappedRegistry  # noqa: E402
from tests.integration.payload_servers import REV, Nginx, entry, make_lock  # noqa: E402
from tests.registry_servers import RegistryProc  # noqa: E402

NO_HUB = "http://127.0.0.1:9"  # nothing listens: a fetch that reached for the Hub fails


ORAS = (
    "import hashlib, sys, oras.client\n"
    "c = oras.client.OrasClient(hostname=sys.argv[1], insecure=True)\n"
    "[path] = c.pull(target=sys.argv[2], outdir=sys.argv[3])\n"
    "h = hashlib.sha256()\n"
    "with open(path, 'rb') as fh:\n"
    "    while b := fh.read(8 << 20): h.update(b)\n"
    "assert h.hexdigest() == sys.argv[4], 'sha256 mismatch'\n"
)


def median(runs: int, cmd: list[str], env: dict[str, str] | None, out: Path, sha: str) -> float:
    """The median of ``runs`` timed runs of ``cmd``, each into an empty ``out``, the same for
    every tool; the file it wrote (any name under ``out``) must have the sha256 ``sha``,
    checked once, untimed."""
    took = []
    for _ in range(runs):
        shutil.rmtree(out, ignore_errors=True)
        took.append(timed(cmd, env))
    files = [f for f in out.rglob("*") if f.is_file() and f.stat().st_size > 4096]
    assert any(sha256_file(f) == sha for f in files), f"{cmd[0]}: no file with sha256 {sha}"
    shutil.rmtree(out)
    return statistics.median(took)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--cap", default="50m", help="nginx limit_rate per connection")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3, help="runs per tool and case; the median")
    args = ap.parse_args()
    rows: list[tuple[str, str, str, float, int]] = []  # file, case, tool, seconds, bytes
    with tempfile.TemporaryDirectory(prefix="bench-oci-") as tmp_s:
        tmp = Path(tmp_s)
        gemma = assemble(cache_dir())
        big = tmp / "big.bin"
        big_sha = make_file(big, args.size_mib << 20)
        files = {
            "gemma": (GEMMA_FILE, gemma, sha256_file(gemma), "google/gemma-3-270m"),
            "big": ("big.bin", big, big_sha, "bench/big"),
        }
        docs = {
            name: {
                **entry(b"", fn, repo),
                "size": path.stat().st_size,
                "sha256": sha,
                "format": "gguf" if fn.endswith(".gguf") else "json",
            }
            for name, (fn, path, sha, repo) in files.items()
        }
        lock = make_lock(tmp, docs)
        store = tmp / "store-src"
        for name, (_, path, _, _) in files.items():
            dest = blob_path(store, lock.payloads[name])
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        registry = RegistryProc(tmp / "registry")
        capped = CappedRegistry(tmp / "nginx-registry", registry.host, args.cap)
        www = tmp / "nginx-http" / "www" / "bench/big" / "resolve" / REV / "big.bin"
        www.parent.mkdir(parents=True)
        os.link(big, www)
        http = Nginx(tmp / "nginx-http", rate=args.cap)
        try:
            publish_payloads(
                lock,
                [],
                PublishOptions(
                    store=store, prefix=f"{registry.host}/models", env={"HF_ENDPOINT": NO_HUB}
                ),
            )
            for case, host in (("capped", capped.host), ("uncapped", registry.host)):
                for name, (_, path, sha, _) in files.items():
                    size = path.stat().st_size
                    ref = f"{host}/models/{name}:rev-{REV}"
                    dest = tmp / f"store-{case}-{name}"
                    env = {**os.environ, "HF_ENDPOINT": NO_HUB, "HOME": str(tmp)}
                    mirror = ["--mirror", f"oci://{host}/models"]
                    cmd = [*lockpipe_payloads(lock.path, dest, args.connections), name, *mirror]
                    tool = f"lockpipe -c{args.connections} (sha256 incl.)"
                    rows.append((name, case, tool, median(args.runs, cmd, env, dest, sha), size))
                    out = tmp / f"oras-{case}-{name}"
                    oras = [sys.executable, "-c", ORAS, host, ref, str(out), sha]
                    took = median(args.runs, oras, None, out, sha)
                    rows.append((name, case, "oras pull + sha256", took, size))
                    out = tmp / f"skopeo-{case}-{name}"
                    skopeo = ["skopeo", "copy", "--src-tls-verify=false", f"docker://{ref}",
                              f"dir:{out}"]  # fmt: skip
                    took = median(args.runs, skopeo, None, out, sha)
                    rows.append((name, case, "skopeo copy (digest checked)", took, size))
            dest = tmp / "store-http"
            env = {**os.environ, "HF_ENDPOINT": http.url, "HOME": str(tmp)}
            cmd = [*lockpipe_payloads(lock.path, dest, args.connections), "big"]
            tool = f"lockpipe -c{args.connections} over HTTP (nginx)"
            rows.append(("big", "uncapped", tool, median(args.runs, cmd, env, dest, big_sha),
                         big.stat().st_size))  # fmt: skip
        finally:
            http.stop()
            capped.stop()
            registry.stop()
    _report(rows, args.cap, args.connections)
    return 0


def _report(rows: list[tuple[str, str, str, float, int]], cap: str, n: int) -> None:
    print(f"cap {cap} = {rate_of(cap) / 1e6:.1f} MB/s per connection, {os.cpu_count()} CPUs\n")
    print("| file | case | tool | wall s | MB/s | lockpipe vs this |")
    print("|---|---|---|---:|---:|---:|")
    for name, case, tool, secs, size in rows:
        ours = next(
            s
            for f, c, t, s, _ in rows
            if (f, c) == (name, case) and t.startswith("lockpipe") and "HTTP" not in t
        )
        ratio = "" if tool.startswith("lockpipe") else f"{secs / ours:.2f}x"
        print(f"| {name} | {case} | {tool} | {secs:.2f} | {size / secs / 1e6:.0f} | {ratio} |")
    oci = next(
        size / s
        for f, c, t, s, size in rows
        if (f, c) == ("big", "uncapped") and t.startswith("lockpipe") and "HTTP" not in t
    )
    http = next(size / s for f, c, t, s, size in rows if "HTTP" in t)
    print(
        f"\nuncapped, big file: lockpipe from the registry {oci / 1e6:.0f} MB/s = "
        f"{100 * oci / http:.0f} % of lockpipe over HTTP ({http / 1e6:.0f} MB/s)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
