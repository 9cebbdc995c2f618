"""An image whose manifest or config is of another shape than OCI's, read as ``explain`` and
``verify --rebuild`` read it (:func:`lockpipe.verify.tree.exported`, the real skopeo on an
``oci:`` layout): one line naming the image and what is wrong, never a traceback (issue 18)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lockpipe.errors import EngineError
from lockpipe.verify.tree import exported
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
