"""Preflight's own files with one bad value, and its maintainer tools' bad arguments: one
line naming the file and the fix, never a traceback (issue 18).

The vLLM parser is off (``--vllm-parser off``) unless a case is about its env.json, so the
extract reads the command: no network, no torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import FormatError, LockError
from lockpipe.preflight import (
    vllm_parser,
    vllm_parser_env,
    vllm_release,
    vllm_rules,
    vllm_source,
)

REPO = Path(__file__).resolve().parents[2]
Doc = dict[str, Any]


def _checkout(tmp_path: Path, edit: Callable[[Doc], None] = lambda d: None) -> Path:
    """A copy of the committed locks under ``tmp_path``, preflight.json edited; the lock."""
    (tmp_path / "locks").mkdir()
    (tmp_path / "images").symlink_to(REPO / "images")
    (tmp_path / "store").mkdir(exist_ok=True)
    (tmp_path / "locks" / "digests.json").write_text((REPO / "locks" / "digests.json").read_text())
    doc = json.loads((REPO / "locks" / "preflight.json").read_text())
    edit(doc)
    (tmp_path / "locks" / "preflight.json").write_text(json.dumps(doc))
    return tmp_path / "locks" / "digests.json"


def _preflight(tmp_path: Path, lock: Path, parser: str = "off") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "preflight", "--lock", str(lock), "--gpu", "rtx3090",
         "--store", str(tmp_path / "store"), "--cache", str(tmp_path / "cache"),
         "--vllm-parser", parser, "frank-small"],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        env={k: v for k, v in os.environ.items() if k != "LOCKPIPE_VLLM_PARSER"},
    )  # fmt: skip


def _one_error(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.returncode == code, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def test_a_pool_of_max_model_len_0_is_one_error_naming_it(tmp_path: Path) -> None:
    """It divided the pool: a ZeroDivisionError's traceback."""

    def edit(d: Doc) -> None:
        d["targets"]["frank-small"]["vllm_pool"]["max_model_len"] = 0

    out = _preflight(tmp_path, _checkout(tmp_path, edit))
    _one_error(out, LockError.return_code, "preflight.json: targets.frank-small.vllm_pool",
               "max_model_len: 0", "from the measured server's log")  # fmt: skip


@pytest.mark.parametrize("shared", [48, 1_000_000])
def test_kv_shared_layers_past_the_last_layer_is_one_error_naming_it(
    tmp_path: Path, shared: int
) -> None:
    """No layer left holding KV: ``max()`` of no pages, a ValueError's traceback."""

    def edit(d: Doc) -> None:
        text = d["models"]["gemma-4-12b-qat-w4a16"]["config"]["text_config"]
        assert text["num_hidden_layers"] == 48
        text["num_kv_shared_layers"] = shared

    out = _preflight(tmp_path, _checkout(tmp_path, edit))
    _one_error(out, FormatError.return_code, "preflight.json: models.gemma-4-12b-qat-w4a16",
               f"num_kv_shared_layers {shared:,} of 48 layers", "0 to 47")  # fmt: skip


def test_a_rules_file_that_is_no_object_is_one_error_naming_it(tmp_path: Path) -> None:
    """``[]`` in the lock's vllm-rules/vllm-0.29.0.json was an AttributeError's traceback."""
    lock = _checkout(tmp_path)
    rules = lock.parent / "vllm-rules" / "vllm-0.29.0.json"
    rules.parent.mkdir()
    rules.write_text("[]")
    out = _preflight(tmp_path, lock)
    _one_error(out, LockError.return_code, f"{rules}: the rules file is a list, not an object",
               "python -m lockpipe.preflight.vllm_release 0.29.0")  # fmt: skip


@pytest.mark.parametrize("marker", ['"x"', "[]", "1"])
def test_a_parser_env_json_that_is_no_object_is_named_with_its_fix(
    tmp_path: Path, marker: str
) -> None:
    """env.json valid JSON but not an object was an AttributeError's traceback; now the
    parser is unavailable, and the verdict names the file and the build that fixes it."""
    env = tmp_path / "parser"
    env.mkdir()
    (env / "env.json").write_text(marker)
    out = _preflight(tmp_path, _checkout(tmp_path), parser=str(env))
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.returncode in (0, 1), out.stdout + out.stderr
    said = [x for x in (out.stdout + out.stderr).splitlines() if f"{env}/env.json" in x]
    assert said and "not an object" in said[0] and "nox -s vllm-parser -- 0.29.0" in said[0]


def test_find_env_of_a_marker_that_is_no_object_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "env.json").write_text('["vllm"]')
    found = vllm_parser.find_env(tmp_path, "0.29.0", {"sha256": "0" * 64})
    assert isinstance(found, vllm_parser.Unavailable)
    assert f"{tmp_path}/env.json: the marker is a list, not an object" in found.reason


# --- the rules file and env.json are written whole: old or new, never half ---------------


def test_derived_rules_replace_the_file_a_reader_has_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """write_text truncated the rules in place: a preflight reading them meanwhile read a
    half-written file. Now the new file replaces the old: a reader that had it open still
    reads the old rules whole, and no temporary file is left beside them."""
    facts = {"vllm": "0.29.0", "wheel": {"file": "vllm-0.29.0-x.whl"}, "big": "y" * 100_000}
    monkeypatch.setattr(vllm_source, "extract", lambda path: facts)
    old = vllm_release.rules_path("0.29.0", tmp_path)
    old.write_text('{"old": true}\n')
    with old.open() as reader:
        out = vllm_release.derive("0.29.0", tmp_path, wheel=tmp_path / "vllm-0.29.0-x.whl")
        assert reader.read() == '{"old": true}\n'
    assert out == old and json.loads(out.read_text()) == facts
    assert sorted(p.name for p in tmp_path.iterdir()) == [old.name]


def test_an_env_json_brought_up_to_date_replaces_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept environment whose env.json lacks the torch it has: the marker is rewritten,
    now by replacing it (a reader of the old one still reads it whole), no temp file left."""
    wheel = {"file": "vllm-0.29.0-x.whl", "sha256": "a" * 64}
    constraints = tmp_path / "c.txt"
    constraints.write_text("torch==2\n")
    dest = tmp_path / "env"
    (dest / "venv" / "bin").mkdir(parents=True)
    (dest / "venv" / "bin" / "python").write_text("")
    (dest / "tree" / "vllm").mkdir(parents=True)
    want = vllm_parser_env._wanted("0.29.0", wheel, constraints)
    marker = dest / "env.json"
    marker.write_text(json.dumps(want))
    monkeypatch.setattr(vllm_rules, "release", lambda v: {"wheel": wheel})
    monkeypatch.setattr(vllm_parser_env, "check_python", lambda *a: None)
    monkeypatch.setattr(vllm_parser_env, "constraints_for", lambda *a: constraints)
    monkeypatch.setattr(vllm_parser_env, "_trial", lambda env: None)
    monkeypatch.setattr(vllm_parser_env, "installed_torch", lambda python: "2.0+cpu")
    monkeypatch.setattr(vllm_parser_env, "torch_pin", lambda path: "==2.0")
    before = marker.read_text()
    with marker.open() as reader:
        vllm_parser_env.build(tmp_path, tmp_path / "cache", "0.29.0", where=dest)
        assert reader.read() == before
    assert json.loads(marker.read_text()) == {**want, "torch": "2.0+cpu", "torch_pin": "==2.0"}
    assert sorted(p.name for p in dest.iterdir()) == ["env.json", "tree", "venv"]


# --- python -m: the maintainer tools' bad arguments ----------------------------------------


def _tool(module: str, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"lockpipe.preflight.{module}", *args],
        capture_output=True, text=True, cwd=cwd, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip


def _one_line(out: subprocess.CompletedProcess[str], *words: str) -> None:
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    for w in words:
        assert w in out.stderr, out.stderr


def test_vllm_release_with_a_missing_or_garbled_wheel_is_one_line(tmp_path: Path) -> None:
    garbled = tmp_path / "vllm-0.29.0-py3-none-any.whl"
    garbled.write_text("not a zip")
    with zipfile.ZipFile(tmp_path / "other.whl", "w") as z:
        z.writestr("x.txt", "")
    data = ("--data", str(tmp_path / "rules"))
    _one_line(_tool("vllm_release", "0.29.0", "--wheel", str(tmp_path / "nowhere.whl"), *data),
              "nowhere.whl: cannot read it", "--wheel")  # fmt: skip
    _one_line(_tool("vllm_release", "0.29.0", "--wheel", str(garbled), *data),
              f"{garbled}: not a vLLM wheel", "BadZipFile")  # fmt: skip
    _one_line(_tool("vllm_release", "0.29.0", "--wheel", str(tmp_path / "other.whl"), *data),
              "other.whl: not a vLLM wheel")  # fmt: skip
    _one_line(_tool("vllm_release"), "required: version", "--help")
    assert not (tmp_path / "rules").exists()


def test_vllm_parser_env_with_a_missing_or_garbled_lock_is_one_line(tmp_path: Path) -> None:
    garbled = tmp_path / "digests.json"
    garbled.write_text("{")
    _one_line(_tool("vllm_parser_env", "--lock", str(tmp_path / "nowhere.json")),
              "nowhere.json: no lock file here")  # fmt: skip
    _one_line(_tool("vllm_parser_env", "--lock", str(garbled)), f"{garbled}:1:2: not valid JSON")
    _one_line(_tool("vllm_parser_env", "--nope"), "unrecognized arguments: --nope")
