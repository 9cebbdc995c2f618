"""Resolution against the loopback registry (distribution 2.8), directly and through faults.

Images are OCI layouts written here and pushed with skopeo; every digest is
cross-checked with ``skopeo inspect`` on the same registry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lockpipe.errors import RegistryError
from lockpipe.registry.client import Registry, exists, resolve, resolve_many
from lockpipe.registry.platforms import PlatformMissing
from tests.policy import scratch, unavailable
from tests.registry_servers import (
    FaultProxy,
    oci_layout,
    skopeo,
    skopeo_copy,
    skopeo_pick,
    skopeo_raw_digest,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh manifest cache per test: nothing cached earlier can answer for the registry."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "lockpipe"


@dataclass(frozen=True)
class Pushed:
    multi: str  # linux/amd64 + linux/arm64 + an unknown/unknown attestation
    single: str  # linux/amd64 only
    variants: str  # linux/amd64/v3 (listed first), linux/amd64, linux/arm64/v8
    host: str


@pytest.fixture(scope="module")
def pushed(registry: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pushed]:
    if shutil.which("skopeo") is None:
        unavailable("skopeo is not installed")
    with scratch(tmp_path_factory, "resolve") as work:
        yield _push(registry, work)


def _push(registry: str, work: Path) -> Pushed:
    run = uuid.uuid4().hex[:8]  # fresh tags each run: nothing stale can pass for a result
    multi = f"{registry}/lockpipe-test/registry-multi:{run}"
    single = f"{registry}/lockpipe-test/registry-single:{run}"
    layout = oci_layout(work / "multi", ["linux/amd64", "linux/arm64"], f"m-{run}",
                        attestation=True)  # fmt: skip
    skopeo_copy(layout, multi)
    skopeo_copy(oci_layout(work / "single", ["linux/amd64"], f"s-{run}"), single)
    variants = f"{registry}/lockpipe-test/registry-variants:{run}"
    skopeo_copy(oci_layout(work / "variants", ["linux/amd64/v3", "linux/amd64", "linux/arm64/v8"],
                           f"v-{run}"), variants)  # fmt: skip
    return Pushed(multi=multi, single=single, variants=variants, host=registry)


def _skopeo_child(ref: str, platform: str) -> str:
    """The child digest skopeo's raw index lists for ``platform``, checked by its own bytes."""
    raw = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false", f"docker://{ref}"],
                         check=True, capture_output=True).stdout  # fmt: skip
    os_, arch = platform.split("/")
    digest: str = next(
        m["digest"] for m in json.loads(raw)["manifests"]
        if m["platform"]["os"] == os_ and m["platform"]["architecture"] == arch
    )  # fmt: skip
    name = ref.rsplit(":", 1)[0]
    assert skopeo_raw_digest(f"{name}@{digest}") == digest
    return digest


def test_a_multi_arch_tag_gives_the_index_and_the_amd64_child(pushed: Pushed) -> None:
    got = resolve(pushed.multi, platforms=("linux/amd64", "linux/arm64"))
    assert got.digest == skopeo_raw_digest(pushed.multi)
    assert got.media_type == "application/vnd.oci.image.index.v1+json"
    assert got.platforms["linux/amd64"] == _skopeo_child(pushed.multi, "linux/amd64")
    assert got.platforms["linux/arm64"] == _skopeo_child(pushed.multi, "linux/arm64")
    assert got.available == ("linux/amd64", "linux/arm64"), "unknown/unknown was not skipped"
    assert got.version_label == "m-" + pushed.multi.rsplit(":", 1)[1]


def test_a_missing_platform_names_what_is_available(pushed: Pushed) -> None:
    with pytest.raises(RegistryError) as info:
        resolve(pushed.multi, platforms=("linux/s390x",))
    message = str(info.value)
    assert "no linux/s390x image" in message
    assert "available: linux/amd64, linux/arm64)" in message and "unknown" not in message


def test_a_single_manifest_is_its_own_platform(pushed: Pushed) -> None:
    got = resolve(pushed.single)
    assert got.digest == skopeo_raw_digest(pushed.single)
    assert got.platforms == {} and got.available == ("linux/amd64",)
    with pytest.raises(PlatformMissing) as info:
        resolve(pushed.single, platforms=("linux/arm64",))
    assert "a single-platform image for linux/amd64, not linux/arm64" in str(info.value)
    assert "index (" not in str(info.value) and info.value.available == ("linux/amd64",)


def test_variants_are_chosen_as_skopeo_chooses_them(pushed: Pushed, tmp_path: Path) -> None:
    """The index lists amd64/v3 before plain amd64: linux/amd64 must still get the plain one."""
    wanted = ("linux/amd64", "linux/arm64", "linux/amd64/v3", "linux/arm64/v8", "linux/amd64/v2")
    got = resolve(pushed.variants, platforms=wanted)
    assert got.available == ("linux/amd64/v3", "linux/amd64", "linux/arm64/v8")
    for platform in wanted:
        assert got.platforms[platform] == skopeo_pick(pushed.variants, platform, tmp_path / "d"), (
            platform
        )
    assert got.platforms["linux/amd64"] != got.platforms["linux/amd64/v3"]
    assert got.platforms["linux/arm64"] == got.platforms["linux/arm64/v8"]
    with pytest.raises(PlatformMissing) as info:
        resolve(pushed.variants, platforms=("linux/amd64", "linux/arm/v7"))
    assert info.value.platform == "linux/arm/v7" and "in its index" in str(info.value)


def test_resolve_many_keeps_order_and_reports_each_failure(pushed: Pushed) -> None:
    missing = f"{pushed.host}/lockpipe-test/registry-single:no-such-tag"
    refs = [pushed.single, pushed.multi, missing, pushed.multi, pushed.single]
    results = resolve_many(refs, concurrency=4)
    assert [r.ref for r in results if not isinstance(r, RegistryError)] == [
        pushed.single, pushed.multi, pushed.multi, pushed.single]  # fmt: skip
    assert isinstance(results[2], RegistryError) and "not found" in str(results[2])
    for ref, got in zip(refs, results, strict=True):
        if not isinstance(got, RegistryError):
            assert got.digest == skopeo_raw_digest(ref)


def test_exists_is_true_only_for_a_digest_the_registry_holds(pushed: Pushed) -> None:
    name = pushed.single.rsplit(":", 1)[0]
    assert exists(f"{name}@{skopeo_raw_digest(pushed.single)}")
    assert not exists(f"{name}@sha256:{'0' * 64}")


@pytest.fixture
def proxy(pushed: Pushed) -> Iterator[FaultProxy]:
    server = FaultProxy(pushed.host)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _via(proxy: FaultProxy, ref: str) -> str:
    return proxy.host + "/" + ref.split("/", 1)[1]


def _reg(proxy: FaultProxy, sleeps: list[float], retries: int = 4) -> Registry:
    reg = Registry(proxy.host, scheme="http", credential=None, timeout=10, retries=retries)
    reg.transport.sleep = sleeps.append  # recorded, not slept: the waits asked for are checked
    return reg


def test_429_waits_as_retry_after_says_then_succeeds(pushed: Pushed, proxy: FaultProxy) -> None:
    proxy.fail_status, proxy.fail_times, proxy.retry_after = 429, 2, "3"
    sleeps: list[float] = []
    got = resolve(_via(proxy, pushed.single), registry=_reg(proxy, sleeps))
    assert sleeps == [3.0, 3.0]
    assert got.digest == skopeo_raw_digest(pushed.single)


def test_a_retry_after_past_the_cap_fails_at_once(pushed: Pushed, proxy: FaultProxy) -> None:
    proxy.fail_status, proxy.fail_times, proxy.retry_after = 429, 1000, "3600"
    sleeps: list[float] = []
    with pytest.raises(RegistryError) as info:
        resolve(_via(proxy, pushed.single), registry=_reg(proxy, sleeps))
    message = str(info.value)
    assert f"rate limited by {proxy.host} for 3600 s; try again after 20" in message
    assert message.count(" UTC") == 1
    assert sleeps == [] and len(proxy.seen) == 1, "it slept or asked again"
    proxy.fail_status, proxy.seen = 503, []
    with pytest.raises(RegistryError, match=r"answered 503 and asks to wait 3600 s; try again"):
        resolve(_via(proxy, pushed.single), registry=_reg(proxy, sleeps))
    assert sleeps == [] and len(proxy.seen) == 1


def test_5xx_is_retried_with_growing_waits_then_succeeds(pushed: Pushed, proxy: FaultProxy) -> None:
    proxy.fail_status, proxy.fail_times = 503, 3
    sleeps: list[float] = []
    got = resolve(_via(proxy, pushed.multi), registry=_reg(proxy, sleeps))
    assert got.digest == skopeo_raw_digest(pushed.multi)
    assert len(sleeps) == 3 and sleeps[0] < 0.5 * 2 + 1e-9 and sleeps[2] >= 0.5 * 4 * 0.5


def test_5xx_forever_stops_after_the_bounded_retries(pushed: Pushed, proxy: FaultProxy) -> None:
    proxy.fail_status, proxy.fail_times = 502, 1000
    sleeps: list[float] = []
    with pytest.raises(RegistryError) as info:
        resolve(_via(proxy, pushed.single), registry=_reg(proxy, sleeps, retries=2))
    assert "answered 502 after 3 tries" in str(info.value) and proxy.host in str(info.value)
    assert len(proxy.seen) == 3 and len(sleeps) == 2


def test_a_missing_digest_header_falls_back_to_get(pushed: Pushed, proxy: FaultProxy) -> None:
    proxy.drop_digest = True
    got = resolve(_via(proxy, pushed.multi), registry=_reg(proxy, []), platforms=())
    assert got.digest == skopeo_raw_digest(pushed.multi)
    assert [m for m, p, _ in proxy.seen] == ["HEAD", "GET"]


def test_corrupted_manifest_bytes_are_refused(pushed: Pushed, proxy: FaultProxy) -> None:
    proxy.corrupt = True
    with pytest.raises(RegistryError, match="bytes do not match their digest"):
        resolve(_via(proxy, pushed.multi), registry=_reg(proxy, []))
    proxy.drop_digest = True  # no header to check against: a tag's bytes cannot be checked,
    with pytest.raises(RegistryError, match="bytes do not match their digest"):  # a child can
        resolve(_via(proxy, pushed.multi), registry=_reg(proxy, []))


def test_a_second_run_asks_only_heads_and_a_damaged_cache_is_a_miss(
    pushed: Pushed, proxy: FaultProxy, _own_cache: Path
) -> None:
    ref = _via(proxy, pushed.multi)
    first = resolve_many([ref])[0]
    assert not isinstance(first, RegistryError)
    assert [m for m, _, _ in proxy.seen] == ["HEAD", "GET", "GET", "GET"]
    proxy.seen.clear()
    again = resolve_many([ref])[0]
    assert again == first and [m for m, _, _ in proxy.seen] == ["HEAD"]
    for path in (_own_cache / "registry" / "sha256").iterdir():
        path.write_text("{}")
    proxy.seen.clear()
    assert resolve_many([ref])[0] == first
    assert [m for m, _, _ in proxy.seen] == ["HEAD", "GET", "GET", "GET"]


def test_a_low_rate_limit_is_kept_and_warned_about(
    pushed: Pushed, proxy: FaultProxy, capsys: pytest.CaptureFixture[str]
) -> None:
    proxy.extra = {"ratelimit-remaining": "3;w=21600"}
    got = resolve(_via(proxy, pushed.single), registry=_reg(proxy, []))
    assert got.ratelimit_remaining == 3 and got.digest == skopeo_raw_digest(pushed.single)
    assert f"warning: {proxy.host}: 3 pulls left" in capsys.readouterr().err


def test_mirrors_from_registries_conf_come_first_and_a_failing_one_is_skipped(
    pushed: Pushed, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy.fail_status, proxy.fail_times = 404, 1000  # the first mirror knows nothing
    conf = tmp_path / "registries.conf"
    conf.write_text(
        '[[registry]]\nlocation = "upstream.invalid"\n'
        f'[[registry.mirror]]\nlocation = "{proxy.host}/lockpipe-test"\n'
        f'[[registry.mirror]]\nlocation = "{pushed.host}/lockpipe-test"\n'
    )
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    name = pushed.single.split("/lockpipe-test/", 1)[1]  # registry-single:<run>
    got = resolve(f"upstream.invalid/{name}")  # upstream.invalid itself is never asked
    assert got.digest == skopeo_raw_digest(pushed.single)
    assert proxy.seen and proxy.seen[0][1].startswith("/v2/lockpipe-test/registry-single/")


def _conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    conf = tmp_path / "registries.conf"
    conf.write_text(text)
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user drop-ins of this machine
    return conf


def test_a_prefix_is_rewritten_to_its_location_as_skopeo_does(
    pushed: Pushed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _conf(tmp_path, monkeypatch, '[[registry]]\nprefix = "upstream.invalid/team"\n'
                 f'location = "{pushed.host}/lockpipe-test"\n')  # fmt: skip
    name = pushed.multi.split("/lockpipe-test/", 1)[1]  # registry-multi:<run>
    got = resolve(f"upstream.invalid/team/{name}", platforms=("linux/arm64",))
    raw = skopeo("--registries-conf", str(conf), "inspect", "--raw", "--tls-verify=false",
                 f"docker://upstream.invalid/team/{name}")  # fmt: skip
    assert got.digest == skopeo_raw_digest(pushed.multi)
    assert got.digest == "sha256:" + hashlib.sha256(raw.encode("latin-1")).hexdigest()


def test_a_digest_only_mirror_is_never_asked_for_a_tag(
    pushed: Pushed, proxy: FaultProxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a longer prefix than the loopback drop-in of /etc/containers/registries.conf.d, which
    # (as in podman) is read after CONTAINERS_REGISTRIES_CONF and would win for the host
    table = f'[[registry]]\nlocation = "{pushed.host}/lockpipe-test"\n'
    mirror = f'[[registry.mirror]]\nlocation = "{proxy.host}/lockpipe-test"\n'
    _conf(tmp_path, monkeypatch, f'{table}{mirror}pull-from-mirror = "digest-only"\n')
    got = resolve(pushed.single)
    assert got.digest == skopeo_raw_digest(pushed.single)
    assert proxy.seen == [], "the digest-only mirror answered for a tag"
    name = pushed.single.rsplit(":", 1)[0]
    assert exists(f"{name}@{got.digest}")
    assert proxy.seen and proxy.seen[0][0] == "HEAD", "the mirror was not asked for the digest"
    proxy.seen.clear()
    _conf(tmp_path, monkeypatch, f"{table}mirror-by-digest-only = true\n{mirror}")
    assert resolve(pushed.single).digest == got.digest and proxy.seen == []


def test_a_blocked_registry_is_refused_naming_the_file(
    pushed: Pushed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = _conf(tmp_path, monkeypatch, f'[[registry]]\nlocation = "{pushed.host}/lockpipe-test"'
                 '\nblocked = true\n')  # fmt: skip
    with pytest.raises(RegistryError) as info:
        resolve(pushed.single)
    assert f"{pushed.host}/lockpipe-test is blocked in {conf}" in str(info.value)
    with pytest.raises(subprocess.CalledProcessError) as refused:  # skopeo refuses it too
        skopeo("--registries-conf", str(conf), "inspect", "--raw", f"docker://{pushed.single}")
    assert b"blocked" in (refused.value.stderr or b"")
