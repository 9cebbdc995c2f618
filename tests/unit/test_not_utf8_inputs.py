"""A file lockpipe reads that is not UTF-8 is one lockpipe error naming the file, never
UnicodeDecodeError's traceback (issue 18): the lock's requirements files (``lockpipe
lock``'s derivation checks, refresh's proposals and newer releases), a target's
Dockerfile (preflight's vLLM environment) and the Hub token file.

The repository's locks/ and images/ are copied to a tmp folder, one file there is made
not UTF-8, and the lock relocked over it (its sha256 pinned), as a user's edit would be.
What a user reaches with a verb is run through ``lockpipe VERB``; the rest (they reach
PyPI or the Hub first) through the module's function.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import FetchError, LockError, LockpipeError
from lockpipe.lock import closure as cl
from lockpipe.lock import requirements as rq
from lockpipe.lock.fingerprint import relock
from lockpipe.lock.model import Lock, dump_lock, load_lock, parse_lock
from lockpipe.payloads.sources import hf_token
from lockpipe.refresh import pip, propose, pypi
from lockpipe.refresh.api import Api

REPO = Path(__file__).resolve().parents[2]
BAD = b"\xff\xfe bad"
REQUIREMENTS = "images/frank-small/requirements-audio.txt"
DOCKERFILE = "images/frank-small/Dockerfile"
NEVER_ASKED = Api(base="http://127.0.0.1:9", name="PyPI (never asked)", refused="-")


def _lock(tmp_path: Path, spoil: str | None) -> Lock:
    """The repository's lock in ``tmp_path``, ``spoil`` (a path in it) made not UTF-8."""
    for folder in ("locks", "images"):
        shutil.copytree(REPO / folder, tmp_path / folder)
    if spoil is not None:
        (tmp_path / spoil).write_bytes(BAD)
    path = tmp_path / "locks" / "digests.json"
    path.write_text(dump_lock(relock(parse_lock(json.loads(path.read_text()), path))))
    return load_lock(path)


def _said(path: Path) -> str:
    return f"{path}: not UTF-8 text (byte 0xff at offset 0); re-save it as UTF-8"


@pytest.mark.parametrize(
    ("spoil", "argv"),
    [
        pytest.param(REQUIREMENTS, ["lock"], id="lock-derived-requirements"),
        pytest.param(
            DOCKERFILE,
            [
                "preflight",
                "--store",
                "{store}",
                "--gpu",
                "rtx3090",
                "--driver",
                "610.57.04",
                "frank-small",
            ],
            id="preflight-dockerfile",
        ),
    ],
)
def test_a_verb_says_one_line_naming_the_file(
    spoil: str,
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LOCKPIPE_VLLM_PARSER", "off")
    lock = _lock(tmp_path, spoil)
    (tmp_path / "store").mkdir()
    verb, *rest = (a.format(store=tmp_path / "store") for a in argv)
    code = main([verb, "--lock", str(lock.path), *rest])
    assert code == LockError.return_code
    err = capsys.readouterr().err
    assert f"error: {_said(lock.root / spoil)}" in err.splitlines()
    assert "Traceback" not in err


def _proposals(lock: Lock) -> object:
    return propose.derived_files(lock)


def _newer(lock: Lock) -> object:
    return pypi.newer_releases(lock, ["frank-small-audio"], NEVER_ASKED)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        pytest.param(_proposals, LockError, id="refresh-proposals-requirements"),
        pytest.param(_newer, LockError, id="refresh-newer-releases-requirements"),
    ],
)
def test_a_function_raises_its_module_s_error_naming_the_file(
    call: Callable[[Lock], object], error: type[LockpipeError], tmp_path: Path
) -> None:
    lock = _lock(tmp_path, REQUIREMENTS)
    with pytest.raises(error) as raised:
        call(lock)
    assert str(raised.value) == _said(lock.root / REQUIREMENTS)


def test_the_hub_token_file(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_bytes(BAD)
    with pytest.raises(FetchError) as raised:
        hf_token({"HF_TOKEN_PATH": str(token)})
    assert str(raised.value) == _said(tmp_path / "token")


def test_closure_facts_not_utf8_are_stale_and_derived_again(tmp_path: Path) -> None:
    """``lock``'s staleness check reads a derived file's facts: facts it cannot read (as
    facts it cannot parse) mean the file is derived again, not a traceback."""
    lock = _lock(tmp_path, None)
    facts = cl.closure_path(lock.root / REQUIREMENTS)
    facts.write_bytes(BAD)
    derivation = rq.derived_for((lock.root / REQUIREMENTS).read_text(encoding="utf-8"))
    assert derivation is not None
    assert pip._stale(lock, REQUIREMENTS, derivation.version) is True
