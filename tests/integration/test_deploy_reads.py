"""What ``lockpipe deploy`` reads before it renders: the build record lockpipe wrote, and
the image's config from ``podman image inspect``. Another shape of either is one error
naming the file or the command, never a traceback (issue 18).

One FAKE: a ``podman`` on PATH whose ``image inspect`` prints what a test gives, since a
podman printing another shape cannot be made otherwise on this host. Everything else is
a user's run: ``python -m lockpipe deploy`` on a lock with a build record, the smoke gate
passed over with ``--force``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import DeployError, EngineError
from lockpipe.imagebuild.records import BuildRecord, record_path, write_record
from lockpipe.lock.model import load_lock
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def _deploy(
    tmp_path: Path, inspect_output: str, record: dict[str, object] | None = None
) -> subprocess.CompletedProcess[str]:
    """``lockpipe deploy app`` with a build record (its fields replaced by ``record``)."""
    lock = make_repo(tmp_path, doc())
    state = tmp_path / "state"
    path = write_record(state, BuildRecord(
        target="app", tag="localhost/lockpipe-test/app:1", image_id="sha256:" + "5" * 64,
        engine="podman", key="k", engine_version="5.4", reproducible=True,
        reproducible_how="fake", fingerprint=load_lock(lock).fingerprints["app"],
        source_date_epoch=0, built_at="now", seconds=0.0,
    ))  # fmt: skip
    path.write_text(json.dumps({**json.loads(path.read_text()), **(record or {})}))
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    (tmp_path / "inspect.out").write_text(inspect_output)
    (fake / "podman").write_text(  # FAKE podman: image inspect prints the test's output
        f"#!/bin/sh\n[ \"$1 $2\" = 'image inspect' ] && exec cat {tmp_path / 'inspect.out'}\n"
        "echo 'FAKE podman: not asked for that' >&2\nexit 3\n"
    )
    (fake / "podman").chmod(0o755)
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "deploy", "app", "--force", "--no-verify",
         "--podman-version", "5.4", "--lock", str(lock), "--state", str(state),
         "--out", str(tmp_path / "units")],
        env={**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip


def test_the_images_entrypoint_and_env_are_read(tmp_path: Path) -> None:
    out = _deploy(tmp_path, '{"Entrypoint": ["/usr/bin/true"], "Env": ["PATH=/bin", "X"]}\n')
    assert out.returncode == 0, out.stderr
    unit = (tmp_path / "units" / "app.container").read_text()
    assert "Entrypoint=" not in unit  # the image's own, which the command starts with


@pytest.mark.parametrize(
    ("output", "words"),
    [
        ("not json\n", "its output is not JSON"),
        ('["/usr/bin/true"]\n', "its output is a list, not an object"),
        ('{"Entrypoint": "/usr/bin/true"}\n', "Entrypoint is a string, not a list"),
        ('{"Entrypoint": [5]}\n', "Entrypoint[0] is an integer, not a string"),
        ('{"Env": [1]}\n', "Env[0] is an integer, not a string"),
        ('{"Env": {"LD_LIBRARY_PATH": "/x"}}\n', "Env is an object, not a list"),
    ],
)
def test_inspect_output_of_another_shape_is_one_error(
    output: str, words: str, tmp_path: Path
) -> None:
    out = _deploy(tmp_path, output)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == EngineError.return_code, out.stderr
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert "podman image inspect" in line and words in line, line
    assert "lockpipe doctor" in line, line
    assert not (tmp_path / "units" / "app.container").exists()


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"image_id": None}, "image_id is null, not a string"),
        ({"image_id": "latest"}, "image_id is 'latest', not sha256:<64 hex>"),
        ({"fingerprint": 5}, "fingerprint is an integer, not a string"),
        ({"reproducible": "yes"}, "reproducible is a string, not true/false"),
        ({"source_date_epoch": 1.5}, "source_date_epoch is a number, not an integer"),
    ],
)
def test_a_build_record_of_another_shape_is_refused_naming_it(
    record: dict[str, object], words: str, tmp_path: Path
) -> None:
    """The record is lockpipe's own file, but read back it is input: deploy refuses one of
    another shape (edited, or written by another version) in one line naming it, what is
    wrong and the build that writes it again (before, it was set aside with a warning and
    deploy said there was no build record, though there was one)."""
    out = _deploy(tmp_path, '{"Entrypoint": null}', record)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == DeployError.return_code, out.stderr
    path = record_path(tmp_path / "state", "podman", "app")
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("error:")]
    assert line == f"error: {path}: {words}; build again: lockpipe build --engine podman app"
    assert not (tmp_path / "units" / "app.container").exists()
