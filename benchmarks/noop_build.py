"""No-op build versus real build versus ``nox --version``, in one run.

    python benchmarks/noop_build.py [--engine buildah] [--repeat 5]

Needs the engines and loopback registry that .ci/start-services starts. It
makes a small target FROM a busybox base pinned by digest in that registry,
then times, per engine, the median of N runs of:

- a real build (``python -m lockpipe build --force``) after a context change,
  so the RUN step really runs (the relock before it is not timed);
- a no-op build (same command without --force: the record matches, no build call);
- the same no-op through nox (``nox -s build -- …``, venv reused);
- ``nox --version``, the floor for anything started through nox.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.bases import push_busybox_base  # noqa: E402
from tests.lockfactory import doc, make_repo  # noqa: E402

DOCKERFILE = "ARG BASE\nFROM ${BASE}\nCOPY stamp /stamp\nRUN cat /stamp > /built.txt\n"


def median_seconds(
    argv: list[str], repeat: int, env: dict[str, str], before: Callable[[], None] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cache_buster(lock: Path, env: dict[str, str]) -> Callable[[], None]:
    """A fresh context file and relock before each real build, so its RUN step really runs."""

    def bust() -> None:
        (lock.parent.parent / "images/app/stamp").write_text(f"{time.time_ns()}\n")
        subprocess.run([sys.executable, "-m", "lockpipe", "lock", "--lock", str(lock)],
                       cwd=ROOT, env=env, check=True, capture_output=True)  # fmt: skip

    bust()
    return bust


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", choices=["buildah", "podman", "docker"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--registry", default=os.environ.get("LOCKPIPE_TEST_REGISTRY", "127.0.0.1:5000")
    )
    args = parser.parse_args()
    engines = args.engine or ["buildah", "podman", "docker"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKPIPE_QUIET": "1"}

    with tempfile.TemporaryDirectory(prefix="lockpipe-bench-") as tmp:
        base = push_busybox_base(args.registry, Path(tmp) / "base", "lockpipe-bench/busybox:1")
        document = doc()
        document["bases"]["busybox"] = {"ref": base[0], "digest": base[1]}
        lock = make_repo(Path(tmp) / "repo", document, DOCKERFILE)
        state = Path(tmp) / "state"
        nox_version = median_seconds(["nox", "--version"], args.repeat, env)
        print(
            f"{'engine':8} {'real build':>11} {'no-op':>8} {'no-op via nox':>14} "
            f"{'nox --version':>14} {'real/no-op':>11} {'no-op/nox-v':>12} {'nox no-op/nox-v':>16}"
        )
        for engine in engines:
            cli = [
                sys.executable,
                "-m",
                "lockpipe",
                "build",
                "app",
                "--lock",
                str(lock),
                "--engine",
                engine,
                "--state",
                str(state),
            ]
            real = median_seconds([*cli, "--force"], args.repeat, env, cache_buster(lock, env))
            noop = median_seconds(cli, args.repeat, env)
            via_nox = ["nox", "-s", "build", "--", *cli[4:]]
            subprocess.run(via_nox, cwd=ROOT, env=env, check=True, capture_output=True)  # warm venv
            noop_nox = median_seconds(via_nox, args.repeat, env)
            print(
                f"{engine:8} {real:10.2f}s {noop:7.2f}s {noop_nox:13.2f}s {nox_version:13.2f}s "
                f"{real / noop:10.1f}x {noop / nox_version:11.1f}x {noop_nox / nox_version:15.1f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
