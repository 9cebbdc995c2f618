"""`reproduce --across-engines podman,podman` built twice, compared nothing (the images
are keyed by engine name) and passed with exit 0: a repeated engine is a usage error, and
no comparison made is never a pass."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import lockpipe.cli.build
import lockpipe.verify.across
from lockpipe.cli.main import main
from lockpipe.errors import CheckFailed, UsageError
from tests.lockfactory import DIGEST, doc, make_repo


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """No engine runs: each build is recorded by engine name and gives one image ID."""
    calls: list[str] = []

    def build(lock: Any, name: str, engine: Any, settings: Any) -> Any:
        calls.append(engine.name)
        return SimpleNamespace(record=SimpleNamespace(image_id=DIGEST))

    @contextmanager
    def exported(source: Any) -> Iterator[Any]:
        yield source

    monkeypatch.setattr(lockpipe.verify.across, "build_target", build)
    monkeypatch.setattr(lockpipe.verify.across, "exported", exported)
    monkeypatch.setattr(lockpipe.cli.build, "get_engine", lambda n: SimpleNamespace(name=n))
    return calls


@pytest.mark.parametrize("given", ["podman,podman", "buildah, podman ,buildah"])
def test_a_repeated_engine_is_refused_before_any_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], builds: list[str], given: str
) -> None:
    lock = make_repo(tmp_path, doc())
    code = main(["reproduce", "app", "--lock", str(lock), "--across-engines", given])
    err = " ".join(capsys.readouterr().err.split())
    assert code == UsageError.return_code, err
    assert f"--across-engines {given!r}:" in err and "named twice" in err, err
    assert "name two different engines" in err and "Traceback" not in err, err
    assert builds == []


def test_no_comparison_made_is_not_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], builds: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(lockpipe.verify.across, "build_across", lambda *a, **k: ())
    lock = make_repo(tmp_path, doc())
    code = main(["reproduce", "app", "--lock", str(lock), "--across-engines", "buildah,podman"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == CheckFailed.return_code, err
    assert "app: no two engines' builds were compared" in err, err


def test_build_across_refuses_two_engines_of_one_name(builds: list[str]) -> None:
    engine: Any = SimpleNamespace(name="podman")
    settings: Any = None  # neither the lock nor the settings is read before the refusal
    with pytest.raises(UsageError, match="name two different engines"):
        lockpipe.verify.across.build_across(settings, "app", [engine, engine], settings)
    assert builds == []
