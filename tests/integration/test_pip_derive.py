"""The derivation against PyPI, on a small package with an extra: requests[socks].

requests' core closure is charset-normalizer, idna, urllib3 and certifi; its socks
extra adds PySocks. So the derived set must be PySocks alone, pinned by the sha256
PyPI publishes for the very wheel, and a version PyPI lacks must be a one-line error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from lockpipe.errors import FetchError, UsageError
from lockpipe.lock import closure as cl
from lockpipe.lock import requirements as rq
from lockpipe.refresh import pip
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

REPO = Path(__file__).resolve().parents[2]
VERSION = "2.32.3"  # requests: Requires-Dist PySocks!=1.5.7,>=1.5.6; extra == "socks"


@pytest.fixture(scope="module")
def pypi() -> None:
    try:
        requests.get(f"{pip.INDEX}/pip/", timeout=10).raise_for_status()
    except requests.RequestException as exc:
        unavailable(f"PyPI cannot be reached ({type(exc).__name__})")
    try:
        pip.check_pip()
    except UsageError as exc:
        unavailable(str(exc))


def _published_sha256(name: str, version: str, filename: str) -> str:
    """The sha256 PyPI's JSON API gives for one file of a release."""
    files = requests.get(f"https://pypi.org/pypi/{name}/json", timeout=30).json()["releases"]
    (found,) = [f["digests"]["sha256"] for f in files[version] if f["filename"] == filename]
    return str(found)


@pytest.mark.usefixtures("pypi")
def test_derive_pins_the_difference_with_pypis_hashes(tmp_path: Path) -> None:
    derived = pip.derive(pip.Spec(package="requests", extra="socks", version=VERSION))
    facts = derived.closure
    assert set(facts.pinned) == {"pysocks"}
    assert {"requests", "urllib3", "idna", "certifi", "charset-normalizer"} <= set(facts.core)
    assert facts.core["requests"] == VERSION and "pysocks" not in facts.core
    assert facts.extended["requests"].extras == ("socks",)
    socks = facts.pinned["pysocks"]
    assert socks.wheel is not None and socks.wheel.endswith("-py3-none-any.whl")
    assert socks.sha256 == _published_sha256("PySocks", socks.version, socks.wheel)
    text = derived.requirements
    assert f"pysocks=={socks.version} \\\n    --hash=sha256:{socks.sha256}\n" in text
    assert str(rq.derived_for(text)) == f"requests[socks]=={VERSION}"
    assert cl.unmet(facts) == []
    # Written out, the pair passes the same check lint runs.
    reqs = tmp_path / "requirements-socks.txt"
    pip.write(derived, reqs)
    assert cl.problems(reqs.read_text(), cl.closure_path(reqs).read_text(), where="r",
                       closure_where="c", expected_version=VERSION,
                       version_from="REQUESTS_VERSION") == []  # fmt: skip


@pytest.mark.usefixtures("pypi")
def test_a_version_pypi_lacks_is_a_clear_error() -> None:
    with pytest.raises(FetchError) as info:
        pip.derive(pip.Spec(package="requests", extra="socks", version="0.0.0.dev999"))
    text = str(info.value)
    assert text.startswith("pip could not resolve requests==0.0.0.dev999 from https://pypi.org")
    assert "No matching distribution found for requests==0.0.0.dev999" in text
    assert "check the version" in text


@pytest.mark.usefixtures("pypi")
def test_lock_with_a_bad_version_exits_8_without_a_traceback(tmp_path: Path) -> None:
    ctx = tmp_path / "images" / "app"
    ctx.mkdir(parents=True)
    (ctx / "requirements-socks.txt").write_text(f"# derived-for: requests[socks]=={VERSION}\n")
    document = doc()
    document["pip"] = {"socks": {"file": "images/app/requirements-socks.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["socks"]
    document["targets"]["app"]["build_args"] = {"REQUESTS_VERSION": "0.0.0.dev999"}
    path = make_repo(tmp_path, document)
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "lock", "--lock", str(path)], cwd=REPO, text=True,
        capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False,
    )  # fmt: skip
    assert out.returncode == FetchError.return_code, out.stderr
    assert "error: pip could not resolve requests==0.0.0.dev999" in out.stderr
    assert "Traceback" not in out.stderr
