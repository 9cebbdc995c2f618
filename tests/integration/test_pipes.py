"""Each verb that reports, with stdout sent to a file (issue 19 part 2): the file holds the
result, plain (no box), and stderr holds the progress; ``--json -`` leaves stdout to JSON.

Run as a user runs them (``python -m lockpipe VERB > out 2> err``), except smoke, which
runs in this process against tests/fake_openai.py's FAKE server (a FAKE engine starts it),
with its file descriptors captured into files (pytest's capfd) all the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lockpipe.cli import serve
from lockpipe.cli.main import main
from tests.fake_openai import GOOD, ServingEngine
from tests.integration.test_smoke_answers import _repo as smoke_repo
from tests.lockfactory import buildah_built, doc, make_repo, on_base

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BOX = set("│┃─━┏┓┗┛┡┩└┘")
REV = "b" * 40
PAYLOAD = b'{"vocab": 3}\n'


def lockpipe(tmp: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python -m lockpipe ARGV > tmp/out 2> tmp/err``."""
    out, err = tmp / "out.txt", tmp / "err.txt"
    with out.open("w") as o, err.open("w") as e:
        code = subprocess.run([sys.executable, "-m", "lockpipe", *argv], cwd=REPO, stdout=o,
                              stderr=e, env={**os.environ, "HOME": str(tmp), **(env or {})},
                              timeout=300, check=False).returncode  # fmt: skip
    return code, out.read_text(), err.read_text()


def test_plan(tmp_path: Path) -> None:
    code, out, err = lockpipe(tmp_path, "plan", "llama-cpu")
    assert code == 0, err
    assert out.startswith("llama-cpu -> localhost/lockpipe/llama-cpu:b10069")
    assert "llama-cpu ->" not in err
    code, out, err = lockpipe(tmp_path, "plan", "--json", "-", "llama-cpu")
    assert code == 0 and json.loads(out)["targets"][0]["target"] == "llama-cpu"
    assert "llama-cpu -> " in err  # the plan itself moved to stderr


def test_preflight(tmp_path: Path) -> None:
    code, out, err = lockpipe(tmp_path, "preflight", "--gpu", "rtx3090", "--vllm-parser", "off",
                              "frank-small", "llama-cuda")  # fmt: skip
    assert code == 0, err
    assert "frank-small · vllm · rtx3090" in out and "llama-cuda · llama.cpp · rtx3090" in out
    verdicts = [line for line in out.splitlines() if line.lstrip().startswith("verdict")]
    assert len(verdicts) == 2 and not BOX & set(out)  # plain rows, one a line
    assert "preflight: vLLM 0.29.0's own parser did not read" in err  # progress, not result
    assert "verdict" not in err
    code, out, err = lockpipe(tmp_path, "preflight", "--gpu", "rtx3090", "--json", "-",
                              "llama-cuda")  # fmt: skip
    assert code == 0 and json.loads(out)["verdict"] == "pass"
    assert "verdict" in err


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[str]:
    """A loopback HTTP server holding org/m's PAYLOAD at REV, as the Hub's resolve URL."""
    root = tmp_path / "srv"
    (root / "org/m/resolve" / REV).mkdir(parents=True)
    (root / "org/m/resolve" / REV / "vocab.json").write_bytes(PAYLOAD)
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler,
                                                           directory=str(root)))  # fmt: skip
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_payloads(tmp_path: Path, hub: str) -> None:
    document = doc()
    document["payloads"] = {"m": {"repository": "org/m", "revision": REV,
                                  "filename": "vocab.json", "size": len(PAYLOAD),
                                  "sha256": hashlib.sha256(PAYLOAD).hexdigest(),
                                  "role": "model", "format": "json"}}  # fmt: skip
    lock = make_repo(tmp_path / "repo", document)
    store = tmp_path / "store"
    code, out, err = lockpipe(tmp_path, "payloads", "--lock", str(lock), "--store", str(store),
                              env={"HF_ENDPOINT": hub})  # fmt: skip
    assert code == 0, err
    assert out.startswith(f"m: downloaded, {len(PAYLOAD)} bytes fetched: {store}"), out
    assert "m: fetching 13 bytes" in err and "bytes fetched:" not in err
    code, out, err = lockpipe(tmp_path, "payloads", "--lock", str(lock), "--store", str(store),
                              "--json", "-", env={"HF_ENDPOINT": hub})  # fmt: skip
    (result,) = json.loads(out)["payloads"]
    assert code == 0 and result["status"] == "cached" and result["fetched"] == 0


def test_refresh_digests(tmp_path: Path, busybox_base: tuple[str, str]) -> None:
    """A lock whose base digest moved: the report line on stdout, the summary on stderr."""
    document = doc()
    document["bases"]["busybox"]["ref"] = busybox_base[0]  # the lockfactory's stale digest
    lock = make_repo(tmp_path / "repo", document)
    code, out, err = lockpipe(tmp_path, "refresh-digests", "--lock", str(lock), "--kind",
                              "bases", "--dry-run")  # fmt: skip
    assert code == 0, err
    assert out.startswith("bases.busybox: ") and busybox_base[1] in out
    assert "would change (--dry-run: nothing written)" in err and "bases.busybox:" not in err
    code, out, err = lockpipe(tmp_path, "refresh-digests", "--lock", str(lock), "--kind",
                              "bases", "--dry-run", "--json", "-")  # fmt: skip
    assert code == 0 and json.loads(out)["changes"][0]["key"] == "bases.busybox", out


def test_verify(tmp_path: Path, busybox_base: tuple[str, str], registry: str) -> None:
    lock, state = buildah_built(tmp_path / "repo", busybox_base, "localhost/lockpipe-pipes/app:1")
    to = f"{registry}/lockpipe-pipes"
    code, out, err = lockpipe(tmp_path, "publish", "--engine", "buildah", "--lock", str(lock),
                              "--state", str(state), "--to", to, "app")  # fmt: skip
    assert code == 0, err
    code, out, err = lockpipe(tmp_path, "verify", "--lock", str(lock), "--published", "app")
    assert code == 0, err
    assert "app: " in out and "matches its provenance" in out and "matches" not in err
    code, out, err = lockpipe(tmp_path, "verify", "--lock", str(lock), "--published",
                              "--json", "-", "app")  # fmt: skip
    assert code == 0 and json.loads(out)["matches"] is True


def test_doctor(tmp_path: Path) -> None:
    code, out, err = lockpipe(tmp_path, "doctor")
    assert code == 0, err
    assert out.startswith("lockpipe doctor") and "services" in out and not BOX & set(out)
    assert "lockpipe doctor" not in err


def test_smoke(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    lock, state, expect = smoke_repo(tmp_path)
    monkeypatch.setattr(serve, "get_engine", lambda name: ServingEngine(GOOD))
    argv = ["smoke", "app", "--engine", "podman", "--lock", str(lock), "--state", str(state),
            "--store", str(tmp_path / "store"), "--expect", str(expect), "--out",
            str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 0
    out, err = capfd.readouterr()
    assert "smoke: app (" in out and "app: passed in" in out and not BOX & set(out)
    assert "smoke app: " in err and "reports: " in err and "app: passed" not in err
    assert main([*argv, "--json", "-"]) == 0
    out, err = capfd.readouterr()
    (report,) = json.loads(out)["reports"]
    assert report["target"] == "app" and report["ok"] is True and "app: passed" in err


def test_deploy(tmp_path: Path) -> None:
    """What deploy made and its checks are the result; the warnings stay on stderr."""
    image = "localhost/lockpipe/llama-cuda@sha256:" + "a" * 64
    code, out, err = lockpipe(tmp_path, "deploy", "--force", "--no-inspect", "--podman-version",
                              "4.4", "--out", str(tmp_path / "units"), "--image", image,
                              "llama-cuda")  # fmt: skip
    assert code == 0, err
    unit = tmp_path / "units" / "llama-cuda.container"
    assert out.splitlines()[0] == f"rendered {unit}" and unit.is_file()
    assert "systemd-analyze verify: llama-cuda.service passes" in out
    assert "rendered" not in err and "WARNING (--force)" in err


def test_build_in_a_log(tmp_path: Path, busybox_base: tuple[str, str]) -> None:
    """A build step quiet for 12 s still gets lockpipe's own line in a log (stderr a file)."""
    # a RUN no earlier run has cached: the engine's layer cache would skip the sleep
    quiet = f"ARG BASE\nFROM ${{BASE}}\nRUN sleep 12 && echo {uuid.uuid4()} > /s\n"
    document = on_base(busybox_base, "localhost/lockpipe-test/quiet-build:1")
    lock = make_repo(tmp_path / "r", document, dockerfile=quiet)
    code, out, err = lockpipe(tmp_path, "build", "--engine", "buildah", "--lock", str(lock),
                              "--state", str(tmp_path / "st"), "--force")  # fmt: skip
    assert code == 0, err[-2000:]
    beats = [x for x in err.splitlines() if x.startswith("build app (buildah): 0m1")]
    assert beats and "running; last output" in beats[0], err[-2000:]
    assert "running" not in out
