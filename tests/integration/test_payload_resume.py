"""Resume after SIGKILL, two runs of one file at once (its blob lock), and the real Gemma GGUF
through the whole path."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import FormatError
from lockpipe.payloads.run import Options, run_payloads
from lockpipe.payloads.store import payload_path
from tests.fixtures_gemma import GemmaFile, gemma3_270m_gguf  # noqa: F401
from tests.integration.payload_servers import Nginx, entry, make_lock, nginx_binary, publish
from tests.policy import scratch, unavailable

pytestmark = pytest.mark.integration
MiB = 1 << 20


@pytest.fixture(scope="module")
def nginx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nginx]:
    if nginx_binary() is None:
        unavailable("nginx is not installed (apt-get install nginx)")
    with scratch(tmp_path_factory, "nginx") as work:
        server = Nginx(work, rate="4m")  # 4 MB/s per connection
        yield server
        server.stop()


def _cli(lock: Path, store: Path, endpoint: str, *names: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HOME": str(store.parent)}
    cmd = [
        sys.executable,
        "-m",
        "lockpipe",
        "payloads",
        "--jsonl",
        "--connections",
        "4",
        "--lock",
        str(lock),
        "--store",
        str(store),
        *names,
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_mid_file_resumes_and_never_exposes_a_bad_file(
    nginx: Nginx, tmp_path: Path
) -> None:
    data = os.urandom(48 * MiB + 3)
    publish(nginx.www, data, "kill.bin")
    lock = make_lock(tmp_path, {"k": entry(data, "kill.bin")})
    store = tmp_path / "store"
    final = payload_path(store, lock.payloads["k"])
    resumed = []
    journal = final.parents[2] / "blobs" / (lock.payloads["k"].sha256 + ".lockpipe-journal")
    for _ in range(3):  # ~3 s for the whole file at 4 x 4 MB/s: kill well before the end
        before = journal.read_text() if journal.exists() else ""
        proc = _cli(lock.path, store, f"{nginx.url}/capped")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            not journal.exists() or journal.read_text() == before
        ):  # wait until this run has written (and journaled) something
            time.sleep(0.01)
        time.sleep(random.uniform(0.0, 0.2))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        starts = [json.loads(line) for line in out.splitlines() if '"start"' in line]
        resumed += [s["resumed"] for s in starts]
        assert not final.exists(), "a killed run must leave nothing at the final path"
    proc = _cli(lock.path, store, f"{nginx.url}/capped")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    start = next(e for e in events if e["event"] == "start")
    assert start["resumed"] > 0 and max(resumed) > 0  # later runs continued, not restarted
    assert hashlib.sha256(final.read_bytes()).hexdigest() == lock.payloads["k"].sha256
    served = sum(n for _, uri, _, n in nginx.served() if uri.endswith("/kill.bin"))
    assert served < 2 * len(data)  # resumed runs did not fetch the file again


def test_two_runs_at_once_fetch_the_file_once(nginx: Nginx, tmp_path: Path) -> None:
    data = os.urandom(12 * MiB)
    publish(nginx.www, data, "twice.bin")
    lock = make_lock(tmp_path, {"t": entry(data, "twice.bin")})
    store = tmp_path / "store"
    a, b = (_cli(lock.path, store, f"{nginx.url}/capped") for _ in range(2))
    outs = [p.communicate(timeout=60) for p in (a, b)]
    assert a.returncode == 0 and b.returncode == 0, outs
    statuses = sorted(
        json.loads(line)["status"]
        for out, _ in outs
        for line in out.splitlines()
        if '"done"' in line
    )
    assert statuses == ["cached", "downloaded"]
    served = sum(n for _, uri, _, n in nginx.served() if uri.endswith("/twice.bin"))
    assert served == len(data)


def test_real_gemma_gguf_is_fetched_verified_and_checked(
    nginx: Nginx,
    tmp_path: Path,
    gemma3_270m_gguf: GemmaFile,  # noqa: F811 (a fixture imported from tests.fixtures_gemma)
) -> None:
    g = gemma3_270m_gguf
    target = nginx.www / "google/gemma-3-270m/resolve" / entry(b"")["revision"] / g.path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        try:
            os.link(g.path, target)
        except OSError:  # another filesystem, or another mount of the same one (EXDEV)
            shutil.copyfile(g.path, target)
    good = {"arch": "gemma3", "block_count": 18, "tensor_count": 236}
    base = {
        **entry(b"x", g.path.name, "google/gemma-3-270m", format="gguf"),
        "size": g.size,
        "sha256": g.sha256,
    }
    lock = make_lock(tmp_path, {"gemma": {**base, "expect": good}})
    opts = Options(store=tmp_path / "store", output="quiet", env={"HF_ENDPOINT": nginx.url})
    [result] = run_payloads(lock, [], opts)
    assert result.status == "downloaded" and result.path.stat().st_size == g.size
    bad = make_lock(tmp_path / "bad", {"gemma": {**base, "expect": {"arch": "llama"}}})
    with pytest.raises(FormatError, match=r"general\.architecture is 'gemma3', expect\.arch wants"):
        run_payloads(bad, [], opts)  # same store: the blob is cached, the check still runs
    assert not result.path.exists()  # withdrawn: it no longer passes the lock's checks


def test_ctrl_c_flushes_the_journal_and_the_next_run_resumes(nginx: Nginx, tmp_path: Path) -> None:
    # ~6 s at 4 x 4 MB/s: 40 MiB (2.6 s) once finished before the signal on a loaded machine
    data = os.urandom(96 * MiB)
    publish(nginx.www, data, "int.bin")
    lock = make_lock(tmp_path, {"i": entry(data, "int.bin")})
    store = tmp_path / "store"
    proc = _cli(lock.path, store, f"{nginx.url}/capped")
    journal = (
        store / "models--org--model" / "blobs" / (lock.payloads["i"].sha256 + ".lockpipe-journal")
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not journal.exists():
        time.sleep(0.01)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "run again to resume" in err and "Traceback" not in err, err
    done = sum(e - s for s, e in json.loads(journal.read_text())["done"])
    again = _cli(lock.path, store, f"{nginx.url}/capped")
    out, _ = again.communicate(timeout=60)
    start = next(json.loads(line) for line in out.splitlines() if '"start"' in line)
    assert again.returncode == 0 and start["resumed"] == done > 0
    assert payload_path(store, lock.payloads["i"]).read_bytes() == data


@pytest.mark.parametrize("journal_text", ["[]", '"done"', '{"sha256": 5, "done": {"0": 1}}'])
def test_a_journal_of_another_shape_is_discarded_and_the_file_fetched_whole(
    nginx: Nginx, tmp_path: Path, journal_text: str
) -> None:
    """A journal lockpipe did not write this way (another version's, a tool's) is not a
    traceback: the run starts the file over, as for a journal that does not match."""
    data = os.urandom(MiB)
    publish(nginx.www, data, "odd-journal.bin")
    lock = make_lock(tmp_path, {"j": entry(data, "odd-journal.bin")})
    store = tmp_path / "store"
    blobs = store / "models--org--model" / "blobs"
    blobs.mkdir(parents=True)
    sha = lock.payloads["j"].sha256
    (blobs / f"{sha}.lockpipe-journal").write_text(journal_text)
    (blobs / f"{sha}.lockpipe-partial").write_bytes(b"\0" * 16)
    out, err = _cli(lock.path, store, nginx.url).communicate(timeout=60)
    assert "Traceback" not in err, err
    start = next(json.loads(line) for line in out.splitlines() if '"start"' in line)
    assert start["resumed"] == 0, start
    assert payload_path(store, lock.payloads["j"]).read_bytes() == data
