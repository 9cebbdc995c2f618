"""The demo's containers.conf for a host whose podman defaults fail, from podman's own words:
the runc line is what podman 4.3 printed here (CONTAINERS_CONF=/dev/null podman run …);
crun's is the phrase shared/HOST-NOTES.md quotes (crun is not installed here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest and mypy bring tomli on 3.10
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

from lockpipe.demo.hostconf import loopback_registry, render, settings_for

RUNC_RLIMIT = ("runc: runc create failed: unable to start container process: error during "
               "container init: error setting rlimits for ready process: error setting rlimit "
               "type 7: operation not permitted: OCI permission denied")  # fmt: skip
CRUN_HYBRID = "cgroups in hybrid mode not supported"


def test_each_failure_gets_only_its_own_setting() -> None:
    assert settings_for(RUNC_RLIMIT, runc=True) == {
        "containers": {"default_ulimits": '["nofile=1024:1024", "nproc=1024:1024"]'}
    }
    assert settings_for(CRUN_HYBRID, runc=True) == {"engine": {"runtime": '"runc"'}}
    assert settings_for(CRUN_HYBRID, runc=False) == {}  # no runc to switch to
    assert settings_for("Error: image not known", runc=True) == {}  # the smoke test says it


def test_the_file_is_toml_podman_reads() -> None:
    both = {**settings_for(RUNC_RLIMIT, runc=True), **settings_for(CRUN_HYBRID, runc=True)}
    read = tomllib.loads(render(both))
    assert read == {"containers": {"default_ulimits": ["nofile=1024:1024", "nproc=1024:1024"]},
                    "engine": {"runtime": "runc"}}  # fmt: skip


def test_the_loopback_registry_alone_is_marked_insecure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONTAINERS_REGISTRIES_CONF", raising=False)
    loopback_registry("127.0.0.1:5000", tmp_path)
    conf = Path(os.environ["CONTAINERS_REGISTRIES_CONF"])
    assert conf == tmp_path / "registries.conf"
    assert tomllib.loads(conf.read_text()) == {
        "registry": [{"location": "127.0.0.1:5000", "insecure": True}]
    }
