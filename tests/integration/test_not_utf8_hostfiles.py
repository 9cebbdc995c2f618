"""registries.conf and auth.json that are not UTF-8 are one RegistryError naming the file
and the byte, never a traceback (through ``lockpipe refresh-digests``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from tests.lockfactory import DIGEST, doc, make_repo

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("variable", "name", "data", "offset"),
    [
        ("CONTAINERS_REGISTRIES_CONF", "registries.conf",
         b'[[registry]]\nprefix = "caf\xe9.example"\nlocation = "x"\n', 26),
        ("REGISTRY_AUTH_FILE", "auth.json", b'{"auths": {"r\xe9": {}}}', 13),
    ],
)  # fmt: skip
def test_a_host_file_that_is_not_utf8_is_a_registry_error_naming_it(
    tmp_path: Path, variable: str, name: str, data: bytes, offset: int
) -> None:
    # a registry on a closed loopback port: the files are read before anything is asked
    ref = "127.0.0.1:1/lockpipe-test/busybox:1"
    lock = make_repo(tmp_path / "checkout", doc(bases={"busybox": {"ref": ref, "digest": DIGEST}}))
    bad = tmp_path / name
    bad.write_bytes(data)
    env = {**os.environ, "PYTHONPATH": str(REPO), variable: str(bad),
           "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "LOCKPIPE_CACHE": str(tmp_path / "cache" / "lockpipe")}  # fmt: skip
    for other in ("XDG_RUNTIME_DIR", "DOCKER_CONFIG", "XDG_CONFIG_HOME"):
        env.pop(other, None)
    out = subprocess.run(
        [sys.executable, "-m", "lockpipe", "refresh-digests", "--lock", str(lock),
         "--kind", "bases"],
        cwd=REPO, text=True, capture_output=True, check=False, env=env, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == RegistryError.return_code, out.stderr
    assert f"{bad}: not UTF-8 text (byte 0xe9 at offset {offset}); re-save it as UTF-8" in (
        out.stderr
    )
