"""Refreshing 40 base pins: ``lockpipe refresh-digests --check`` versus a skopeo loop.

    python benchmarks/bench_refresh.py [--bases 40] [--repeat 3] [--latency-ms 0]

Needs the loopback registry .ci/start-services starts (127.0.0.1:5000, or
LOCKPIPE_TEST_REGISTRY) and skopeo. Pushes ``--bases`` distinct tags (tiny
images sharing one layer, each with its own version label), writes a lock
pinning all of them, then times in one run, median of ``--repeat``:

- ``python -m lockpipe refresh-digests --lock LOCK --check --kind bases``, the
  whole CLI, resolving every base through ``resolve_many`` (8 at a time):
  cold (an empty manifest cache: HEAD, manifest, config blob per base) and
  warm (the cache from the run before: one HEAD per base);
- the same resolution in-process (``resolve_many`` alone, no interpreter
  start), cold and warm;
- ``nox -s refresh-digests -- --lock LOCK --check --kind bases``, as the issue
  asks, warm cache: nox reuses its venv (``reuse_venv = "yes"``) and ``_install``
  skips pip when nothing changed; one run first creates the venv, not timed. With
  no ``nox`` on PATH (or next to this interpreter) the row says so;
- a loop of ``skopeo inspect --no-tags --tls-verify=false docker://…``, one
  process per base, as a script would do it.

Then where the CLI's time goes: the interpreter alone (``python -c pass``), the
interpreter plus the imports a ``--kind bases`` refresh loads, and what is left
of the warm CLI run (resolution, the drift check, output); and the five
slowest imports by cumulative time (``python -X importtime``).

``--latency-ms N`` sends everything (both tools) through a loopback proxy that
waits N ms before each answer, as a registry across the internet would.
Prints the times and the ratios skopeo / lockpipe (the goal is at least 5x).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lockpipe.errors import RegistryError  # noqa: E402
from lockpipe.registry.client import resolve_many  # noqa: E402
from lockpipe.registry.push import put_manifest, registry_for, upload_blob  # noqa: E402
from tests.lockfactory import doc, make_repo  # noqa: E402
from tests.registry_servers import OCI_MANIFEST, FaultProxy, image_blobs  # noqa: E402

REGISTRY = os.environ.get("LOCKPIPE_TEST_REGISTRY", "127.0.0.1:5000")
REPOSITORY = "lockpipe-bench/refresh"


def push_tags(n: int) -> dict[str, tuple[str, str]]:
    """name -> (ref, digest) for ``n`` tags, each its own image over one shared layer."""
    reg, _ = registry_for(f"{REGISTRY}/{REPOSITORY}:b0")
    out = {}
    for i in range(n):
        blobs = image_blobs("linux/amd64", f"bench-{i}", b"shared layer\n")
        for part in ("layer", "config"):
            upload_blob(
                reg, REPOSITORY, blobs[part], "sha256:" + hashlib.sha256(blobs[part]).hexdigest()
            )
        digest = put_manifest(reg, REPOSITORY, f"b{i}", blobs["manifest"], OCI_MANIFEST)
        out[f"b{i:02d}"] = (f"{REGISTRY}/{REPOSITORY}:b{i}", digest)
    return out


def write_lock(root: Path, tags: dict[str, tuple[str, str]]) -> Path:
    bases = {name: {"ref": ref, "digest": digest, "version_label": f"bench-{int(name[1:])}"}
             for name, (ref, digest) in tags.items()}  # fmt: skip
    document = doc(bases=bases)
    document["targets"]["app"]["bases"] = {"BASE": next(iter(tags))}
    return make_repo(root, document)


IMPORTS = (
    "import lockpipe.cli.main, lockpipe.cli.refresh, lockpipe.refresh.plan, "
    "lockpipe.registry.client"
)  # what a --kind bases refresh loads


def nox_binary() -> str | None:
    here = Path(sys.executable).with_name("nox")
    return str(here) if here.is_file() else shutil.which("nox")


def slowest_imports(top: int = 6) -> list[tuple[float, str]]:
    """(cumulative seconds, package) of the slowest packages the refresh imports, ours and
    third-party, each at its costliest import, from one ``-X importtime`` run."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", IMPORTS], cwd=ROOT,
                          capture_output=True, text=True, check=True)  # fmt: skip
    best: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].strip()
        key = name if name.startswith("lockpipe.") else name.split(".")[0]
        best[key] = max(best.get(key, 0.0), int(parts[1]) / 1e6)
    return sorted(((t, k) for k, t in best.items()), reverse=True)[:top]


def median(run: Callable[[int], object], repeat: int) -> float:
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        run(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    tags = push_tags(args.bases)
    host = REGISTRY
    if args.latency_ms:
        proxy = FaultProxy(REGISTRY)
        proxy.delay = args.latency_ms / 1000
        host = proxy.host
        tags = {n: (ref.replace(REGISTRY, host, 1), d) for n, (ref, d) in tags.items()}
    refs = [ref for ref, _ in tags.values()]
    with tempfile.TemporaryDirectory(prefix="bench-refresh-") as tmp:
        lock = write_lock(Path(tmp), tags)
        cli = [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock), "--check",
               "--kind", "bases"]  # fmt: skip
        warm = str(Path(tmp) / "warm-cache")

        def env(cache: str) -> dict[str, str]:
            return {**os.environ, "LOCKPIPE_CACHE": cache}

        probe = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, env=env(warm))
        if probe.returncode != 0:
            print(f"the CLI failed (exit {probe.returncode}); its output:\n{probe.stderr}")
            return 1

        def run_cli(cache: str) -> None:
            subprocess.run(cli, cwd=ROOT, check=True, capture_output=True, env=env(cache))

        def run_library(cache: str) -> None:
            results = resolve_many(refs, cache=Path(cache) / "registry")
            failed = [r for r in results if isinstance(r, RegistryError)]
            assert not failed, failed
            assert [r.digest for r in results if not isinstance(r, RegistryError)] == [
                d for _, d in tags.values()]  # fmt: skip

        def run_skopeo(_: int) -> None:
            for ref in refs:
                subprocess.run(["skopeo", "inspect", "--no-tags", "--tls-verify=false",
                                f"docker://{ref}"], check=True, capture_output=True)  # fmt: skip

        def cold(run: Callable[[str], None], name: str) -> Callable[[int], None]:
            return lambda i: run(str(Path(tmp) / f"{name}-cold-{i}"))

        t_cli_cold = median(cold(run_cli, "cli"), args.repeat)
        t_cli_warm = median(lambda _: run_cli(warm), args.repeat)
        t_lib_cold = median(cold(run_library, "lib"), args.repeat)
        t_lib_warm = median(lambda _: run_library(warm), args.repeat)
        t_skopeo = median(run_skopeo, args.repeat)

        nox = nox_binary()
        t_nox: float | None = None
        nox_cmd = [nox or "nox", "-s", "refresh-digests", "--", "--lock", str(lock), "--check",
                   "--kind", "bases"]  # fmt: skip
        if nox is not None:
            first = subprocess.run(nox_cmd, cwd=ROOT, capture_output=True, text=True,
                                   env=env(warm))  # fmt: skip  # creates the venv: not timed
            if first.returncode == 0:
                t_nox = median(lambda _: subprocess.run(
                    nox_cmd, cwd=ROOT, check=True, capture_output=True, env=env(warm)),
                    args.repeat)  # fmt: skip
            else:
                print(f"nox -s refresh-digests failed (exit {first.returncode}):\n"
                      f"{first.stderr[-2000:]}")  # fmt: skip

        def python(code: str) -> Callable[[int], object]:
            argv = [sys.executable, "-c", code]
            return lambda _: subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)

        t_bare = median(python("pass"), args.repeat)
        t_imports = median(python(IMPORTS), args.repeat)
        slowest = slowest_imports()
    n = args.bases
    print(f"{n} bases on {host} ({args.latency_ms:g} ms added per answer), median of "
          f"{args.repeat} runs, {os.cpu_count()} CPUs")  # fmt: skip
    rows = [("lockpipe refresh-digests --check, cold cache", t_cli_cold),
            ("lockpipe refresh-digests --check, warm cache", t_cli_warm),
            ("resolve_many in-process, cold cache", t_lib_cold),
            ("resolve_many in-process, warm cache", t_lib_warm)]  # fmt: skip
    print(f"  {n} x skopeo inspect{'':27s}: {t_skopeo:6.2f} s")
    for label, seconds in rows:
        print(f"  {label:45s}: {seconds:6.2f} s   skopeo / this = {t_skopeo / seconds:5.1f}x")
    label = "nox -s refresh-digests -- --check, warm"
    if t_nox is None:
        print(f"  {label:45s}: not measured ({'no nox found' if nox is None else 'it failed'})")
    else:
        print(f"  {label:45s}: {t_nox:6.2f} s   skopeo / this = {t_skopeo / t_nox:5.1f}x")
    print("where the warm CLI run's time goes:")
    print(f"  interpreter start (python -c pass){'':11s}: {t_bare:6.2f} s")
    print(f"  imports of a --kind bases refresh{'':12s}: {t_imports - t_bare:6.2f} s")
    rest = t_cli_warm - t_imports
    print(f"  the rest: drift check, resolution, output{'':4s}: {rest:6.2f} s")
    if t_nox is not None:
        print(f"  nox itself (its start, the venv check){'':7s}: {t_nox - t_cli_warm:6.2f} s")
    print("slowest imports (cumulative: a module's time includes what it imports):")
    for seconds, module in slowest:
        print(f"  {module:45s}: {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
