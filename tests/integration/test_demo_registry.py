"""The demo's registry: one that answers, one it starts for the run, or an error with the fix.

The default address is moved to a free loopback port, so the machine's own registry on
127.0.0.1:5000 is neither used nor disturbed.
"""

from __future__ import annotations

import shutil
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lockpipe.demo import registry as demo_registry
from lockpipe.errors import RegistryError
from tests.policy import unavailable

pytestmark = pytest.mark.integration


def _free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def address(monkeypatch: pytest.MonkeyPatch) -> str:
    free = _free_address()
    monkeypatch.setattr(demo_registry, "REGISTRY", free)
    return free


def test_docker_registry_is_started_for_the_run_and_stopped(address: str, tmp_path: Path) -> None:
    if shutil.which("docker-registry") is None:
        unavailable("docker-registry is not installed (apt-get install docker-registry)")
    assert not demo_registry.answers(address)
    with demo_registry.demo_registry(None, tmp_path) as used:
        assert used == address and demo_registry.answers(address)
    assert not demo_registry.answers(address)  # stopped with the run
    assert (tmp_path / "registry" / "config.yml").is_file()


def test_without_a_registry_or_the_binary_the_error_names_both_fixes(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda _: None)  # the module reads shutil.which
    with pytest.raises(RegistryError) as err, demo_registry.demo_registry(None, tmp_path):
        pass
    assert "apt-get install docker-registry" in str(err.value)
    assert "--registry HOST:PORT" in str(err.value) and address in str(err.value)


def test_a_port_held_by_another_server_is_named(address: str, tmp_path: Path) -> None:
    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, format: str, *args: object) -> None:
            pass

    host, _, port = address.partition(":")
    server = ThreadingHTTPServer((host, int(port)), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        taken = pytest.raises(RegistryError, match="is taken by something that is not an OCI")
        with taken, demo_registry.demo_registry(None, tmp_path):
            pass
    finally:
        server.shutdown()
        server.server_close()


def test_a_named_registry_must_answer(tmp_path: Path) -> None:
    silent = _free_address()
    refused = pytest.raises(RegistryError, match=f"--registry {silent}: no OCI registry answers")
    with refused, demo_registry.demo_registry(silent, tmp_path):
        pass
