"""JSON nested too deeply for json's decoder (it recurses per level: some thousand ``[`` end
it in a RecursionError) is, in every file or answer lockpipe reads, one error naming the
file and the fix, or the file passed over where an unreadable one already is (issue 18)."""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from lockpipe.deploy.cdi import find_specs
from lockpipe.deploy.gate import check_built
from lockpipe.errors import LockpipeError
from lockpipe.lock.closure import parse_closure
from lockpipe.preflight import config
from lockpipe.publish.outputs import read_images
from lockpipe.refresh import firstseen
from lockpipe.registry.creds import credentials
from lockpipe.smoke.metrics import load_baselines
from lockpipe.smoke.report import read_records
from tests.unit.test_deploy_render import pinned

DEEP = "[" * 100_000


def deep(tmp_path: Path, name: str = "deep.json") -> Path:
    path = tmp_path / name
    path.write_text(DEEP)
    return path


READERS: dict[str, Callable[[Path], object]] = {
    "smoke.json (read by smoke and serve)": read_records,
    "smoke.json (deploy's gate)": lambda p: check_built(
        p, pinned("llama-cuda", "t"), served={}, force=False
    ),
    "smoke baselines": load_baselines,
    "preflight calibrations": config.load,
    "published images": read_images,
    "first-seen record": firstseen.load,
    "registry auth file": lambda p: credentials("r.example", {"REGISTRY_AUTH_FILE": str(p)}),
    "pip closure": lambda p: parse_closure(p.read_text(), str(p)),
}


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_a_deep_file_is_a_pipeline_error_naming_it(
    tmp_path: Path, reader: Callable[[Path], object]
) -> None:
    path = deep(tmp_path)
    with pytest.raises(LockpipeError) as info:
        reader(path)
    assert str(path) in str(info.value)


def test_a_deep_cdi_spec_is_passed_over_as_an_unreadable_one_is(tmp_path: Path) -> None:
    deep(tmp_path, "nvidia.json")
    (tmp_path / "other.json").write_text('{"kind": "nvidia.com/gpu"}')
    assert find_specs("nvidia.com/gpu", (tmp_path,)) == (tmp_path / "other.json",)


def test_a_deep_safetensors_header_is_a_format_error(tmp_path: Path) -> None:
    from lockpipe.payloads.safetensors import read_header

    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(DEEP)) + DEEP.encode())
    with pytest.raises(LockpipeError, match=r"model\.safetensors.*not JSON"):
        read_header(path)


def test_a_deep_document_in_an_oci_layout_is_an_engine_error(tmp_path: Path) -> None:
    from lockpipe.verify.tree import read_layout

    index = deep(tmp_path, "index.json")
    with pytest.raises(LockpipeError, match=re.escape(f"{index}: the file is nested too deeply")):
        read_layout(tmp_path, "localhost/x:1")
