"""``lockpipe smoke --expect FILE``: a probe size or shape context of absurd size is one line
naming the file and key, refused before anything runs (issue 18)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import SmokeConfigError

ANY = "kv=default,ctx=default,par=default"  # no context to bound a probe


def _expect(tmp_path: Path, key: str, probe: str) -> Path:
    gen = [{"prompt": "The Eiffel Tower is in the city of", "expect": ["Paris"]}]
    target = {"generation": gen, "probes": {key: {probe: {"value": 1, "unit": "t/s"}}}}
    doc = {"version": 1, "targets": {"llama-cpu": target}}
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("key", "probe", "named"),
    [
        # a 5000-digit number was int()'s ValueError (over 4300 digits) as a traceback
        (ANY, "pp@" + "9" * 5000, "is not a probe name"),
        ("kv=default,ctx=" + "9" * 5000 + ",par=default", "pp@512", "not a serving shape key"),
        # under no context, a 10**23-token prompt passed, then was OverflowError's traceback
        (ANY, "pp@99999999999999999999k", "pp@99999999999999999999k"),
        (ANY, "tg@2000k", "tg@2000k"),
        (ANY, "pp@0", "pp@0"),
    ],
    ids=["probe-5000-digits", "ctx-5000-digits", "probe-1e23", "probe-2M", "probe-0"],
)  # fmt: skip
def test_an_absurd_probe_size_is_one_line_naming_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, probe: str, named: str
) -> None:
    path = _expect(tmp_path, key, probe)
    code = main(["smoke", "llama-cpu", "--engine", "buildah", "--state", str(tmp_path / "state"),
                 "--out", str(tmp_path / "out"), "--store", str(tmp_path / "store"),
                 "--expect", str(path), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == SmokeConfigError.return_code, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{path}:" in err and named in err[:600]
