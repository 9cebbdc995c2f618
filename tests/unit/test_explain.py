"""The cause classifier and the explainer, on synthetic entries and in-memory tars."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import replace
from typing import Any

import pytest

from lockpipe.errors import DiskSpaceError
from lockpipe.verify import causes
from lockpipe.verify.across import TAR_ENCODING, compare_trees
from lockpipe.verify.causes import classify, differing_fields, pyc_detail
from lockpipe.verify.explain import explain
from lockpipe.verify.fields import render, shorten
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


def digest(doc: Any) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def image(ref: str, layers: tuple[Layer, ...], **config: Any) -> ImageTree:
    """An image as tree.py reads one: the config names the diff IDs, the digests are of the
    documents, and the manifest names the config and the layer blobs."""
    cfg = {"created": "2023-11-14T22:13:20Z", "history": [], "config": {"Labels": {}},
           "rootfs": {"type": "layers", "diff_ids": [x.diff_id for x in layers]}}  # fmt: skip
    cfg.update(config)
    blobs = [{"mediaType": x.media_type, "digest": x.digest} for x in layers]
    manifest = {"schemaVersion": 2, "config": {"digest": digest(cfg)}, "layers": blobs}
    return ImageTree(ref=ref, manifest_digest=digest(manifest), config_digest=digest(cfg),
                     annotations={}, config=cfg, layers=layers, manifest=manifest)  # fmt: skip


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
    assert space_needed(manifest, "img") == 100 + 3 * 1000 + 500
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


def says_same(text: str) -> bool:
    """The verdict (the first line) or any line but a fix says "same"."""
    lines = [x.partition("; fix: ")[0] for x in text.splitlines()]
    return any("same" in x for x in lines)


HOSTILE = [  # two buildah builds of one Containerfile in two storages (seen in CI)
    ("FROM 127.0.0.1:5000/lockpipe-test/moved-d2f4e7f6:1",
     "FROM 127.0.0.1:5000/lockpipe-test/busybox:1"),
    ("FROM e350572186f2", "FROM bf0c3b7cea4b"),
]  # fmt: skip


def steps(*comments: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"created": "1970-01-01T00:00:00Z", "created_by": f"/bin/sh -c step {i}",
             "comment": c, **extra} for i, c in enumerate(comments, 1)]  # fmt: skip


def test_every_config_key_is_compared_listed_or_not() -> None:
    a = image("A", (BASE,), os="linux", custom={"deep": [1, 2]},
              config={"Labels": {}, "StopSignal": "SIGTERM", "Volumes": {"/data": {}},
                      "Env": ["PATH=/bin", "A=1"]})  # fmt: skip
    b = image("B", (BASE,), os="freebsd", custom={"deep": [1, 3]},
              config={"Labels": {}, "StopSignal": "SIGKILL",
                      "Env": ["PATH=/bin", "A=2", "B=3"]})  # fmt: skip
    out = explain(a, b)
    fields = {d.field: (d.a, d.b, d.cause) for d in out.config}
    assert fields == {
        "config.StopSignal": ("SIGTERM", "SIGKILL", causes.CONFIG),
        "config.Volumes": ('{"/data": {}}', "(none)", causes.CONFIG),
        "env A": ("1", "2", causes.CONFIG),
        "env B": ("(none)", "3", causes.CONFIG),
        "os": ("linux", "freebsd", causes.PLATFORM),
        "custom.deep": ("[1, 2]", "[1, 3]", causes.CONFIG),
    }
    assert out.causes == (causes.CONFIG, causes.PLATFORM) and not out.layers
    text = out.text(limit=10)
    assert "config config.StopSignal: SIGTERM vs SIGKILL -> config" in text
    assert not says_same(text)


def test_a_history_comment_is_host_history_with_both_values() -> None:
    a = image("A", (BASE,), history=steps(*(x for x, _ in HOSTILE)))
    b = image("B", (BASE,), history=steps(*(y for _, y in HOSTILE)))
    out = explain(a, b)
    assert [(d.field, d.cause) for d in out.config] == [
        ("history[1].comment", causes.HOST_HISTORY), ("history[2].comment", causes.HOST_HISTORY)
    ]  # fmt: skip
    assert out.causes == (causes.HOST_HISTORY,)
    text = out.text()
    for x, y in HOSTILE:
        assert f"{x} vs {y} -> host-history" in text
    assert f"cause host-history: {causes.HOST_HISTORY.why}; fix: {causes.HOST_HISTORY.fix}" in text
    assert not says_same(text)


@pytest.mark.parametrize(
    ("a", "b", "cause"),
    [
        (*HOSTILE[0], causes.HOST_HISTORY),
        ("FROM r/b@sha256:" + "1" * 64, "FROM r/b@sha256:" + "2" * 64, causes.MOVED_BASE),
        ("FROM r/b@sha256:" + "1" * 64, "FROM other/b:1", causes.HOST_HISTORY),
        ("commit of 0123456789ab", "commit of ba9876543210", causes.HOST_HISTORY),
        ("buildkit.dockerfile.v0", "FROM busybox", causes.CONFIG),
    ],
)  # fmt: skip
def test_history_comment_causes(a: str, b: str, cause: causes.Cause) -> None:
    assert causes.comment_cause(a, b) is cause


def test_history_entries_count_and_every_field() -> None:
    a = image("A", (BASE,), history=steps("x", "y"))
    longer = steps("x", "y", "z")
    longer[0].update(created="2026-01-01T00:00:00Z", author="me", empty_layer=True)
    longer[1]["created_by"] = "/bin/sh -c other"
    out = explain(a, image("B", (BASE,), history=longer))
    assert [(d.field, d.a, d.b, d.cause) for d in out.config[:2]] == [
        ("history", "2 entries", "3 entries", causes.STEP),
        ("history[1].created", "1970-01-01T00:00:00Z", "2026-01-01T00:00:00Z",
         causes.CONFIG_TIMES),
    ]  # fmt: skip
    rest = {d.field: d.cause for d in out.config[2:]}
    assert rest == {"history[1].author": causes.CONFIG, "history[1].empty_layer": causes.CONFIG,
                    "history[2].created_by": causes.STEP, "history[3]": causes.STEP}  # fmt: skip
    assert out.causes == (causes.STEP, causes.CONFIG_TIMES, causes.CONFIG)
    assert "... and 1 more config field(s)" in out.text(limit=5)


def test_digests_that_differ_without_a_field_say_bytes_never_same() -> None:
    a = image("A", (BASE,))
    b = replace(a, ref="B", config_digest="sha256:" + "f" * 64)  # other bytes, same fields
    out = explain(a, b)
    assert not out.same and not out.same_config and out.config == ()
    assert out.causes == (causes.CONFIG_BYTES,)
    text = out.text()
    assert "the configs differ in bytes only (key order or whitespace): no field does" in text
    assert not says_same(text)


def test_one_config_in_two_manifests_names_the_manifest_fields() -> None:
    gz = replace(
        BASE, digest="sha256:gzipped", media_type="application/vnd.oci.image.layer.v1.tar+gzip"
    )
    a, b = image("A", (BASE,)), image("B", (gz,))
    out = explain(a, b)
    assert out.same_config and not out.same and out.config == () and not out.layers
    assert [(d.field, d.b) for d in out.manifest] == [
        ("layers[1].mediaType", gz.media_type), ("layers[1].digest", "sha256:gzipped")
    ]  # fmt: skip
    assert out.causes == (causes.MANIFEST,)
    text = out.text()
    assert "one config (" in text and "manifest layers[1].mediaType:" in text
    assert not says_same(text)


def test_same_is_said_exactly_when_the_digests_are_equal() -> None:
    trees = [
        image("A", (BASE,)), image("B", (BASE,), created="2026-01-01T00:00:00Z"),
        image("C", (BASE,), history=steps("FROM x")), image("D", (BASE,), history=steps("FROM y")),
        image("E", (layer("sha256:2", f()),)),
        replace(image("F", (BASE,)), config_digest="sha256:" + "e" * 64),
        image("G", (replace(BASE, digest="sha256:gz"),)),
    ]  # fmt: skip
    for x in trees:
        for y in trees:
            out = explain(x, y)
            equal = (x.config_digest, x.manifest_digest) == (y.config_digest, y.manifest_digest)
            assert out.same is equal and says_same(out.text()) is equal, out.text()


def test_agreeing_trees_of_two_images_name_the_config_not_same() -> None:
    a = image("A", (BASE,), **labels(fingerprint="f", **{"build-key": "k1"}))
    b = image("B", (BASE,), **labels(fingerprint="f", **{"build-key": "k2"}))
    cmp = compare_trees(a, b, names=("buildah", "podman"))
    assert cmp.same and not cmp.images.same
    text = cmp.text()
    assert text.startswith("buildah vs podman: the file trees agree (1 paths), the images do not")
    assert "config label io.github.lockpipe.build-key: k1 vs k2 -> engine" in text
    assert not says_same(text)
    assert "the same image" in compare_trees(a, a).text()


def test_field_names_and_long_values_show_what_differs() -> None:
    assert render(("config", "Volumes", "/data")) == 'config.Volumes["/data"]'
    assert render(("os.version",)) == "os.version"
    assert render(("history", 3, "comment")) == "history[3].comment"
    assert render(("config", "Labels", "a.b")) == "label a.b"
    prefix = "/bin/sh -c #(nop) LABEL " + "x" * 200
    a, b = shorten(prefix + " key=1 tail", prefix + " key=2 tail")
    assert "key=1" in a and "key=2" in b and a.startswith("...")
    assert shorten("", None) == ('""', "null")
    assert causes.field_cause(("os.version",), "1", "2") is causes.PLATFORM
    assert causes.field_cause(("rootfs", "type"), "layers", "x") is causes.CONTENT
