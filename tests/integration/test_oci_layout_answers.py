"""An image whose manifest or config is of another shape than OCI's, read as ``explain`` and
``verify --rebuild`` read it (:func:`lockpipe.verify.tree.exported`, the real skopeo on an
``oci:`` layout): one line naming the image and what is wrong, never a traceback (issue 18)."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from lockpipe.errors import EngineError
from lockpipe.verify.tree import exported, read_layout
from tests.policy import unavailable
from tests.registry_servers import OCI_MANIFEST
from tests.registry_servers import _blob as blob

pytestmark = pytest.mark.integration


def layout(root: Path, manifest: str) -> str:
    """An OCI layout at ``root`` of one image, ``manifest`` its manifest's JSON text as is
    (``{config}`` stands for a config's descriptor, ``{layer}`` for an empty layer's);
    skopeo's source for it."""
    if shutil.which("skopeo") is None:
        unavailable("skopeo is needed to read an OCI layout")
    config = blob(root, b'{"rootfs": {"type": "layers", "diff_ids": []}}')
    layer = blob(root, b"\0" * 1024)  # an empty tar
    text = manifest.replace("{config}", json.dumps(config)).replace("{layer}", json.dumps(layer))
    top = {"mediaType": OCI_MANIFEST, **blob(root, text.encode())}
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return f"oci:{root}"


def _manifest(config: str, layer_size: str) -> str:
    return (
        f'{{"schemaVersion": 2, "mediaType": "{OCI_MANIFEST}", "config": {config}, '
        f'"layers": [{{"mediaType": "application/vnd.oci.image.layer.v1.tar", '
        f'"digest": "sha256:{"0" * 64}", "size": {layer_size}}}]}}'
    )


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        (_manifest("{config}", '"12x"'), "layers[0].size is a string, not an integer"),
        (_manifest("{config}", "1e999"), "layers[0].size is a number, not an integer"),
        (_manifest("{config}", "true"), "layers[0].size is true/false, not an integer"),
        (_manifest("{config}", "-1"), "layers[0].size is -1, not a size (0 to 2**63 - 1)"),
        (_manifest("{config}", str(2**63)), f"layers[0].size is {2**63}, not a size"),
        (_manifest("{config}", "9" * 4000), "layers[0].size is 4000 digits long, not a size"),
        (_manifest('"x"', "12"), "config is a string, not an object"),
        (_manifest('{"size": "12x"}', "12"), "config.size is a string, not an integer"),
        ('{"schemaVersion": 2, "layers": ["x"]}', "layers[0] is a string, not an object"),
        ('{"schemaVersion": 2, "layers": {}}', "layers is an object, not a list"),
    ],
)
def test_a_manifest_whose_sizes_are_no_sizes_is_one_line_naming_the_image(
    tmp_path: Path, manifest: str, words: str
) -> None:
    """``int("12x")``, ``int(1e999)`` and ``"x".get`` were tracebacks before the export."""
    source = layout(tmp_path / "oci", manifest)
    with pytest.raises(EngineError) as info, exported(source):
        pass
    text = str(info.value)
    assert text.startswith(f"{source}: {words}"), text
    assert "check the image at its source" in text


DIFF_ID = f"sha256:{'0' * 64}"  # not checked on read: skopeo copies the layout as it is
ROOTFS = f'"rootfs": {{"type": "layers", "diff_ids": ["{DIFF_ID}"]}}'
CONFIG = "{" + ROOTFS + "}"
MANIFEST = f'{{"schemaVersion": 2, "mediaType": "{OCI_MANIFEST}", "config": {{config}}, '
MANIFEST += '"layers": {layers}}'


def _tar(mtime: str) -> bytes:
    """A layer of one file, ``app/x``, whose PAX header gives it ``mtime`` as it is."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("app/x")
        info.size, info.pax_headers = 2, {"mtime": mtime}
        tar.addfile(info, io.BytesIO(b"hi"))
    return raw.getvalue()


def image(root: Path, config: str, layer: bytes, manifest: str = "") -> str:
    """An OCI layout at ``root`` of one image of ``config`` (its JSON text) and ``layer``;
    ``manifest``, where given, is the manifest's text with ``{layers}`` standing for the
    layer's descriptors. skopeo's source for it."""
    if shutil.which("skopeo") is None:
        unavailable("skopeo is needed to read an OCI layout")
    descriptor = {"mediaType": "application/vnd.oci.image.layer.v1.tar", **blob(root, layer)}
    config_descriptor = {"mediaType": "application/vnd.oci.image.config.v1+json",
                         **blob(root, config.encode())}  # fmt: skip
    text = (manifest or MANIFEST).replace("{config}", json.dumps(config_descriptor))
    text = text.replace("{layers}", json.dumps([descriptor]))
    top = {"mediaType": OCI_MANIFEST, **blob(root, text.encode())}
    (root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [top]}))
    return f"oci:{root}"


@pytest.mark.parametrize(
    ("config", "manifest", "words"),
    [
        ('{"rootfs": "x"}', "", "rootfs is a string, not an object"),
        ('{"rootfs": {"diff_ids": "x"}}', "", "rootfs.diff_ids is a string, not a list"),
        ('{"rootfs": {"diff_ids": [1]}}', "", "rootfs.diff_ids[0] is an integer, not a string"),
        ("[]", "", "the file is a list, not an object"),
        ("{" + ROOTFS + ', "config": []}', "", "config is a list, not an object"),
        ("{" + ROOTFS + ', "config": {"Labels": []}}', "",
         "config.Labels is a list, not an object"),
        ("{" + ROOTFS + ', "config": {"Labels": {"a": 1}}}', "",
         "config.Labels.a is an integer, not a string"),
        ("{" + ROOTFS + ', "history": {}}', "", "history is an object, not a list"),
        ("{" + ROOTFS + ', "history": [1]}', "", "history[0] is an integer, not an object"),
        ("{" + ROOTFS + ', "history": [{"comment": 5}]}', "",
         "history[0].comment is an integer, not a string"),
    ],
)  # fmt: skip
def test_a_config_or_manifest_of_another_shape_is_one_line_naming_the_image(
    tmp_path: Path, config: str, manifest: str, words: str
) -> None:
    """``"rootfs": "x"`` was an AttributeError; ``"diff_ids": "x"`` was read as one layer
    whose diff_id is ``x``; labels or history of another shape were explain's AttributeError
    or TypeError."""
    source = image(tmp_path / "oci", config, _tar("1"), manifest)
    with pytest.raises(EngineError) as info, exported(source):
        pass
    text = str(info.value)
    assert text.startswith(f"{source}: "), text
    assert f": {words}; check the image at its source" in text


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        ('{"config": "x", "layers": {layers}}', "config is a string, not an object"),
        ('{"config": {config}, "layers": [{"digest": 1}]}',
         "layers[0].digest is an integer, not a string"),
        ('{"config": {config}, "layers": {layers}, "annotations": []}',
         "annotations is a list, not an object"),
        ('{"config": {config}, "layers": {layers}, "annotations": {"a": 1}}',
         "annotations.a is an integer, not a string"),
        ('{"config": {config}, "layers": [{"digest": "sha256:../../../etc/passwd"}]}',
         "the digest 'sha256:../../../etc/passwd' is not sha256:<64 hex>"),
        ('{"config": {"digest": "md5:x"}, "layers": {layers}}',
         "the digest 'md5:x' is not sha256:<64 hex>"),
    ],
)  # fmt: skip
def test_a_manifest_skopeo_would_not_copy_is_one_line_as_read_layout_reads_it(
    tmp_path: Path, manifest: str, words: str
) -> None:
    """skopeo refuses to copy these; read_layout, reading a layout it did not write, says so
    in the same words rather than with a TypeError or an AttributeError."""
    image(tmp_path / "oci", CONFIG, _tar("1"), manifest)
    with pytest.raises(EngineError) as info:
        read_layout(tmp_path / "oci", "localhost/x:1")
    text = str(info.value)
    assert text.startswith("localhost/x:1: manifest sha256:"), text
    assert f": {words}; check the image at its source" in text


@pytest.mark.parametrize("mtime", ["1e999", "-1e999", "nan", "1e300"])
def test_a_member_whose_mtime_is_no_time_is_one_line_naming_the_layer_and_member(
    tmp_path: Path, mtime: str
) -> None:
    """A PAX mtime of 1e999 was int(inf), an OverflowError; nan a ValueError."""
    source = image(tmp_path / "oci", CONFIG, _tar(mtime))
    with pytest.raises(EngineError) as info, exported(source):
        pass
    text = str(info.value)
    assert text.startswith(f"{source}: layer 1 of 1 (sha256:"), text
    assert f"'app/x' has the mtime {float(mtime)}, not a time" in text


def test_a_layer_that_is_no_tar_is_one_line_naming_the_layer(tmp_path: Path) -> None:
    """tarfile's ReadError was a traceback."""
    source = image(tmp_path / "oci", CONFIG, b"no tar at all")
    with pytest.raises(EngineError) as info, exported(source):
        pass
    text = str(info.value)
    assert text.startswith(f"{source}: layer 1 of 1 (sha256:"), text
    assert "is not a tar" in text
