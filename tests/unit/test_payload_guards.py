"""Guards that must hold in every interpreter mode: no partial digest, no assert-only checks."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockpipe.errors import FetchError
from lockpipe.payloads.hasher import OrderedHasher
from lockpipe.payloads.ranges import RangeSet

ROOT = Path(__file__).parents[2]
PAYLOADS = ROOT / "lockpipe" / "payloads"


def test_hasher_result_raises_when_hashing_has_not_finished(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"\0" * 4096)
    fd = os.open(path, os.O_RDONLY)
    h = OrderedHasher(fd, 4096, RangeSet(), memory_cap=1 << 20)
    h.feed(0, b"\0" * 1024)  # the rest never comes: the thread waits for byte 1024
    try:
        with pytest.raises(FetchError, match=r"not finished after 0.2 s \(1,024 of 4,096 bytes"):
            h.result(0.2)
    finally:
        h.stop()
        os.close(fd)


def test_no_assert_in_the_payload_package() -> None:
    """`python -O` removes asserts: a check written as one vanishes in production."""
    found = [
        f"{py.relative_to(ROOT)}:{node.lineno}"
        for py in sorted(PAYLOADS.glob("*.py"))
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8")))
        if isinstance(node, ast.Assert)
    ]
    assert not found, f"validate with an explicit check and a pipeline error: {found}"


CHECK_INDEX = """
import json, sys
from pathlib import Path
from lockpipe.lock.model import Payload
from lockpipe.payloads.checks import check_index
index = Payload.one_file(
    name="idx", repository="o/n", revision="a" * 40, filename="model.safetensors.index.json",
    size=1, sha256="b" * 64, role="model", format="json",
)
print(json.dumps(check_index(index, Path(sys.argv[1]), {})))
"""


@pytest.mark.parametrize(
    "doc",
    [
        {"weight_map": ["model-00001.safetensors"]},  # a list, not an object
        {"weight_map": {"w": ["model-00001.safetensors"]}},  # a shard that is not a name
        {"weight_map": "model-00001.safetensors"},
        ["weight_map"],
    ],
)
def test_a_malformed_index_is_a_problem_under_python_O_too(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps(doc))
    done = subprocess.run(
        [sys.executable, "-O", "-c", CHECK_INDEX, str(path)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (problem,) = json.loads(done.stdout)
    assert problem.startswith("payloads.idx: ") and str(path) in problem
    assert "no weight_map object" in problem and "check its filename and sha256" in problem
