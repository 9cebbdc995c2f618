"""Snapshot payloads without a network: store layout, git blob ids, pins, folder checks."""

from __future__ import annotations

import dataclasses
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import LockError, SmokeError
from lockpipe.lock.model import Payload, PayloadFile, Role, load_lock, parse_lock
from lockpipe.payloads import store as st
from lockpipe.payloads.blobs import blobs_of, digest_file, git_blob_id
from lockpipe.payloads.checks import check_targets
from lockpipe.payloads.selection import check_pinned
from lockpipe.payloads.snapshot import check_snapshot, missing_files, modalities_of
from lockpipe.smoke.runner import container_command

LOCK_PATH = Path(__file__).parents[2] / "locks" / "digests.json"
LOCK = load_lock(LOCK_PATH)
REV = "a" * 40
SHA = "b" * 64
# A real compressed-tensors w4a16 quantization_config (llm-compressor's output shape).
W4A16: dict[str, Any] = {
    "config_groups": {
        "group_0": {
            "input_activations": None, "output_activations": None, "targets": ["Linear"],
            "weights": {"actorder": None, "block_structure": None, "dynamic": False,
                        "group_size": 128, "num_bits": 4, "observer": "minmax",
                        "observer_kwargs": {}, "strategy": "group", "symmetric": True,
                        "type": "int"},
        }
    },
    "format": "pack-quantized", "ignore": ["lm_head"], "kv_cache_scheme": None,
    "quant_method": "compressed-tensors", "quantization_status": "compressed",
}  # fmt: skip
CT4 = {"format": "compressed-tensors", "bits": 4}


def snap(files: dict[str, Any], role: Role = "model", **expect: Any) -> Payload:
    pins = tuple(
        PayloadFile(path=p, size=1, **({"git_sha1": "c" * 40} if v is None else v))
        for p, v in sorted(files.items())
    )
    return Payload(name="s", repository="org/name", revision=REV, files=pins, snapshot=True,
                   role=role, format="safetensors", expect=expect)  # fmt: skip


def write_st(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> Path:
    """A valid safetensors file (zeros) with these tensors (dtype, shape)."""
    width = {"BF16": 2, "F32": 4, "I32": 4}
    head, pos = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = width[dtype] * (shape[0] if shape else 1)
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [pos, pos + n]}
        pos += n
    raw = json.dumps(head).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * pos)
    return path


def folder(tmp: Path, config: dict[str, Any] | None = None, **more: Any) -> dict[str, Path]:
    """A minimal loadable model folder; ``more`` adds files (a dict: JSON; None: removes)."""
    base: dict[str, Any] = {
        "config.json": config or {"architectures": ["BertModel"], "model_type": "bert"},
        "tokenizer.json": {"version": "1.0"},
        "tokenizer_config.json": {"chat_template": "{{ messages }}"},
    }
    out = {}
    for name, doc in {**base, **more}.items():
        if doc is not None:
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp / name).write_text(json.dumps(doc))
            out[name] = tmp / name
    out["model.safetensors"] = write_st(tmp / "model.safetensors", {"w": ("BF16", [4])})
    return out


def problems(p: Payload, files: dict[str, Path]) -> str:
    return "\n".join(check_snapshot(p, files).problems)


# ---- store layout ---------------------------------------------------------------------


def test_a_snapshot_is_its_folder_and_each_file_a_link_into_blobs(tmp_path: Path) -> None:
    p = snap({"config.json": None, "1_Pooling/config.json": None, "model.safetensors":
              {"sha256": SHA}})  # fmt: skip
    repo = tmp_path / "models--org--name"
    assert st.payload_path(tmp_path, p) == repo / "snapshots" / REV
    assert st.is_snapshot_dir(tmp_path, st.payload_path(tmp_path, p))
    blobs = {b.file.path: b for b in blobs_of(tmp_path, p)}
    assert blobs["model.safetensors"].path == repo / "blobs" / SHA
    assert blobs["1_Pooling/config.json"].path == repo / "blobs" / ("c" * 40)
    assert blobs["1_Pooling/config.json"].kind == "git_sha1"
    assert blobs["1_Pooling/config.json"].label == "payloads.s.files.1_Pooling/config.json"
    nested = blobs["1_Pooling/config.json"]
    nested.path.parent.mkdir(parents=True)
    nested.path.write_text("{}")
    st.link(nested.path, nested.link)
    assert os.readlink(nested.link) == f"../../../blobs/{'c' * 40}"
    assert nested.link.read_text() == "{}"
    one = Payload.one_file(name="x", repository="org/name", revision=REV, filename="f.gguf",
                           size=1, sha256=SHA, role="model", format="gguf")  # fmt: skip
    assert not st.is_snapshot_dir(tmp_path, st.payload_path(tmp_path, one))


def test_a_snapshot_file_path_may_not_escape_the_folder(tmp_path: Path) -> None:
    with pytest.raises(LockError, match=r"payloads\.s\.files\.\.\./x: .*without '\.\.'"):
        blobs_of(tmp_path, snap({"../x": None}))


def test_git_blob_ids_are_what_git_hash_object_prints(tmp_path: Path) -> None:
    assert git_blob_id(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"
    (tmp_path / "f").write_bytes(b"hello\n")
    assert digest_file(tmp_path / "f", "git_sha1") == "ce013625030ba8dba906f756967f9e9ca394464a"
    sha = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    assert digest_file(tmp_path / "f", "sha256") == sha


def test_the_verification_cache_keeps_git_ids_apart_from_sha256(tmp_path: Path) -> None:
    (tmp_path / ".lockpipe").mkdir()
    blob = tmp_path / "blob"
    blob.write_bytes(b"hello\n")
    cache = st.VerifyCache(tmp_path)
    cache.record(blob, "ce01", "git_sha1")
    cache.save()
    again = st.VerifyCache(tmp_path)
    assert again.lookup(blob, blob.stat(), "git_sha1") == "ce01"
    assert again.lookup(blob, blob.stat()) is None  # a git id never vouches for a sha256


# ---- pins and the contract (before any download) --------------------------------------


def test_unpinned_snapshot_files_are_named_one_by_one() -> None:
    p = dataclasses.replace(
        snap({"config.json": None}),
        files=(PayloadFile(path="config.json", size=3), PayloadFile(path="tokenizer.json")),
    )
    with pytest.raises(LockError) as err:
        check_pinned([p])
    text = str(err.value)
    assert "UNPINNED" in text and "pin it from the publisher" in text
    assert "payloads.s.files.config.json: no sha256 or git_sha1 pinned" in text
    assert "payloads.s.files.tokenizer.json: no size, sha256 or git_sha1 pinned" in text


def test_a_model_snapshot_must_list_what_its_runtime_reads() -> None:
    full = {"config.json": None, "tokenizer.json": None, "tokenizer_config.json": None,
            "model.safetensors": {"sha256": SHA}}  # fmt: skip
    assert missing_files(snap(full), {"text"}) == []
    no_tok = {k: v for k, v in full.items() if k != "tokenizer.json"}
    [problem] = missing_files(snap(no_tok), {"text"})
    assert problem.startswith("payloads.s.files: no tokenizer.json or tokenizer.model")
    assert "add it to the lock with its size and hash" in problem
    [problem] = missing_files(snap(full), {"text", "vision"})
    assert "preprocessor_config.json or processor_config.json" in problem
    assert "processor config" in problem


def test_an_mtp_assistant_needs_config_and_weights_only() -> None:
    p = snap({"config.json": None, "model.safetensors": {"sha256": SHA}}, "mtp-assistant")
    assert missing_files(p, {"text", "vision", "audio"}) == []
    [problem] = missing_files(snap({"config.json": None}, "mtp-assistant"), {"text"})
    assert "no model.safetensors or model.safetensors.index.json" in problem


def test_a_gguf_snapshot_is_refused() -> None:
    p = dataclasses.replace(snap({"m.gguf": {"sha256": SHA}}), format="gguf")
    [problem] = missing_files(p, {"text"})
    assert "safetensors model folder" in problem and "filename" in problem


def test_frank_small_snapshots_are_checked_for_everything_it_serves() -> None:
    model = LOCK.payloads["gemma-4-12b-qat-w4a16"]
    assert modalities_of(LOCK, model) == {"text", "vision", "audio"}
    missing = "\n".join(missing_files(model, modalities_of(LOCK, model)))
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json",
                 "preprocessor_config.json"):  # fmt: skip
        assert name in missing or name in {f.path for f in model.files}


# ---- folder checks (after every file matched its pin) ---------------------------------


def test_a_sound_model_folder_passes(tmp_path: Path) -> None:
    files = folder(tmp_path)
    facts = check_snapshot(snap(dict.fromkeys(files)), files)
    assert facts.problems == [] and facts.tensors == {"w"}


def test_config_json_must_name_its_architecture_and_model_type(tmp_path: Path) -> None:
    files = folder(tmp_path, {"model_type": "bert"})
    text = problems(snap(dict.fromkeys(files)), files)
    assert "payloads.s.files.config.json: no `architectures` list" in text
    files["config.json"].write_text("{not json")
    assert "payloads.s.files.config.json: not JSON" in problems(snap(dict.fromkeys(files)), files)


def test_a_model_needs_a_chat_template(tmp_path: Path) -> None:
    files = folder(tmp_path, **{"tokenizer_config.json": {"model_max_length": 512}})
    text = problems(snap(dict.fromkeys(files)), files)
    assert "payloads.s.files: no chat template" in text and "chat_template.jinja" in text
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")
    files["chat_template.jinja"] = tmp_path / "chat_template.jinja"
    assert problems(snap(dict.fromkeys(files)), files) == ""
    del files["chat_template.jinja"]
    assistant = snap(dict.fromkeys(files), "mtp-assistant")
    assert problems(assistant, files) == ""  # it uses the target's tokenizer and template


def test_expect_model_type_names_the_gemma_4_mtp_assistant(tmp_path: Path) -> None:
    cfg = {"architectures": ["Gemma4AssistantForCausalLM"], "model_type": "gemma4_assistant"}
    files = folder(tmp_path, cfg)
    ok = snap(dict.fromkeys(files), "mtp-assistant", model_type="gemma4_assistant")
    assert problems(ok, files) == ""
    files["config.json"].write_text(json.dumps({**cfg, "model_type": "gemma4_text"}))
    text = problems(ok, files)
    assert "model_type is 'gemma4_text', expect.model_type wants 'gemma4_assistant'" in text


def test_an_mtp_assistant_in_f32_fails_the_bf16_default(tmp_path: Path) -> None:
    files = folder(tmp_path)
    write_st(files["model.safetensors"], {"w": ("F32", [4])})
    text = problems(snap(dict.fromkeys(files), "mtp-assistant"), files)
    assert "payloads.s.files.model.safetensors: expect.dtypes allows ['BF16']" in text
    assert "cannot draft" in text


@pytest.mark.parametrize(
    ("qc", "want", "expected"),
    [
        (W4A16, CT4, ""),
        ({**W4A16, "quant_method": "gptq"}, CT4, "quant_method is 'gptq'"),
        (None, CT4, "no quantization_config"),
        ({**W4A16, "config_groups": {"group_0": {"weights": {"num_bits": 8}}}}, CT4,
         "weights.num_bits is {'group_0': 8}"),
        ({**W4A16, "config_groups": {}}, CT4, "no config_groups with weights.num_bits"),
        (W4A16, {"format": "compressed-tensors", "bits": 4, "x": 1}, "must be an object"),
    ],
)  # fmt: skip
def test_expect_quantization_reads_compressed_tensors_configs(
    tmp_path: Path, qc: Any, want: Any, expected: str
) -> None:
    cfg: dict[str, Any] = {"architectures": ["Gemma4ForConditionalGeneration"],
                           "model_type": "gemma4"}  # fmt: skip
    if qc is not None:
        cfg["quantization_config"] = qc
    files = folder(tmp_path, cfg)
    text = problems(snap(dict.fromkeys(files), quantization=want), files)
    assert (expected in text) if expected else text == ""


def test_the_index_must_cover_exactly_its_shards_tensors(tmp_path: Path) -> None:
    files = folder(tmp_path)
    del files["model.safetensors"]
    files["model-1.safetensors"] = write_st(tmp_path / "model-1.safetensors",
                                            {"a": ("BF16", [2]), "b": ("BF16", [2])})  # fmt: skip
    files["model-2.safetensors"] = write_st(tmp_path / "model-2.safetensors",
                                            {"c": ("BF16", [2])})  # fmt: skip
    index = tmp_path / "model.safetensors.index.json"
    files[index.name] = index
    good = {"a": "model-1.safetensors", "b": "model-1.safetensors", "c": "model-2.safetensors"}
    index.write_text(json.dumps({"weight_map": good}))
    p = snap(dict.fromkeys(files))
    assert problems(p, files) == ""
    index.write_text(json.dumps({"weight_map": {**good, "d": "model-2.safetensors"}}))
    assert "shard 'model-2.safetensors': 1 mapped tensors absent from it" in problems(p, files)
    index.write_text(json.dumps({"weight_map": {"a": "model-1.safetensors",
                                                "c": "model-2.safetensors"}}))  # fmt: skip
    assert "1 of its tensors unmapped (e.g. ['b'])" in problems(p, files)
    del files["model-2.safetensors"]
    text = problems(snap(dict.fromkeys(files)), files)
    assert "the index names shard 'model-2.safetensors', which payloads.s.files does not" in text


def test_unknown_expect_keys_are_named(tmp_path: Path) -> None:
    files = folder(tmp_path)
    assert "payloads.s.expect.quantisation: unknown key" in problems(
        snap(dict.fromkeys(files), quantisation=CT4), files
    )


# ---- paths into the serving container -------------------------------------------------


def test_payload_dir_of_a_snapshot_is_the_snapshot_folder_itself() -> None:
    store = Path("/var/lib/lockpipe/payloads")
    target = LOCK.target("frank-small")
    paths = {p: st.payload_path(store, LOCK.payloads[p]) for p in target.payloads}
    cmd = container_command(target, paths, store)
    model = LOCK.payloads["gemma-4-12b-qat-w4a16"]
    assert (
        cmd[2] == f"/store/models--google--gemma-4-12B-it-qat-w4a16-ct/snapshots/{model.revision}"
    )
    spec = json.loads(cmd[cmd.index("--speculative-config") + 1])
    assistant = LOCK.payloads["gemma-4-12b-mtp-assistant-bf16"]
    assert spec["model"] == (
        "/store/models--google--gemma-4-12B-it-qat-q4_0-unquantized-assistant/snapshots/"
        f"{assistant.revision}"
    )


def test_payload_of_a_snapshot_says_to_use_payload_dir() -> None:
    store = Path("/var/lib/lockpipe/payloads")
    target = LOCK.target("frank-small")
    wrong = dataclasses.replace(
        target, serve=dataclasses.replace(target.serve, command=(
            "vllm", "serve", "{payload:gemma-4-12b-qat-w4a16}"))
    )  # fmt: skip
    paths = {p: st.payload_path(store, LOCK.payloads[p]) for p in target.payloads}
    with pytest.raises(SmokeError, match=r"snapshot folder: write \{payload-dir:gemma-4-12b-qat"):
        container_command(wrong, paths, store)
    doc = json.loads(LOCK_PATH.read_text())
    doc["targets"]["frank-small"]["serve"]["command"][2] = "{payload:gemma-4-12b-qat-w4a16}"
    broken = parse_lock(doc, LOCK.path, LOCK.root)
    (problem,) = check_targets(broken, ["frank-small"], {})
    assert "is a snapshot folder: write {payload-dir:gemma-4-12b-qat-w4a16}" in problem
