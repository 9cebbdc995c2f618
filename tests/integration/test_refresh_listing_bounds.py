"""What a server answers that a refresh must not take whole (issue 18 review), each from a
FAKE server (a real HTTP server on 127.0.0.1):

- a paged listing (an API's ``Link: rel="next"`` pages, a registry's ``tags/list``) is
  bounded in bytes across all its pages, not per page alone: 50 pages of up to 64 MiB
  each, parsed at ~20 times their size, were tens of GiB of memory;
- a JSON string that holds a lone surrogate (``"\\ud800"``: an image's version label,
  the index's ``info.version``) is one line naming its source, not UnicodeEncodeError's
  traceback when it is printed;
- a tar member name that is not UTF-8 hashes as its bytes, and a top folder that is not
  UTF-8 (it goes into the lock as text) is one FetchError naming the archive.
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from lockpipe.errors import FetchError, RegistryError
from lockpipe.refresh import api
from lockpipe.refresh.api import Api
from lockpipe.refresh.archive import fetch_unpinned, tree_hash
from lockpipe.registry import tags
from lockpipe.registry.tags import list_tags
from lockpipe.registry.transport import Registry
from tests.httpfake import FakeHandler, FakeServer
from tests.integration.test_refresh_hub import FakePyPI, _pip_checkout, refresh
from tests.integration.test_registry_index_shapes import (
    OCI_CONFIG,
    OCI_MANIFEST,
    REPO,
    FakeRegistry,
    _digest,
    _refresh,
)

pytestmark = pytest.mark.integration
PAGE = 3 << 19  # 1.5 MiB of JSON a page
PAGES = 45  # 67.5 MiB in all: past 64 MiB, under either module's page count


class Pages(FakeServer):
    """FAKE: ``PAGES`` pages, each one string of ``PAGE`` bytes, as an API's JSON list
    (``/list?page=N``) or a registry's ``tags/list`` (``?last=N``), each linking the next
    but the last; ``body`` is served at every other path; ``asked`` counts page requests."""

    def __init__(self) -> None:
        super().__init__(_PagesHandler)
        self.asked = 0
        self.body = b""


class _PagesHandler(FakeHandler):
    server: Pages

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/v2/":
            self.send_json(200, {})
            return
        if not (url.path.endswith("/list") or url.path.endswith("/tags/list")):
            self.send_bytes(200, self.server.body, {"Content-Type": "application/octet-stream"})
            return
        self.server.asked += 1
        n = int((query.get("page") or query.get("last") or ["0"])[0])
        word = "x" * PAGE
        doc = [word] if url.path == "/list" else {"name": "o/r", "tags": [word]}
        extra = {}
        if n + 1 < PAGES:
            key = "page" if url.path == "/list" else "last"
            extra["Link"] = f'<{url.path}?{key}={n + 1}>; rel="next"'
        self.send_bytes(200, json.dumps(doc).encode(), {"Content-Type": "application/json",
                                                        **extra})  # fmt: skip


@pytest.fixture
def pages() -> Iterator[Pages]:
    server = Pages()
    yield server
    server.stop()


def test_an_api_listing_past_its_bytes_in_all_is_one_fetch_error(pages: Pages) -> None:
    """45 pages of 1.5 MiB each were all read and kept (the 64 MiB bound was per page)."""
    hub = Api(base=pages.url, name="the Hub", refused="set HF_TOKEN")
    with pytest.raises(FetchError) as info:
        hub.get_all("list", "payloads.snap")
    text = str(info.value)
    assert text.startswith(f"payloads.snap: the pages at {pages.url}/list hold more than 64 MiB")
    assert f"is {pages.url} the Hub?" in text and "\n" not in text
    assert pages.asked == (64 << 20) // (PAGE + 4) + 1  # stopped at the page past the bound
    assert api.MAX_LISTING == 64 << 20


def test_a_tags_listing_past_its_bytes_in_all_is_one_registry_error(pages: Pages) -> None:
    """45 pages of tags of 1.5 MiB each were all read and kept."""
    reg = Registry(pages.host, scheme="http", credential=None)
    ref = f"{pages.host}/o/r:1"
    with pytest.raises(RegistryError) as info:
        list_tags(ref, registry=reg)
    text = str(info.value)
    assert text.startswith(f"{ref}: the tags/list pages at {pages.url}/v2/o/r/tags/list hold "
                           "more than 64 MiB in all; is it a registry")  # fmt: skip
    assert pages.asked < PAGES and tags.MAX_LISTING == 64 << 20


def test_a_version_label_with_a_lone_surrogate_is_one_line(tmp_path: Path) -> None:
    """The label '\\ud800' was written to the report: UnicodeEncodeError's traceback."""
    registry = FakeRegistry()
    try:
        registry.config = (b'{"os":"linux","architecture":"amd64","config":{"Labels":'
                           b'{"org.opencontainers.image.version":"1.0\\ud800"}}}')  # fmt: skip
        registry.image = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                     "layers": [], "config": {"mediaType": OCI_CONFIG,
                                     "size": len(registry.config),
                                     "digest": _digest(registry.config)}}).encode()  # fmt: skip
        for entry in registry.index["manifests"]:
            entry["digest"], entry["size"] = _digest(registry.image), len(registry.image)
        _, lock, command, env = _refresh(registry, tmp_path)
        before = lock.read_bytes()
        done = subprocess.run(command, cwd=REPO, text=True, capture_output=True, env=env,
                              errors="backslashreplace")  # fmt: skip
    finally:
        registry.stop()
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == RegistryError.return_code, done.stderr
    assert (
        "bases.busybox: the image config: config.Labels.org.opencontainers.image.version "
        "is not text: it holds the lone surrogate '\\ud800'"
    ) in done.stderr, done.stderr
    assert lock.read_bytes() == before


def test_an_index_version_with_a_lone_surrogate_is_one_line(tmp_path: Path) -> None:
    """info.version '2.32.3\\ud800' was printed in the report: UnicodeEncodeError."""
    index = FakePyPI({"requests": "2.32.3\ud800"})
    try:
        lock = _pip_checkout(tmp_path, f"requests==2.0.0 --hash=sha256:{'1' * 64}\n")
        url = f"http://{index.server_address[0]!s}:{index.server_address[1]}"
        done = refresh(lock, "--kind", "pip", "--dry-run", LOCKPIPE_PYPI=url)
    finally:
        index.shutdown()
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    said = (f"pip.app: requests: {url}/pypi/requests/json: info.version is not text: it "
            "holds the lone surrogate '\\ud800'")  # fmt: skip
    assert said in done.stderr, done.stderr


def _latin1_tar(top: str) -> bytes:
    """A GNU tar.gz whose member names are Latin-1 bytes (0xe9 is no UTF-8)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT,
                      encoding="latin-1") as tar:  # fmt: skip
        for name in [f"{top}/README", f"{top}/caf\xe9.txt"]:
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"hi\n"))
        link = tarfile.TarInfo(f"{top}/link")
        link.type, link.linkname = tarfile.SYMTYPE, "caf\xe9.txt"
        tar.addfile(link)
    return buf.getvalue()


def test_a_member_name_that_is_not_utf8_hashes_as_its_bytes(pages: Pages, tmp_path: Path) -> None:
    """'top/caf\\xe9.txt' was UnicodeEncodeError's traceback out of tree_hash."""
    pages.body = _latin1_tar("top")
    got = fetch_unpinned(f"{pages.url}/o/r/archive/refs/tags/b1.tar.gz", tmp_path / "cache")
    tree = tree_hash(got.path)
    assert tree.root == "top" and tree.files == 3
    pages.body = _latin1_tar("other")  # the top folder is no part of the hash
    again = fetch_unpinned(f"{pages.url}/o/r/archive/refs/tags/b2.tar.gz", tmp_path / "cache")
    assert tree_hash(again.path).sha256 == tree.sha256


def test_a_top_folder_that_is_not_utf8_is_one_fetch_error(pages: Pages, tmp_path: Path) -> None:
    pages.body = _latin1_tar("t\xe9")
    got = fetch_unpinned(f"{pages.url}/o/r/archive/refs/tags/b1.tar.gz", tmp_path / "cache")
    with pytest.raises(FetchError) as info:
        tree_hash(got.path)
    assert str(info.value) == (f"{got.path}: its top folder b't\\xe9' is not UTF-8 text; the "
                               "lock's root needs one that is, as GitHub makes them")  # fmt: skip
