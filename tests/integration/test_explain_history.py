"""Differences explained down to what differs: a planted file, and a history-only difference.

Real buildah, run directly (not through lockpipe, whose build avoids the
history difference on purpose), each build in a containers storage of its own
(vfs, under the test's tmp dir): ``CONTAINERS_STORAGE_CONF`` for buildah and
skopeo, and skopeo's ``containers-storage:[vfs@GRAPHROOT+RUNROOT]ID`` reference
(containers-transports(5)) for the export that ``explain`` reads.

The history case is two hosts in small: the same Containerfile, the base
pinned by digest, but the second storage got the base first under another
name. buildah 1.28 records the base by its first local name and each later step
by the previous intermediate image's ID, so only history comments differ; the
explanation must say so, with the host-history cause, and never "same". buildah
1.39 (Debian 13) gives one image there (it names the base as the Containerfile
does); the test then plants 1.28's comment in a copy of the image, as an OCI
layout whose layers and other config bytes are the build's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from lockpipe.verify import causes
from lockpipe.verify.explain import Explanation, explain
from lockpipe.verify.tree import exported
from tests.policy import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.buildah]


@dataclass(frozen=True)
class Storage:
    """A containers storage of its own, for buildah and skopeo."""

    root: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf")}

    def source(self, image_id: str) -> str:
        """skopeo's reference to an image in this storage, whatever storage.conf says."""
        return f"containers-storage:[vfs@{self.root / 'g'}+{self.root / 'r'}]{image_id}"

    def run(self, *argv: str) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr[-2000:]}"
        return done.stdout

    def build(self, context: Path, *options: str) -> str:
        """``buildah bud`` of ``context``; the image ID."""
        iid = self.root / "iid"
        self.run("buildah", "bud", "--isolation", "chroot", "--timestamp", "0", *options,
                 "--iidfile", str(iid), str(context))  # fmt: skip
        return iid.read_text().strip().removeprefix("sha256:")


def storage(root: Path) -> Storage:
    root.mkdir(parents=True)
    (root / "storage.conf").write_text(
        f'[storage]\ndriver = "vfs"\ngraphroot = "{root / "g"}"\nrunroot = "{root / "r"}"\n'
    )
    return Storage(root)


def context(root: Path, base: tuple[str, str], run: str) -> Path:
    root.mkdir(parents=True)
    (root / "Containerfile").write_text(f"FROM {base[0]}@{base[1]}\n{run}")
    return root


def explained(a: str, b: str) -> Explanation:
    """The explanation of the images at skopeo sources ``a`` and ``b``."""
    with exported(a) as x, exported(b) as y:
        return explain(x, y)


def _blob(layout: Path, digest: str) -> Path:
    return layout / "blobs" / "sha256" / digest.removeprefix("sha256:")


def base_named(store: Storage, image_id: str, layout: Path, name: str) -> str:
    """A copy of the image, in an OCI layout, whose history names its base ``name`` where
    the build named it by its pinned reference: what buildah 1.28 wrote on a host whose
    storage held the base under that name first. Layers and every other byte of the config
    are kept; the skopeo source of the copy."""
    store.run("skopeo", "copy", "--quiet", store.source(image_id), f"oci:{layout}:planted")
    index = json.loads((layout / "index.json").read_text())
    (entry,) = index["manifests"]
    manifest = json.loads(_blob(layout, entry["digest"]).read_text())
    raw = _blob(layout, manifest["config"]["digest"]).read_bytes()
    (said,) = [h["comment"] for h in json.loads(raw)["history"]
               if h.get("comment", "").startswith("FROM ")]  # fmt: skip
    planted = raw.replace(json.dumps(said).encode(), json.dumps(f"FROM {name}").encode())
    assert planted != raw, said
    manifest["config"].update(digest=_put(layout, planted), size=len(planted))
    text = json.dumps(manifest).encode()
    entry.update(digest=_put(layout, text), size=len(text))
    (layout / "index.json").write_text(json.dumps(index))
    return f"oci:{layout}:planted"


def _put(layout: Path, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _blob(layout, digest).write_bytes(data)
    return digest


@pytest.fixture
def buildah() -> None:
    if shutil.which("buildah") is None or shutil.which("skopeo") is None:
        unavailable("buildah and skopeo are needed")


@pytest.mark.usefixtures("buildah")
def test_a_planted_date_is_explained_down_to_the_file(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    store = storage(tmp_path / "store")
    ctx = context(tmp_path / "ctx", busybox_base, "RUN sleep 1; date > /built-at\n")
    first, second = (store.build(ctx, "--no-cache") for _ in range(2))
    assert first != second

    out = explained(store.source(first), store.source(second))

    text = out.text()
    assert not out.same and "same" not in text.splitlines()[0], text
    assert out.causes[0] is causes.TIMESTAMPS, text
    (layer,) = out.layers
    assert layer.index == 2 and layer.files[0].path == "built-at", text  # busybox is layer 1
    assert layer.files[0].cause is causes.TIMESTAMPS and "content" in layer.files[0].fields
    assert "/built-at: content -> timestamps" in text
    # The config names the layer's diff ID, with the layer's cause, and nothing else.
    assert [(d.field, d.cause) for d in out.config if d.field.startswith("rootfs")] == [
        ("rootfs.diff_ids[2]", causes.TIMESTAMPS)
    ], text


@pytest.mark.usefixtures("buildah")
def test_a_history_only_difference_is_explained_as_history(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    ref, digest = busybox_base
    here, there = storage(tmp_path / "here"), storage(tmp_path / "there")
    other = f"{ref.partition('/')[0]}/other/name:1"
    # The second storage holds the pinned base first under another name.
    pinned = f"{ref.rpartition(':')[0]}@{digest}"  # skopeo refuses a tag with a digest
    there.run("skopeo", "copy", "--quiet", "--src-tls-verify=false", f"docker://{pinned}",
              f"containers-storage:{other}")  # fmt: skip
    ctx = context(tmp_path / "ctx", busybox_base, "RUN echo one > /one\nRUN echo two > /two\n")
    a = here.build(ctx, "--layers", "--tls-verify=false")
    b = there.build(ctx, "--layers", "--tls-verify=false")
    if a != b:  # buildah 1.28 (Debian 12): the second storage's names reached the history
        out = explained(here.source(a), there.source(b))
    else:  # buildah 1.39 (Debian 13) names the base as the Containerfile does, on any host
        out = explained(here.source(a), base_named(here, a, tmp_path / "planted", other))

    text = out.text()
    assert not out.same and not out.layers, text  # every layer byte-identical
    assert "same config" not in text and "same" not in text.splitlines()[0], text
    assert out.causes == (causes.HOST_HISTORY,), text
    assert out.config and {d.field.rpartition(".")[2] for d in out.config} == {"comment"}, text
    assert all(d.field.startswith("history[") for d in out.config), text
    comments = {d.field: (d.a, d.b) for d in out.config}
    assert f"FROM {other}" in [y for _, y in comments.values()], text
    assert any(x.startswith("FROM ") and "other/name" not in x for x, _ in comments.values())
    assert f"cause host-history: {causes.HOST_HISTORY.why}" in text
    for field, (x, y) in comments.items():
        assert f"config {field}: {x} vs {y} -> host-history" in text
