"""An empty what-if value is refused, not dropped: `preflight TARGET --kv-cache-dtype ''`
exited 0 with the target's own verdict and no word that the option was ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        (["--kv-cache-dtype", ""], "--kv-cache-dtype ''"),
        (["--kv-cache-dtype", " "], "--kv-cache-dtype ' '"),
        (["--attention-backend", ""], "--attention-backend ''"),
        (["--env", "=1"], "--env '=1'"),
    ],
    ids=["kv-empty", "kv-blank", "attention-empty", "env-no-name"],
)
def test_an_empty_what_if_value_is_a_usage_error_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str], named: str
) -> None:
    (tmp_path / "no-store").mkdir()
    out = tmp_path / "report.json"
    argv = ["preflight", "frank-small", "--lock", str(REPO / "locks" / "digests.json"),
            "--gpu", "rtx3090", "--store", str(tmp_path / "no-store"), "--json", str(out),
            *given]  # fmt: skip
    assert main(argv) == UsageError.return_code
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"error: {named}: "), err
    assert "Traceback" not in err
    assert not out.exists()
