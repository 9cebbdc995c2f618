"""refresh-digests --kind pip against a FAKE package index (a real HTTP server on 127.0.0.1)
whose URL carries a login (LOCKPIPE_PYPI=http://USER:SECRET@host/, as a private index is
named): the login is sent to the index's own host as Basic auth, and never printed, in an
error or in the report (issue 18 review)."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from tests.httpfake import FakeHandler, FakeServer
from tests.lockfactory import doc, make_repo

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cret-index-token"
BASIC = "Basic " + base64.b64encode(f"ci:{SECRET}".encode()).decode()


class _Index(FakeServer):
    def __init__(self) -> None:
        super().__init__(_Handler)
        self.json = True
        self.auth: list[str | None] = []


class _Handler(FakeHandler):
    server: _Index

    def do_GET(self) -> None:
        self.server.auth.append(self.headers.get("Authorization"))
        if self.server.json:
            self.send_json(200, {"info": {"version": "2.32.3"}})
        else:
            self.send_bytes(200, b"<html>a login page</html>")


@pytest.fixture
def index() -> Iterator[_Index]:
    server = _Index()
    yield server
    server.stop()


def _refresh(tmp_path: Path, index_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    document = doc()
    document["pip"] = {"app": {"file": "images/app/requirements.txt", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["app"]
    ctx = tmp_path / "checkout" / "images" / "app"
    ctx.mkdir(parents=True, exist_ok=True)
    (ctx / "requirements.txt").write_text(f"requests==2.0.0 --hash=sha256:{'1' * 64}\n")
    lock = make_repo(tmp_path / "checkout", document)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "LOCKPIPE_PYPI": index_url}
    return subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock), "--kind",
         "pip", "--dry-run", *args],
        cwd=REPO, text=True, capture_output=True, check=False, env=env,
    )  # fmt: skip


def _with_login(url: str) -> str:
    return url.replace("http://", f"http://ci:{SECRET}@")


def test_the_login_is_sent_to_the_index_and_kept_out_of_the_report(
    index: _Index, tmp_path: Path
) -> None:
    md = tmp_path / "r.md"
    result = _refresh(tmp_path, _with_login(index.url), "--report-md", str(md))
    assert result.returncode == 0, result.stderr
    assert index.auth == [BASIC]
    assert "requests 2.0.0 pinned, 2.32.3 released" in result.stdout
    assert f"{index.url}/project/requests/2.32.3/" in md.read_text()
    assert SECRET not in result.stdout + result.stderr + md.read_text()


def test_an_answer_that_is_not_json_names_the_index_without_its_login(
    index: _Index, tmp_path: Path
) -> None:
    index.json = False
    result = _refresh(tmp_path, _with_login(index.url))
    assert result.returncode == FetchError.return_code, result.stderr
    assert f"{index.url}/pypi/requests/json answered 200 without JSON" in result.stderr
    assert SECRET not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_an_unreachable_index_is_named_without_its_login(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    result = _refresh(tmp_path, _with_login(closed))
    assert result.returncode == FetchError.return_code, result.stderr
    assert f"the package index at {closed} unreachable" in result.stderr
    assert SECRET not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_an_index_url_that_cannot_be_parsed_is_one_line(tmp_path: Path) -> None:
    """LOCKPIPE_PYPI=http://[::1 ended refresh-digests in a ValueError traceback (the
    transport's error fields parsed the URL again)."""
    result = _refresh(tmp_path, f"http://ci:{SECRET}@[::1")
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == FetchError.return_code, result.stderr
    assert "the request cannot be sent (" in result.stderr, result.stderr
    assert "after 1 try" in result.stderr and SECRET not in result.stdout + result.stderr
