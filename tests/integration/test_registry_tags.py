"""``refresh-digests --propose`` reads a base's ``tags/list``; an answer of another shape is
one line naming the registry and the key (issue 18 review). The registry is the loopback
one, behind a real proxy (tests/registry_servers.py FaultProxy) that answers tags/list
as the parametrization says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from tests.integration.test_refresh import _lock, proxy, refresh  # noqa: F401 (a fixture)
from tests.registry_servers import FaultProxy

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (b"[]", "the answer is a list, not an object"),
        (b'{"tags": "1.36"}', "tags is a string, not a list"),
        (b'{"tags": [1.36]}', "tags[0] is a number, not a string"),
        (b"<html>", "the answer is not JSON"),
    ],
)
def test_a_tags_list_of_another_shape_is_one_line_naming_the_registry(
    proxy: FaultProxy,  # noqa: F811 (test_refresh's fixture: the proxy in front of the registry)
    busybox_base: tuple[str, str],
    tmp_path: Path,
    answer: bytes,
    words: str,
) -> None:
    """A list or a string was taken for "no tags", so no upgrade was ever proposed."""
    ref, digest = busybox_base
    through = f"{proxy.host}/{ref.split('/', 1)[1]}"
    lock = _lock(tmp_path, {"busybox": {"ref": through, "digest": digest}})
    before = lock.read_bytes()
    proxy.tags = answer
    report = tmp_path / "r.json"
    result = refresh(lock, "--kind", "bases", "--propose", "--dry-run", "--report-json",
                     str(report), LOCKPIPE_CACHE=str(tmp_path / "cache"))  # fmt: skip
    assert result.returncode == RegistryError.return_code, result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    assert f"{through}: {proxy.host}'s tags/list: {words}" in result.stderr
    assert any("/tags/list" in path for _, path, _ in proxy.seen)
    assert lock.read_bytes() == before
    # --dry-run: the report says the base was not proposed, and why, not "no upgrades"
    doc = json.loads(report.read_text())
    assert doc["proposals"] == []
    [line] = [w["message"] for w in doc["warnings"] if w["name"] == "busybox"]
    assert line.startswith(f"not proposed: {through}: {proxy.host}'s tags/list: {words}")


def test_a_tag_too_long_to_be_a_version_is_not_proposed(
    proxy: FaultProxy,  # noqa: F811 (test_refresh's fixture: the proxy in front of the registry)
    busybox_base: tuple[str, str],
    tmp_path: Path,
) -> None:
    """A 5000-digit tag (the distribution spec allows 128 characters) was an int() traceback
    (Python reads at most 4300 digits); it is not a version, so it is no upgrade."""
    ref, digest = busybox_base  # tagged 1
    through = f"{proxy.host}/{ref.split('/', 1)[1]}"
    lock = _lock(tmp_path, {"busybox": {"ref": through, "digest": digest}})
    before = lock.read_bytes()
    long = ["2" * 5000, "v" + "3" * 5000, "4" * 5000 + "-cu129", "5" * 129]
    proxy.tags = json.dumps({"name": "lockpipe-test/busybox", "tags": ["1", *long]}).encode()
    report = tmp_path / "r.json"
    result = refresh(lock, "--kind", "bases", "--propose", "--dry-run", "--report-json",
                     str(report), LOCKPIPE_CACHE=str(tmp_path / "cache"))  # fmt: skip
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr + result.stdout
    assert any("/tags/list" in path for _, path, _ in proxy.seen)
    assert json.loads(report.read_text())["proposals"] == []
    assert lock.read_bytes() == before


def test_a_next_link_that_is_no_url_is_one_line_naming_the_header(
    proxy: FaultProxy,  # noqa: F811 (test_refresh's fixture: the proxy in front of the registry)
    busybox_base: tuple[str, str],
    tmp_path: Path,
) -> None:
    """``Link: <http://[::1/next>`` (an IPv6 literal never closed) was urllib's ValueError,
    a traceback; it is the registry's broken answer, named with its header (issue 18)."""
    ref, digest = busybox_base
    through = f"{proxy.host}/{ref.split('/', 1)[1]}"
    lock = _lock(tmp_path, {"busybox": {"ref": through, "digest": digest}})
    before = lock.read_bytes()
    proxy.extra = {"Link": "<http://[::1/next" + "x" * 5000 + '>; rel="next"'}
    result = refresh(lock, "--kind", "bases", "--propose", "--dry-run",
                     LOCKPIPE_CACHE=str(tmp_path / "cache"))  # fmt: skip
    assert "Traceback" not in result.stderr
    assert result.returncode == RegistryError.return_code, result.stderr + result.stdout
    said = f"{through}: {proxy.host}'s tags/list: the Link header '<http://[::1/next"
    assert said in result.stderr, result.stderr
    assert "x" * 300 not in result.stderr  # the header clipped, not 5,000 characters
    assert f"http://{proxy.host}/v2/" in result.stderr  # the page that sent it
    assert lock.read_bytes() == before
