"""Extended attributes of layer tar members are compared: file capabilities, SELinux labels
and ACLs travel as PAX ``SCHILY.xattr.*`` headers (``LIBARCHIVE.xattr.*`` from bsdtar).

Before, two images whose files differed only there read "the file trees agree".
"""

from __future__ import annotations

import base64
import io
import tarfile

from lockpipe.verify import causes
from lockpipe.verify.across import compare_trees
from lockpipe.verify.explain import explain
from lockpipe.verify.tree import ImageTree, Layer, read_entries

CAP = "\x01\x00\x00\x02\x00\x04\x00\x00" + "\x00" * 12  # cap_net_bind_service+ep
DATA = b"#!/bin/sh\necho hi\n"


def _layer(pax: dict[str, str], diff_id: str = "sha256:d") -> Layer:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, headers in (("usr/bin/server", pax), ("etc/plain", {})):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime, info.pax_headers = len(DATA), 0o755, 0, headers
            tar.addfile(info, io.BytesIO(DATA))
    buf.seek(0)
    return Layer(digest=diff_id, diff_id=diff_id, media_type="tar", entries=read_entries(buf))


def _tree(pax: dict[str, str], config: str = "sha256:aa", diff_id: str = "sha256:d") -> ImageTree:
    return ImageTree(ref="x", manifest_digest="m", config_digest=config, annotations={},
                     config={}, layers=(_layer(pax, diff_id),))  # fmt: skip


def test_a_capability_on_one_side_only_is_named_with_its_file() -> None:
    c = compare_trees(_tree({}), _tree({"SCHILY.xattr.security.capability": CAP}, "sha256:bb"),
                      names=("podman", "docker"))  # fmt: skip
    assert not c.same
    [diff] = c.differing
    assert (diff.path, diff.fields, diff.cause) == (
        "usr/bin/server",
        ("xattr security.capability",),
        causes.XATTRS,
    )
    assert "/usr/bin/server: xattr security.capability -> xattrs" in c.text()
    assert "the file trees agree" not in c.text()


def test_another_selinux_label_differs_and_equal_xattrs_agree() -> None:
    ours = {"SCHILY.xattr.security.selinux": "system_u:object_r:bin_t:s0\x00",
            "SCHILY.xattr.security.capability": CAP}  # fmt: skip
    theirs = {**ours, "SCHILY.xattr.security.selinux": "system_u:object_r:usr_t:s0\x00"}
    c = compare_trees(_tree(ours), _tree(theirs, "sha256:bb"))
    assert [(d.path, d.fields) for d in c.differing] == [
        ("usr/bin/server", ("xattr security.selinux",))
    ]
    assert compare_trees(_tree(ours), _tree(dict(ours), "sha256:bb")).same


def test_bsdtar_headers_read_as_the_same_xattrs() -> None:
    raw = CAP.encode("latin-1")
    bsdtar = {"LIBARCHIVE.xattr.security.capability": base64.b64encode(raw).decode()}
    tree = _tree(bsdtar)
    entry = tree.layers[0].entries[0]
    assert entry.xattrs == (("security.capability", raw),)
    assert compare_trees(tree, _tree({"SCHILY.xattr.security.capability": CAP}, "sha256:bb")).same


def test_the_layer_report_names_the_xattr_too() -> None:
    acl = {"SCHILY.xattr.system.posix_acl_access": "\x02\x00\x00\x00"}
    report = explain(_tree({}), _tree(acl, "sha256:bb", diff_id="sha256:e"))
    [layer] = report.layers
    assert [(f.path, f.fields) for f in layer.files] == [
        ("usr/bin/server", ("xattr system.posix_acl_access",))
    ]
    assert layer.cause is causes.XATTRS
