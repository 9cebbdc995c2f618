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
command. Each case runs --runs rounds (3); a round runs every tool once, one after the
other, each into an empty folder, so a change of load on the machine falls on every tool
alike; the table gives each tool's median, its runs and the load average at the case's
start. One untimed round of the uncapped small case comes first: Python tools (lockpipe,
oras) then read bytecode, as an installed package has it, even where
PYTHONDONTWRITEBYTECODE is set (they share a PYTHONPYCACHEPREFIX under the temporary
folder; lockpipe's source tree has no .pyc), and the registry, nginx and page cache have
served each tool once. Prints a Markdown table (docs/payloads.md keeps one).
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


Row = tuple[str, str, str, list[float], int, str]  # file, case, tool, seconds, bytes, load


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


Tool = tuple[str, list[str], dict[str, str], Path, str]  # label, command, env, output, sha256


def rounds(runs: int, tools: list[Tool]) -> list[list[float]]:
    """``runs`` rounds of every tool (label, command, env, output folder, sha256), each run
    into an empty folder; each tool's seconds. The file a tool wrote (any name under its
    folder) must have the sha256, checked after its last run, untimed."""
    took: list[list[float]] = [[] for _ in tools]
    for _ in range(runs):
        for i, (_, cmd, env, out, _) in enumerate(tools):
            shutil.rmtree(out, ignore_errors=True)
            took[i].append(timed(cmd, env))
    for label, _, _, out, sha in tools:
        files = [f for f in out.rglob("*") if f.is_file() and f.stat().st_size > 4096]
        assert any(sha256_file(f) == sha for f in files), f"{label}: no file with sha256 {sha}"
        shutil.rmtree(out)
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--cap", default="50m", help="nginx limit_rate per connection")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3, help="runs per tool and case; the median")
    args = ap.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-oci-") as tmp_s:
        tmp = Path(tmp_s)
        pyc = {"PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
        base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | pyc
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

            def tools_for(case: str, host: str, name: str, sha: str) -> list[Tool]:
                ref = f"{host}/models/{name}:rev-{REV}"
                env = {**base, "HF_ENDPOINT": NO_HUB, "HOME": str(tmp)}
                mirror = ["--mirror", f"oci://{host}/models"]
                out = tmp / f"store-{case}-{name}"
                cmd = [*lockpipe_payloads(lock.path, out, args.connections), name, *mirror]
                tools = [(f"lockpipe -c{args.connections} (sha256 incl.)", cmd, env, out, sha)]
                out = tmp / f"oras-{case}-{name}"
                oras = [sys.executable, "-c", ORAS, host, ref, str(out), sha]
                tools.append(("oras pull + sha256", oras, base, out, sha))
                out = tmp / f"skopeo-{case}-{name}"
                skopeo = ["skopeo", "copy", "--src-tls-verify=false", f"docker://{ref}",
                          f"dir:{out}"]  # fmt: skip
                tools.append(("skopeo copy (digest checked)", skopeo, base, out, sha))
                if (case, name) == ("uncapped", "big"):  # the uncapped goal's HTTP figure
                    out = tmp / "store-http"
                    env = {**base, "HF_ENDPOINT": http.url, "HOME": str(tmp)}
                    cmd = [*lockpipe_payloads(lock.path, out, args.connections), "big"]
                    tools.append((f"lockpipe -c{args.connections} over HTTP (nginx)", cmd, env,
                                  out, sha))  # fmt: skip
                return tools

            rounds(1, tools_for("uncapped", registry.host, "gemma", files["gemma"][2]))  # warm-up
            for case, host in (("capped", capped.host), ("uncapped", registry.host)):
                for name, (_, path, sha, _) in files.items():
                    tools, at = tools_for(case, host, name, sha), load()
                    took = rounds(args.runs, tools)
                    for (tool, *_), times in zip(tools, took, strict=True):
                        rows.append((name, case, tool, times, path.stat().st_size, at))
        finally:
            http.stop()
            capped.stop()
            registry.stop()
    _report(rows, args.cap, args.connections)
    return 0


def _report(rows: list[Row], cap: str, n: int) -> None:
    print(f"cap {cap} = {rate_of(cap) / 1e6:.1f} MB/s per connection, {os.cpu_count()} CPUs\n")
    print("| file | case | tool | wall s (median) | MB/s | lockpipe vs this | runs s | load |")
    print("|---|---|---|---:|---:|---:|---|---:|")

    def ours(name: str, case: str) -> float:
        return next(
            statistics.median(t)
            for f, c, tool, t, _, _ in rows
            if (f, c) == (name, case) and tool.startswith("lockpipe") and "HTTP" not in tool
        )

    for name, case, tool, took, size, at in rows:
        secs = statistics.median(took)
        ratio = "" if tool.startswith("lockpipe") else f"{secs / ours(name, case):.2f}x"
        runs = " ".join(f"{t:.2f}" for t in took)
        print(f"| {name} | {case} | {tool} | {secs:.2f} | {size / secs / 1e6:.0f} | {ratio} "
              f"| {runs} | {at} |")  # fmt: skip
    size = next(size for f, _, _, _, size, _ in rows if f == "big")
    oci = size / ours("big", "uncapped")
    http = next(size / statistics.median(t) for _, _, tool, t, _, _ in rows if "HTTP" in tool)
    print(
        f"\nuncapped, big file: lockpipe from the registry {oci / 1e6:.0f} MB/s = "
        f"{100 * oci / http:.0f} % of lockpipe over HTTP ({http / 1e6:.0f} MB/s); "
        f"load average at the end {load()}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
