from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.engines.base import Mount
from pipeline.errors import SmokeConfigError, SmokeError
from pipeline.lock.model import load_lock
from pipeline.smoke.config import load_smoke
from pipeline.smoke.runner import container_command, needs_gpu, run_spec

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
STORE = Path("/var/lib/lockpipe/payloads")


def _paths(target: str) -> dict[str, Path]:
    t = LOCK.target(target)
    return {
        p: STORE / f"models--{LOCK.payloads[p].repository.replace('/', '--')}/snapshots/r/f"
        for p in t.payloads
    }


def test_payload_placeholders_become_paths_under_the_store_mount() -> None:
    cmd = container_command(LOCK.target("llama-cuda-mtp"), _paths("llama-cuda-mtp"), STORE)
    assert cmd[:3] == (
        "llama-server",
        "-m",
        "/store/models--unsloth--gemma-4-12b-it-GGUF/snapshots/r/f",
    )
    assert cmd[cmd.index("--model-draft") + 1].startswith("/store/models--unsloth--")
    assert "--spec-type" in cmd and "{payload" not in " ".join(cmd)


def test_payload_dir_placeholder_names_the_folder_inside_json() -> None:
    cmd = container_command(LOCK.target("frank-small"), _paths("frank-small"), STORE)
    assert cmd[2] == "/store/models--google--gemma-4-12B-it-qat-w4a16-ct/snapshots/r"
    spec = json.loads(cmd[cmd.index("--speculative-config") + 1])
    assert spec["model"] == (
        "/store/models--google--gemma-4-12B-it-qat-q4_0-unquantized-assistant/snapshots/r"
    )


def test_a_placeholder_for_a_payload_the_target_lacks_is_named() -> None:
    with pytest.raises(SmokeError, match=r"\{payload:gemma-4-12b-q4_k_m\}.*add it there"):
        container_command(LOCK.target("llama-cpu"), {}, STORE)


def test_run_spec_mounts_the_store_read_only_and_publishes_the_serve_port() -> None:
    target = LOCK.target("llama-cpu")
    spec = run_spec(target, "sha256:" + "1" * 64, ("llama-server", "-m", "x"), STORE, 18080)
    assert spec.entrypoint == ("llama-server",) and spec.command == ("-m", "x")
    assert spec.ports == {8080: 18080}
    assert spec.mounts == (Mount(STORE, "/store", read_only=True),)


def test_which_targets_need_a_gpu() -> None:
    assert {n: needs_gpu(t) for n, t in LOCK.targets.items()} == {
        "frank-small": True, "llama-cuda": True, "llama-cuda-mtp": True, "llama-cpu": False,
    }  # fmt: skip


def test_committed_smoke_expectations_cover_every_target() -> None:
    specs = load_smoke(REPO / "locks" / "smoke.json")
    assert set(specs) == set(LOCK.targets)
    assert specs["frank-small"].audio is not None and specs["frank-small"].image is not None
    assert specs["frank-small"].probes["pp@67k"].value == 1293
    assert specs["frank-small"].probes["accept"].value == 2.80


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ({"probes": {}}, "targets.x.generation: needs at least one prompt"),
        ({"probes": {}, "generation": [{"prompt": "p", "expect": []}]}, "must be a non-empty list"),
        ({"probes": {}, "generation": [{"prompt": "p", "expect": ["a"]}], "image": {"prompt": "p"}},
         'targets.x.image: needs "prompt", "expect" and "rgb"'),
    ],
)  # fmt: skip
def test_malformed_expectations_name_file_and_key(
    tmp_path: Path, target: dict[str, object], message: str
) -> None:
    path = tmp_path / "smoke.json"
    path.write_text(json.dumps({"version": 1, "targets": {"x": target}}))
    with pytest.raises(SmokeConfigError, match=message):
        load_smoke(path)


def test_the_cli_offers_every_engine() -> None:
    from pipeline.cli.options import ENGINE_NAMES
    from pipeline.engines import ENGINES

    assert tuple(ENGINES) == ENGINE_NAMES


def test_the_cli_default_connections_is_the_downloaders() -> None:
    import argparse

    from pipeline.cli.options import add_payload_options
    from pipeline.payloads.settings import DEFAULT_CONNECTIONS

    parser = argparse.ArgumentParser()
    add_payload_options(parser)
    assert parser.parse_args([]).connections == DEFAULT_CONNECTIONS
