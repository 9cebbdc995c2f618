"""Registry credentials go to the registry's own host, never where it sends a request on.

A Basic-auth registry (distribution 2.8 with htpasswd) sits behind a relay on
127.0.0.1 that hands out upload Locations on a storage front at 127.0.0.2 and
redirects blob GETs there, as registries with a storage backend do. The
storage front records every Authorization header it is sent; it must never
see one from lockpipe, through ``lockpipe publish`` and ``lockpipe verify``.
"""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import RegistryError
from lockpipe.urls import basic_auth
from tests.lockfactory import buildah_built
from tests.policy import scratch, unavailable
from tests.registry_servers import PASSWORD, USER, Diverter, RegistryProc, Storage, htpasswd_auth

pytestmark = [pytest.mark.integration, pytest.mark.buildah]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Diverter, Storage]]:
    for tool in ("docker-registry", "htpasswd", "buildah"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} is not installed")
    with scratch(tmp_path_factory, "basic-registry") as work:
        registry = RegistryProc(work, htpasswd_auth(work))
        storage = Storage(registry.host, basic_auth(USER, PASSWORD))
        diverter = Diverter(registry.host, storage.url)
        yield diverter, storage
        diverter.stop()
        storage.stop()
        registry.stop()


@pytest.fixture
def hosts(
    servers: tuple[Diverter, Storage], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Diverter, Storage]:
    """The relay, diverting nothing yet, and the storage front; this user logged in to the
    relay (and to nothing else)."""
    relay, storage = servers
    relay.uploads = relay.blobs = False
    storage.authorization = basic_auth(USER, PASSWORD)
    auth = tmp_path / "auth.json"
    secret = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    auth.write_text(json.dumps({"auths": {relay.host: {"auth": secret}}}))
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(auth))
    for name in ("XDG_RUNTIME_DIR", "DOCKER_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return relay, storage


def _publish_args(tmp_path: Path, base: tuple[str, str], relay: Diverter) -> list[str]:
    """``lockpipe publish app`` of a fresh buildah build, to a repository of its own."""
    lock, state = buildah_built(tmp_path, base, "localhost/lockpipe-test/boundaries:1")
    prefix = f"{relay.host}/lockpipe-boundaries-{uuid.uuid4().hex[:8]}"
    return ["publish", "app", "--engine", "buildah", "--to", prefix, "--lock", str(lock),
            "--state", str(state)]  # fmt: skip


def _image_only(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish the image (the engine's push) but not its provenance (lockpipe's uploads)."""

    def refused(pinned: str, doc: dict[str, Any]) -> str:
        raise RegistryError(f"{pinned}: the attach was refused (injected)")

    with monkeypatch.context() as patch:
        patch.setattr("lockpipe.publish.push.attach_provenance", refused)
        assert main(args) == RegistryError.return_code


@pytest.fixture
def diverted(
    hosts: tuple[Diverter, Storage], busybox_base: tuple[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> list[str]:  # fmt: skip
    """The publish args of an image already pushed, its provenance's uploads diverted."""
    args = _publish_args(tmp_path, busybox_base, hosts[0])
    _image_only(args, monkeypatch)
    hosts[0].uploads = True
    return args


def test_an_upload_location_on_another_host_gets_no_credentials(
    diverted: list[str], hosts: tuple[Diverter, Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    storage = hosts[1]
    before = len(storage.seen)
    assert main(diverted) == 0  # the provenance's blobs go up at the storage front's Location
    sent = storage.seen[before:]
    assert [m for m, _, _ in sent].count("PUT") >= 1, sent
    assert all(auth is None for _, _, auth in sent), sent
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err and "Traceback" not in out.err


def test_another_host_that_asks_for_credentials_is_a_clear_error(
    diverted: list[str], hosts: tuple[Diverter, Storage], capsys: pytest.CaptureFixture[str]
) -> None:
    storage = hosts[1]
    capsys.readouterr()
    storage.authorization = None  # the registry itself answers the upload there: 401
    before = len(storage.seen)
    assert main(diverted) == RegistryError.return_code
    assert storage.seen[before:] and all(auth is None for _, _, auth in storage.seen[before:])
    err = capsys.readouterr().err
    assert f"sent the request on to {storage.url}" in err and "asks for credentials" in err
    assert PASSWORD not in err and "Traceback" not in err


def test_a_blob_redirect_to_another_host_gets_no_credentials(
    hosts: tuple[Diverter, Storage], busybox_base: tuple[str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    diverter, storage = hosts
    args = _publish_args(tmp_path, busybox_base, diverter)
    assert main(args) == 0
    diverter.blobs = True
    before = len(storage.seen)
    assert main(["verify", "app", "--published", *args[6:]]) == 0  # reads the statement blob
    sent = storage.seen[before:]
    assert [m for m, _, _ in sent].count("GET") >= 1, sent
    assert all(auth is None for _, _, auth in sent), sent
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err and "Traceback" not in out.err
