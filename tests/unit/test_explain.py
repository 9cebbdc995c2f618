"""The cause classifier and the explainer, on synthetic entries and in-memory tars."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import replace
from typing import Any

import pytest

from lockpipe.errors import DiskSpaceError
from lockpipe.verify import causes
from lockpipe.verify.across import TAR_ENCODING, compare_trees
from lockpipe.verify.causes import classify, differing_fields, pyc_detail
from lockpipe.verify.explain import explain
from lockpipe.verify.space import Usage, check_space, space_needed
from lockpipe.verify.tree import Entry, ImageTree, Layer, build_paths, merged, read_entries

FILE = Entry(path="app/x", kind="file", mode=0o644, uid=0, gid=0, uname="", gname="",
             mtime=1700000000, size=5, sha256="aa")  # fmt: skip


def f(path: str = "app/x", **changes: Any) -> Entry:
    return replace(FILE, path=path, **changes)


@pytest.mark.parametrize(
    ("a", "b", "cause"),
    [
        (f(), f(mtime=1), causes.TIMESTAMPS),
        (f(sha256="a1", clock="01:02:03"), f(sha256="b2", clock="01:02:04"), causes.TIMESTAMPS),
        (f("usr/lib/m.pyc", sha256="1"), f("usr/lib/m.pyc", sha256="2"), causes.PYC),
        (f("var/log/apt/history.log", sha256="1"), f("var/log/apt/history.log"), causes.APT_LOG),
        (f("var/log/dpkg.log", sha256="1"), f("var/log/dpkg.log"), causes.APT_LOG),
        # Equal bytes, another mtime: timestamps, whatever the path (.pyc and apt logs too).
        (f("var/log/dpkg.log", mtime=1), f("var/log/dpkg.log"), causes.TIMESTAMPS),
        (f("usr/lib/m.pyc", mtime=1), f("usr/lib/m.pyc"), causes.TIMESTAMPS),
        # A constant build path in both files is not what differs.
        (f(sha256="1", build_paths=("/build/docs",)), f(sha256="2", build_paths=("/build/docs",)),
         causes.CONTENT),
        (f(sha256="1", build_paths=("/tmp/a", "/tmp/b")),
         f(sha256="2", build_paths=("/tmp/b", "/tmp/a")), causes.CONTENT),
        (f(sha256="1", build_paths=("/tmp/a",)), f(sha256="2"), causes.BUILD_PATH),
        (f("var/cache/apt/pkgcache.bin"), None, causes.APT_LOG),
        (f("var/cache/ldconfig/aux-cache", sha256="1"), f("var/cache/ldconfig/aux-cache"),
         causes.LDCONFIG),
        (f(sha256="1", build_paths=("/tmp/build-1",)), f(sha256="2", build_paths=("/tmp/build-2",)),
         causes.BUILD_PATH),
        (f(sha256="1", uuid="8c1f0f3e-0000-4000-8000-000000000001"),
         f(sha256="2", uuid="8c1f0f3e-0000-4000-8000-000000000002"), causes.RANDOM),
        (f(mode=0o755), f(), causes.METADATA),
        (f(uid=1000), f(), causes.METADATA),
        (f(uname="root", gname="root"), f(), causes.ENCODING),
        (f(uname="root", mtime=5), f(), causes.TIMESTAMPS),
        (f(sha256="1"), f(sha256="2"), causes.CONTENT),
        (None, f("new"), causes.CONTENT),
    ],
)  # fmt: skip
def test_classify(a: Entry | None, b: Entry | None, cause: causes.Cause) -> None:
    assert classify(a, b) is cause


def test_differing_fields_name_each_field() -> None:
    a = f(sha256="1", mode=0o600, uid=1, mtime=2, link="t", uname="u")
    assert differing_fields(a, f()) == ("content", "mode", "owner", "owner name", "mtime", "link")
    assert differing_fields(None, f()) == ("only in B",)
    assert differing_fields(f(), f()) == ()
    with pytest.raises(ValueError):
        classify(None, None)


def test_pyc_detail_points_at_the_mtime_field() -> None:
    a = f("m.pyc", head=b"\x55\x0d\x0d\x0a\0\0\0\0\x01\x02\x03\x04")
    b = f("m.pyc", head=b"\x55\x0d\x0d\x0a\0\0\0\0\x09\x02\x03\x04")
    assert "bytes 8..12" in pyc_detail(a, b)
    assert "code object" in pyc_detail(a, a)
    assert pyc_detail(a, None) == ""


def layer(diff_id: str, *entries: Entry) -> Layer:
    return Layer(digest=diff_id, diff_id=diff_id, media_type="", entries=entries)


def image(ref: str, layers: tuple[Layer, ...], **config: Any) -> ImageTree:
    cfg = {"created": "2023-11-14T22:13:20Z", "history": [], "config": {"Labels": {}}}
    cfg.update(config)
    return ImageTree(ref=ref, manifest_digest="m", config_digest="c", annotations={},
                     config=cfg, layers=layers)  # fmt: skip


BASE = layer("sha256:base", f("bin/busybox"))


def test_explain_names_the_first_differing_files_with_cause_and_fix() -> None:
    a = image("A", (BASE, layer("sha256:1", f("var/log/apt/history.log", sha256="1"), f())))
    b = image("B", (BASE, layer("sha256:2", f("var/log/apt/history.log", sha256="2"), f())))
    out = explain(a, b)
    assert not out.same and out.causes == (causes.APT_LOG,)
    (diff,) = out.layers
    assert diff.index == 2 and diff.total == 1 and diff.files[0].fields == ("content",)
    text = out.text()
    assert "/var/log/apt/history.log: content -> apt-log" in text
    assert causes.APT_LOG.fix in text


def test_same_entries_in_another_order_is_file_order_then_encoding() -> None:
    x, y = f("a"), f("b")
    out = explain(image("A", (layer("sha256:1", x, y),)), image("B", (layer("sha256:2", y, x),)))
    assert out.layers[0].cause is causes.FILE_ORDER and out.layers[0].total == 0
    out = explain(image("A", (layer("sha256:1", x),)), image("B", (layer("sha256:2", x),)))
    assert out.causes == (causes.ENCODING,)


def test_config_only_differences() -> None:
    a = image("A", (BASE,), created="2026-01-01T00:00:00Z")
    out = explain(a, image("B", (BASE,)))
    assert out.causes == (causes.CONFIG_TIMES,)
    assert [d.field for d in out.config] == ["created"]
    assert explain(a, a).same and "same config and layers" in explain(a, a).text()


def labels(**values: str) -> dict[str, Any]:
    return {"config": {"Labels": {f"io.github.lockpipe.{k}": v for k, v in values.items()}}}


def test_moved_base_engine_and_inputs_come_first() -> None:
    one = image("A", (BASE,), **labels(**{"base.busybox": "r@sha256:1", "fingerprint": "f"}))
    two = image("B", (layer("sha256:other", f("bin/busybox", sha256="zz")),),
                **labels(**{"base.busybox": "r@sha256:2", "fingerprint": "f"}))  # fmt: skip
    assert explain(one, two).causes[0] is causes.MOVED_BASE
    k1 = image("A", (BASE,), **labels(fingerprint="f", **{"build-key": "k1"}))
    k2 = image("B", (BASE,), **labels(fingerprint="f", **{"build-key": "k2"}))
    assert explain(k1, k2).causes == (causes.ENGINE,)
    f2 = image("B", (BASE,), **labels(fingerprint="g", **{"build-key": "k2"}))
    assert explain(k1, f2).causes == (causes.INPUTS,)


def test_merged_tree_applies_whiteouts_and_compare_trees_ignores_layering() -> None:
    lower = layer("sha256:1", f("etc/a"), f("etc/b"), f("opt/d/x"))
    # The opaque marker after opt/d/y in its own layer must not delete opt/d/y.
    upper = layer("sha256:2", f("etc/.wh.a"), f("opt/d/y"), f("opt/d/.wh..wh..opq"))
    a = image("A", (lower, upper))
    assert sorted(merged(a)) == ["etc/b", "opt/d/y"]
    b = image("B", (layer("sha256:3", f("opt/d/y"), f("etc/b")),))
    assert compare_trees(a, b).same
    c = image("C", (layer("sha256:4", f("opt/d/y", mtime=9), f("etc/b", uname="root")),))
    cmp = compare_trees(a, c, names=("buildah", "docker"))
    assert [(d.path, d.cause) for d in cmp.differing] == [
        ("etc/b", causes.ENCODING), ("opt/d/y", causes.TIMESTAMPS)
    ]  # fmt: skip
    assert compare_trees(a, c, ignore=frozenset({"mtime", "owner name"})).same
    assert "2 of 2 paths differ" in str(cmp)


def _tar(members: list[tuple[str, bytes]], compress: bool) -> io.BytesIO:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        d = tarfile.TarInfo("./app/")
        d.type, d.mode = tarfile.DIRTYPE, 0o40755
        tar.addfile(d)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1700000000
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("./app/link")
        link.type, link.linkname = tarfile.SYMTYPE, "x"
        tar.addfile(link)
    body = raw.getvalue()
    return io.BytesIO(gzip.compress(body, mtime=0) if compress else body)


@pytest.mark.parametrize("compress", [False, True])
def test_read_entries_hashes_and_marks_files(compress: bool) -> None:
    big = b"\0" * (1 << 20) + b"linked in /tmp/build-42/obj.o" + b"\0" * 100
    stream = _tar([("./app/x", b"built at Mon Nov 30 01:28:02 UTC 2026\n"),
                   ("./app/id", b"8c1f0f3e-1111-4222-8333-444455556666\n"),
                   ("./app/bin", big)], compress)  # fmt: skip
    entries = {e.path: e for e in read_entries(stream)}
    assert entries["app"].kind == "dir" and entries["app"].mode == 0o755
    assert entries["app/link"].kind == "symlink" and entries["app/link"].link == "x"
    assert entries["app/x"].clock == "01:28:02" and entries["app/x"].mtime == 1700000000
    assert entries["app/x"].head == b"built at Mon Nov"
    assert entries["app/id"].uuid == "8c1f0f3e-1111-4222-8333-444455556666"
    # The path straddles the first 1 MiB chunk's end: still found.
    assert entries["app/bin"].build_paths == ("/tmp/build-42",)
    assert entries["app/bin"].sha256 == hashlib.sha256(big).hexdigest()


def test_build_paths_inside_urls_are_not_build_paths() -> None:
    data = b'see https://example.com/build/docs and "http://h/tmp/x" but /tmp/build-7/o.c, ' + (
        b"file:///workspace/src/a.c"
    )
    assert build_paths(data) == ["/tmp/build-7", "/workspace/src"]


def test_clock_and_uuid_are_found_past_the_first_4_kib() -> None:
    body = b"\0" * 5000 + b"built 2026-11-30T01:02 " + b"\0" * 5000
    body += b"id 8c1f0f3e-1111-4222-8333-444455556666\n"
    (entry,) = [
        e for e in read_entries(_tar([("./app/late", body)], False)) if e.path == "app/late"
    ]
    assert entry.clock == "2026-11-30T01:02"
    assert entry.uuid == "8c1f0f3e-1111-4222-8333-444455556666"
    assert entry.head == b"\0" * 16


def test_export_space_is_checked_against_tmpdir() -> None:
    gz = "application/vnd.oci.image.layer.v1.tar+gzip"
    manifest = {"config": {"size": 100}, "layers": [
        {"mediaType": gz, "size": 1000}, {"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                          "size": 500}]}  # fmt: skip
    assert space_needed(manifest) == 100 + 3 * 1000 + 500
    check_space(3600, "img", where="/t", usage=lambda _: Usage(10**9, 0, 3600))
    with pytest.raises(DiskSpaceError) as info:
        check_space(3601, "docker://r/app@sha256:x", where="/small",
                    usage=lambda _: Usage(10**9, 0, 3600))  # fmt: skip
    text = str(info.value)
    assert "/small (TMPDIR)" in text and "docker://r/app@sha256:x" in text
    assert "set TMPDIR to a folder on a bigger disk" in text


def test_across_engines_ignores_owner_names_by_default() -> None:
    assert frozenset({"owner name"}) == TAR_ENCODING
    a = image("a", (layer("sha256:1", f("etc/b", uname="root"), f("etc/c", uid=5)),))
    b = image("b", (layer("sha256:2", f("etc/b"), f("etc/c")),))
    cmp = compare_trees(a, b, ignore=TAR_ENCODING)
    assert [(d.path, d.fields) for d in cmp.differing] == [("etc/c", ("owner",))]
