"""preflight's hybrid (qwen35) arithmetic against what the pinned llama.cpp allocates.

``tests/tiny_qwen35.py`` writes a random-weight qwen35 GGUF with SYNTHETIC TEST DIMS (2
attention layers, 6 Gated DeltaNet layers, 1 MTP block). For each flag set, a test lock's
llama-cpu target serves it with those flags; ``lockpipe preflight`` plans the target from
the stored header, then the same serve command runs in the llama-cpu image the pipeline
built from the pinned tree (b10069, CPU). At ``-lv 4`` llama.cpp logs each memory it
allocates::

    llama_kv_cache: size =    8.00 MiB (  4096 cells,   2 layers,  2/2 seqs), K (f16): ...
    llama_memory_recurrent: size =    0.89 MiB (     2 cells,   8 layers,  2 seqs  3 rs_seq) ...
    common_speculative_init_result: creating MTP draft context against the target model ...
    llama_kv_cache: size =    4.00 MiB (  4096 cells,   1 layers,  2/2 seqs), K (f16): ...

Preflight's bytes must print the same to llama.cpp's 0.01 MiB, and its cell, layer and
snapshot counts must be llama.cpp's. The negative case is one both refuse: draft-mtp on a
qwen35 GGUF without MTP blocks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import CheckFailed
from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import dump_lock, load_lock
from lockpipe.payloads.store import payload_path
from lockpipe.smoke.runner import STORE_IN_CONTAINER, container_command
from tests import tiny_qwen35
from tests.e2e.conftest import BuiltLlama
from tests.e2e.llama_cpu import llama_cpu_lock
from tests.policy import scratch, unavailable

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
READY_SECONDS = 120
# Low on purpose (2 threads, no warm-up, small contexts). --fit off: llama.cpp keeps what it
# is given; -lv 4: llama.cpp's allocation lines are logged at "trace" verbosity.
SERVE = ["llama-server", "--host", "127.0.0.1", "--port", "8080", "-t", "2", "--no-warmup",
         "-fit", "off", "-lv", "4"]  # fmt: skip
CASES = {
    "mtp-2-slots": "-c 8192 --parallel 2 -fa on --spec-type draft-mtp",
    "no-spec-1-slot": "-c 4096 --parallel 1 -fa on",
    "mtp-q8-drafts-5-snapshots": "-c 12288 --parallel 3 -fa on --spec-type draft-mtp "
    "--spec-draft-n-max 5 -ctkd q8_0 -ctvd q8_0",
    "unified-q8-ngram-and-mtp": "-c 8192 --parallel 2 -fa on --kv-unified -ctk q8_0 -ctv q8_0 "
    "--spec-type ngram-mod,draft-mtp",
}
# size, then (cells, layers, n_seq_max/n_stream seqs) or (cells, layers, seqs, rs_seq)
KV = re.compile(
    r"llama_kv_cache: size = +([\d.]+) MiB "
    r"\( *(\d+) cells, +(\d+) layers, +(\d+)/(\d+) seqs\)"
)
RS = re.compile(
    r"llama_memory_recurrent: size = +([\d.]+) MiB "
    r"\( *(\d+) cells, +(\d+) layers, +(\d+) seqs +(\d+) rs_seq\)"
)
MTP_CONTEXT = "creating MTP draft context"


@dataclass(frozen=True)
class TinyModel:
    name: str
    path: Path
    nextn: int


@dataclass(frozen=True, kw_only=True)
class Served:
    """What one llama-server run logged: its allocations, whether it got to listen."""

    code: int | None  # None: still running when stopped (it was ready)
    log: str
    kv: tuple[str, ...] | None  # (MiB, cells, layers, seqs, streams) of the main context
    rs: tuple[str, ...] | None  # (MiB, cells, layers, seqs, rs_seq)
    mtp: tuple[str, ...] | None  # the draft-mtp context's KV, as kv

    @property
    def listening(self) -> bool:
        return "listening on http" in self.log


def parse_log(code: int | None, log: str) -> Served:
    main, _, draft = log.partition(MTP_CONTEXT)
    kv, rs, mtp = KV.search(main), RS.search(main), KV.search(draft)
    return Served(code=code, log=log, kv=kv.groups() if kv else None,
                  rs=rs.groups() if rs else None, mtp=mtp.groups() if mtp else None)  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, TinyModel]]:
    with scratch(tmp_path_factory, "tiny-qwen35") as folder:
        yield {
            name: TinyModel(name, tiny_qwen35.write(folder / f"{name}.gguf", nextn=nextn), nextn)
            for name, nextn in (("tiny-qwen35", 1), ("tiny-qwen35-no-mtp", 0))
        }


def tiny_lock(root: Path, llama: BuiltLlama, model: TinyModel, flags: str) -> Path:
    """The e2e llama-cpu lock, its payload swapped for ``model``, serving it with ``flags``."""
    built = json.loads(llama.lock.read_text())["bases"]
    bases = {name: (b["ref"], b["digest"]) for name, b in built.items()}
    serve = [*SERVE[:1], "-m", f"{{payload:{model.name}}}", *SERVE[1:], *flags.split()]
    path = llama_cpu_lock(root, bases)  # its own payload and command, swapped below together
    doc: dict[str, Any] = json.loads(path.read_text())
    doc["payloads"] = {
        model.name: {
            "repository": f"lockpipe-test/{model.name}-GGUF",
            "revision": "0" * 39 + str(model.nextn + 2),  # a test revision: nothing fetches it
            "filename": model.path.name,
            "size": model.path.stat().st_size,
            "sha256": hashlib.sha256(model.path.read_bytes()).hexdigest(),
            "role": "model",
            "format": "gguf",
            "expect": {"arch": "qwen35", "block_count": tiny_qwen35.MAIN + model.nextn},
        }
    }
    target = doc["targets"]["llama-cpu"]
    target["payloads"], target["serve"]["model"] = [model.name], model.name
    target["serve"]["command"] = serve
    path.write_text(dump_lock(doc))
    path.write_text(dump_lock(relock(load_lock(path))))
    return path


def stored(lock_path: Path, model: TinyModel, store: Path) -> Path:
    """``model`` placed in ``store`` where the lock's payload lives (what the payload stage
    does after checking it; here the file was written by the test itself)."""
    dest = payload_path(store, load_lock(lock_path).payloads[model.name])
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        try:
            os.link(model.path, dest)
        except OSError:  # another filesystem
            shutil.copy(model.path, dest)
    return dest


def preflight(lock_path: Path, store: Path, out: Path) -> tuple[int, dict[str, Any]]:
    """``lockpipe preflight llama-cpu`` as a user runs it; (exit code, the target's report)."""
    argv = [sys.executable, "-m", "lockpipe", "preflight", "llama-cpu", "--lock", str(lock_path),
            "--store", str(store), "--json", str(out)]  # fmt: skip
    result = subprocess.run(argv, cwd=REPO, text=True, capture_output=True, check=False,
                            env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    (report,) = json.loads(out.read_text())["targets"]
    return result.returncode, report


def serve(image: str, lock_path: Path, store: Path, log_path: Path) -> Served:
    """Run the lock's serve command in ``image`` until it listens or exits, then stop it."""
    if shutil.which("podman") is None:
        unavailable("podman is needed to run the built llama-cpu image")
    lock = load_lock(lock_path)
    target = lock.target("llama-cpu")
    paths = {p: payload_path(store, lock.payloads[p]) for p in target.payloads}
    command = container_command(target, paths, store)
    name = f"lockpipe-xcheck-{os.getpid()}-{log_path.stem}"
    argv = ["podman", "run", "--rm", "--name", name, "--network", "none",
            "--mount", f"type=bind,src={store},dst={STORE_IN_CONTAINER},ro=true",
            "--entrypoint", json.dumps([command[0]]), image, *command[1:]]  # fmt: skip
    with log_path.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while proc.poll() is None and time.monotonic() < deadline:
            if "listening on http" in log_path.read_text(errors="replace"):
                break
            time.sleep(0.5)
        code = proc.poll()
    finally:
        subprocess.run(["podman", "rm", "--force", "--ignore", "--time", "0", name],
                       check=False, capture_output=True)  # fmt: skip
        proc.wait(timeout=60)
    return parse_log(code, log_path.read_text(errors="replace"))


def mib2(n_bytes: int) -> str:
    """Bytes as llama.cpp prints them ("%7.2f MiB", stripped)."""
    return f"{n_bytes / MIB:.2f}"


@pytest.mark.parametrize("flags", list(CASES.values()), ids=list(CASES))
def test_preflight_sizes_what_the_pinned_llama_server_allocates(
    llama_cpu: BuiltLlama, models: dict[str, TinyModel], tmp_path: Path, flags: str
) -> None:
    model = models["tiny-qwen35"]
    lock_path = tiny_lock(tmp_path / "repo", llama_cpu, model, flags)
    store = tmp_path / "store"
    stored(lock_path, model, store)
    code, report = preflight(lock_path, store, tmp_path / "preflight.json")
    assert code == 0 and report["verdict"] in ("pass", "warn"), report["checks"]
    n = report["numbers"]
    got = serve(llama_cpu.outcome.record.image_id, lock_path, store, tmp_path / "server.log")
    assert got.listening and got.code is None, got.log[-3000:]
    assert got.kv and got.rs, got.log[-3000:]

    # llama.cpp: one stream per slot, or one shared by all under --kv-unified
    streams = 1 if "--kv-unified" in flags else n["slots"]
    assert got.kv[1:] == (str(n["slot_window"]), str(n["attention_layers"]),
                          str(n["slots"]), str(streams))  # fmt: skip
    assert got.kv[0] == mib2(n["kv_per_slot"] * streams)

    # recurrent state: one cell per slot, n_rs_seq rollback snapshots each; its "layers"
    # is the main stack (8), though only the 6 recurrent layers hold state
    assert got.rs[1:] == (str(n["slots"]), str(tiny_qwen35.MAIN), str(n["slots"]),
                          str(n["n_rs_seq"]))  # fmt: skip
    main = range(tiny_qwen35.MAIN)
    assert n["recurrent_layers"] == sum(not tiny_qwen35.is_attention(il) for il in main) == 6
    assert got.rs[0] == mib2(n["recurrent_total"])

    if "draft-mtp" in flags:
        assert got.mtp, got.log[-3000:]
        assert got.mtp[1:] == (str(n["slot_window"]), str(n["mtp_layers"]), str(n["slots"]),
                               str(streams))  # fmt: skip
        assert got.mtp[0] == mib2(n["mtp_kv_per_slot"] * streams)
    else:
        assert got.mtp is None and MTP_CONTEXT not in got.log
        assert "mtp_kv_per_slot" not in n and n["n_rs_seq"] == 0


def test_draft_mtp_without_mtp_blocks_is_refused_by_both(
    llama_cpu: BuiltLlama, models: dict[str, TinyModel], tmp_path: Path
) -> None:
    model = models["tiny-qwen35-no-mtp"]
    lock_path = tiny_lock(tmp_path / "repo", llama_cpu, model,
                          "-c 4096 --parallel 1 -fa on --spec-type draft-mtp")  # fmt: skip
    store = tmp_path / "store"
    stored(lock_path, model, store)
    code, report = preflight(lock_path, store, tmp_path / "preflight.json")
    assert code == CheckFailed.return_code and report["verdict"] == "fail"
    mtp = next(c for c in report["checks"] if c["name"] == "mtp")
    assert mtp["status"] == "fail" and "nextn_predict_layers" in mtp["detail"]
    assert report["numbers"]["mtp_layers"] == 0

    got = serve(llama_cpu.outcome.record.image_id, lock_path, store, tmp_path / "server.log")
    assert got.code not in (None, 0) and not got.listening, got.log[-3000:]
    assert "model doesn't contain MTP layers" in got.log
    assert "failed to create MTP context" in got.log
    # it got as far as the main context, sized as preflight sized it; the MTP one failed
    assert got.kv and got.rs and got.mtp is None, got.log[-3000:]
    assert got.kv[0] == mib2(report["numbers"]["kv_per_slot"])
    assert got.rs[0] == mib2(report["numbers"]["recurrent_total"])
