"""deploy --artifacts names each ``.artifact`` unit TARGET-PAYLOAD: two targets whose names
and payloads join to the same unit (``llama`` + ``mtp-qwen``, ``llama-mtp`` + ``qwen``)
would each install it over the other's, and one container then mounted the other's payload.
The deploy refuses that, naming both, before it writes a unit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli import deployart
from lockpipe.cli.main import main
from lockpipe.errors import DeployError
from lockpipe.lock.model import Lock
from tests.lockfactory import doc, make_repo

REV = "0123456789abcdef0123456789abcdef01234567"
IMAGE = f"127.0.0.1:5000/lockpipe-test/app@sha256:{'cd' * 32}"


def _payload(name: str) -> dict[str, Any]:
    return {"repository": f"org/{name}", "revision": REV, "role": "mmproj", "format": "gguf",
            "filename": f"{name}.gguf", "size": 10, "sha256": "ab" * 32}  # fmt: skip


def _lock(tmp: Path, serves: dict[str, str]) -> Path:
    """One target per ``serves`` item (target -> its one payload), tagged apart."""
    document = doc()
    app = document["targets"].pop("app")
    document["payloads"] = {p: _payload(p) for p in serves.values()}
    for i, (name, payload) in enumerate(serves.items()):
        serve = {**app["serve"], "command": ["llama-server", f"{{payload:{payload}}}"]}
        target = {**app, "tag": f"localhost/lockpipe-test/app:{i}", "payloads": [payload],
                  "serve": serve}  # fmt: skip
        document["targets"][name] = target
    return make_repo(tmp / "checkout", document)


def _fake_pinned(prefix: str, lock: Lock, payload: str) -> tuple[str, list[str]]:
    """A FAKE registry: every artifact is there and holds what the lock pins."""
    return f"{prefix}/{payload}@sha256:{'ef' * 32}", []


def _deploy(lock: Path, name: str, out: Path) -> int:
    return main(["deploy", name, "--lock", str(lock), "--out", str(out), "--image", IMAGE,
                 "--force", "--no-inspect", "--no-verify", "--podman-version", "5.7",
                 "--artifacts", "127.0.0.1:5000/models"])  # fmt: skip


CLASH = {"llama": "mtp-qwen-mmproj", "llama-mtp": "qwen-mmproj"}


@pytest.mark.parametrize("name", list(CLASH))
def test_two_targets_whose_artifact_units_share_a_name_are_refused(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(deployart, "_pinned", _fake_pinned)
    lock = _lock(tmp_path, CLASH)
    code = _deploy(lock, name, tmp_path / "out")
    err = capsys.readouterr().err
    assert code == DeployError.return_code, err
    assert "Traceback" not in err
    line = next(x for x in err.splitlines() if "llama-mtp-qwen-mmproj.artifact" in x)
    for words in ("targets.llama ", "targets.llama-mtp ", "payloads.mtp-qwen-mmproj",
                  "payloads.qwen-mmproj", "rename"):  # fmt: skip
        assert words in line, err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_targets_whose_artifact_units_differ_each_get_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(deployart, "_pinned", _fake_pinned)
    lock = _lock(tmp_path, {"llama": "qwen-mmproj", "llama-mtp": "mtp-qwen-mmproj"})
    assert _deploy(lock, "llama", tmp_path / "out") == 0, capsys.readouterr().err
    assert _deploy(lock, "llama-mtp", tmp_path / "out") == 0, capsys.readouterr().err
    units = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert units == ["llama-mtp-mtp-qwen-mmproj.artifact", "llama-mtp.container",
                     "llama-qwen-mmproj.artifact", "llama.container"]  # fmt: skip
