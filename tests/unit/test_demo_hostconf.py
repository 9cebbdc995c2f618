"""The demo's containers.conf for a host whose podman defaults fail, from podman's own words:
the runc line is what podman 4.3 printed here (CONTAINERS_CONF=/dev/null podman run …);
crun's is the phrase shared/HOST-NOTES.md quotes (crun is not installed here)."""

from __future__ import annotations

import tomllib

from lockpipe.demo.hostconf import render, settings_for

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
