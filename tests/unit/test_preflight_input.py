"""``lockpipe preflight`` refuses input it cannot honour, and says what it means.

Each test is one input a new user got wrong and preflight once took silently (or answered
with a traceback or a misleading line): a renamed target in ``locks/preflight.json``, a
path that is not there, a calibration that falls, a what-if for another runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli import options
from lockpipe.cli import preflight as cli
from lockpipe.cli.main import main
from lockpipe.cli.options import add_preflight_options
from lockpipe.errors import CheckFailed, FormatError, LockError, UsageError
from lockpipe.preflight import config, report
from lockpipe.preflight.verdict import Check, Status, TargetReport
from tests.frank_small import TURBOQUANT_WHAT_IF

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "locks" / "digests.json"


def preflight_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((REPO / "locks" / "preflight.json").read_text())
    return doc


def write(tmp_path: Path, doc: dict[str, Any], name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the preflight command echoes, line by line."""
    said: list[str] = []
    monkeypatch.setattr(cli, "echo", lambda text, **_: said.append(text))
    return said


def run(tmp_path: Path, *argv: str, lock: Path = LOCK) -> tuple[int, dict[str, Any]]:
    """Preflight with ``argv``; the exit code and the JSON report (``--json`` unless given)."""
    parser = options.Parser(prog="lockpipe preflight", parents=[options.common()])
    parser.add_argument("targets", nargs="*")
    add_preflight_options(parser)
    out = tmp_path / "report.json"
    given = ["--json", str(out)] if "--json" not in argv else []
    args = parser.parse_args(["--lock", str(lock), *given, *argv])
    args.verb = "preflight"
    code = cli.do_preflight(args)
    doc: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    return code, doc


def by_target(doc: dict[str, Any]) -> dict[str, Any]:
    return {t["target"]: t for t in doc["targets"]}


# 1. names in locks/preflight.json are the lock's names


def test_a_renamed_target_in_preflight_json_is_refused_not_dropped(tmp_path: Path) -> None:
    doc = preflight_doc()
    doc["targets"]["llama-cuda-slotz"] = doc["targets"].pop("llama-cuda-slots")
    path = write(tmp_path, doc)
    with pytest.raises(LockError) as info:
        run(tmp_path, "--gpu", "rtx3090", "--preflight", str(path), "llama-cuda-slots")
    text = str(info.value)
    assert str(path) in text and "targets.llama-cuda-slotz" in text
    assert "llama-cuda-slots" in text.replace("llama-cuda-slotz", "")  # the lock's names
    assert "\n" not in text


def test_a_models_entry_for_a_payload_the_lock_lacks_is_refused(tmp_path: Path) -> None:
    doc = preflight_doc()
    doc["models"]["gemma-4-12b"] = doc["models"].pop("gemma-4-12b-q4_k_m")
    path = write(tmp_path, doc)
    with pytest.raises(LockError) as info:
        run(tmp_path, "--gpu", "rtx3090", "--preflight", str(path), "llama-cpu")
    text = str(info.value)
    assert str(path) in text and "models.gemma-4-12b" in text
    assert "gemma-4-12b-q4_k_m" in text  # the lock's payload names, to pick from


# 2. a path given on the command line must be there


def test_an_explicit_preflight_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(UsageError, match=f"--preflight {missing}: no such file"):
        run(tmp_path, "--gpu", "rtx3090", "--preflight", str(missing), "llama-cpu")


def test_the_default_preflight_file_and_store_may_be_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock with no preflight.json beside it: every shape UNKNOWN, and exit 0."""
    (tmp_path / "images").symlink_to(REPO / "images")  # the lock's build contexts
    lock_dir = tmp_path / "locks"
    lock_dir.mkdir()
    lock = lock_dir / "digests.json"
    lock.write_text(LOCK.read_text())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "no-cache"))  # default store absent
    code, doc = run(tmp_path, "--gpu", "rtx3090", "llama-cpu", lock=lock)
    assert code == 0 and by_target(doc)["llama-cpu"]["verdict"] == "unknown"


def test_an_explicit_store_that_is_not_a_directory_is_an_error(tmp_path: Path) -> None:
    typo = tmp_path / "typo"
    with pytest.raises(UsageError, match=f"--store {typo}: not a directory"):
        run(tmp_path, "--gpu", "rtx3090", "--store", str(typo), "llama-cpu")


# 3. a calibration must rise with the slot count


def test_a_calibration_that_falls_with_more_slots_is_refused(tmp_path: Path) -> None:
    doc = preflight_doc()
    doc["targets"]["llama-cuda-slots"]["llama_slots"]["points"] = [
        {"slots": 1, "used_mib": 22346},
        {"slots": 4, "used_mib": 11996},
    ]
    path = write(tmp_path, doc)
    with pytest.raises(LockError, match="must rise with the slot count") as info:
        config.load(path)
    assert "targets.llama-cuda-slots.llama_slots.points" in str(info.value)
    flat = {"slots": 4, "used_mib": 22346}
    doc["targets"]["llama-cuda-slots"]["llama_slots"]["points"] = [flat, flat | {"slots": 1}]
    with pytest.raises(LockError, match="must rise"):
        config.load(write(tmp_path, doc))


# 4. --json must name a file


def test_json_naming_a_directory_is_a_usage_error_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"--json {tmp_path}: a directory"):
        run(tmp_path, "--json", str(tmp_path), lock=tmp_path / "no-lock.json")


# 5. what-ifs: --kv-cache-dtype applies to llama.cpp too; the others say where they do not


def test_kv_cache_dtype_sets_llama_cpp_k_and_v(tmp_path: Path, lines: list[str]) -> None:
    code, doc = run(tmp_path, "--gpu", "rtx3090", "--kv-cache-dtype", "q4_0", "llama-cuda-slots")
    slots = by_target(doc)["llama-cuda-slots"]
    assert code == 0, slots["checks"]
    kv = [f for f in slots["figures"] if "q4_0/q4_0" in f["note"]]
    assert kv, slots["figures"]
    assert slots["numbers"]["budget_from"] != "calibrated"  # measured at q8_0, not q4_0
    assert not [line for line in lines if "does not apply" in line]


def test_a_vllm_only_kv_dtype_does_not_apply_to_a_llama_target_and_is_named(
    tmp_path: Path, lines: list[str]
) -> None:
    """One run may mean --kv-cache-dtype fp8 for the vLLM target: the llama.cpp one is
    judged as locked, with a line naming the flag and llama.cpp's own cache types."""
    _, doc = run(
        tmp_path, "--gpu", "rtx3090", "--kv-cache-dtype", "fp8", "llama-cuda", "frank-small"
    )  # fmt: skip (frank-small's own verdict is not this test's)
    cuda = by_target(doc)["llama-cuda"]
    assert cuda["verdict"] == "pass"
    assert [f for f in cuda["figures"] if "q8_0/q8_0" in f["note"]]  # the locked pair
    (line,) = [x for x in lines if x.startswith("preflight: llama-cuda:")]
    assert "--kv-cache-dtype fp8 does not apply" in line
    assert all(t in line for t in ("f16", "bf16", "q8_0", "q4_0", "q5_1", "f32"))


def test_a_kv_dtype_no_target_of_the_run_takes_is_a_usage_error(tmp_path: Path) -> None:
    """issue 19: fp8 for llama-cuda alone (or q5_9 anywhere) is a typo, not a shape to judge
    without: llama.cpp lacks it and no vLLM target of the run takes it."""
    with pytest.raises(UsageError, match=r"llama-cuda: --kv-cache-dtype fp8: llama.cpp has no"):
        run(tmp_path, "--gpu", "rtx3090", "--kv-cache-dtype", "fp8", "llama-cuda")
    with pytest.raises(UsageError, match=r"--kv-cache-dtype q5_9: llama.cpp has no such cache"):
        run(tmp_path, "--gpu", "rtx3090", "--kv-cache-dtype", "q5_9", "llama-cuda", "frank-small")


def test_a_kv_dtype_vllm_lacks_is_a_usage_error_when_no_target_takes_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"frank-small: --kv-cache-dtype fp9: vLLM 0\.29\.0 "
                       r"offers no such KV cache dtype \(did you mean fp8\?\)"):  # fmt: skip
        run(tmp_path, "--gpu", "rtx3090", "--kv-cache-dtype", "fp9", "frank-small")


def test_a_what_if_llama_server_would_refuse_is_a_usage_error_naming_the_target(
    tmp_path: Path,
) -> None:
    with pytest.raises(UsageError, match=r"llama-cuda \(llama.cpp\) as asked: --parallel 0"):
        run(tmp_path, "--gpu", "rtx3090", "--parallel", "0", "llama-cuda")


def test_what_ifs_for_another_runtime_are_named_per_target(
    tmp_path: Path, lines: list[str]
) -> None:
    run(tmp_path, "--gpu", "rtx3090", "--parallel", "2", "--max-model-len", "65536",
        "--env", "VLLM_X=1", "frank-small", "llama-cuda")  # fmt: skip
    vllm = [line for line in lines if line.startswith("preflight: frank-small:")]
    llama = [line for line in lines if line.startswith("preflight: llama-cuda:")]
    assert len(vllm) == len(llama) == 1
    assert vllm[0].startswith("preflight: frank-small: --parallel does not apply to it (")
    assert llama[0].startswith("preflight: llama-cuda: --max-model-len, --env do not apply to it (")


# 6. messages that say what they mean


def test_a_bad_card_in_preflight_json_names_the_file_and_key(tmp_path: Path) -> None:
    doc = preflight_doc()
    doc["targets"]["llama-cuda"]["card"] = "rtx9999"
    path = write(tmp_path, doc)
    with pytest.raises(LockError) as info:
        run(tmp_path, "--preflight", str(path), "llama-cuda")
    text = str(info.value)
    assert str(path) in text and "targets.llama-cuda.card" in text and "rtx3090" in text
    assert "--gpu rtx9999" not in text


def test_an_unknown_backend_gets_no_pass_row(tmp_path: Path) -> None:
    code, doc = run(tmp_path, "--gpu", "rtx3090", "--attention-backend", "FOO", "frank-small")
    checks = by_target(doc)["frank-small"]["checks"]
    assert code == CheckFailed.return_code
    assert any(c["name"] == "attention-backend" and c["status"] == "fail" for c in checks)
    assert not [c for c in checks if c["name"] == "backend" and c["status"] == "pass"]


def test_the_failure_line_says_what_failed_and_whether_as_asked(
    tmp_path: Path, lines: list[str]
) -> None:
    code, _ = run(tmp_path, "--gpu", "rtx3090", "--strict", "frank-large")
    assert code == CheckFailed.return_code
    assert lines[-1].startswith("preflight: as locked, frank-large is unknown (")
    code, _ = run(tmp_path, "--gpu", "rtx3090", *TURBOQUANT_WHAT_IF, "frank-small")
    assert code == CheckFailed.return_code
    assert lines[-1].startswith(f"preflight: as asked ({' '.join(TURBOQUANT_WHAT_IF)}), "
                                "frank-small fails (")  # fmt: skip
    assert "backend" in lines[-1] and "would not fit" not in lines[-1]
    code, _ = run(tmp_path, "--gpu", "rtx3090", "--parallel", "5", "--ctx-size", "1310720",
                  "llama-cuda-slots")  # fmt: skip
    assert code == CheckFailed.return_code
    assert lines[-1].startswith("preflight: as asked (")
    assert "--parallel 5" in lines[-1] and "llama-cuda-slots fails (budget" in lines[-1]


def test_a_strict_unknown_says_strict_and_the_json_agrees_with_the_exit_code(
    tmp_path: Path, lines: list[str]
) -> None:
    code, doc = run(tmp_path, "--gpu", "rtx3090", "frank-large")
    assert code == 0 and doc["verdict"] == "unknown"
    code, doc = run(tmp_path, "--gpu", "rtx3090", "--strict", "frank-large")
    assert code == CheckFailed.return_code and doc["verdict"] == "fail" and doc["strict"] is True
    assert "frank-large is unknown (model-shape)" in lines[-1] and "--strict" in lines[-1]


def one(status: Status) -> TargetReport:
    check = Check(name=status, status=status, detail=status)
    return TargetReport(target=status, runtime="x", card="c", figures=(), checks=(check,))


@pytest.mark.parametrize(
    ("statuses", "strict", "overall"),
    [
        (("pass",), False, "pass"),
        (("pass", "warn"), False, "warn"),
        (("warn", "unknown"), False, "unknown"),
        (("warn", "fail"), False, "fail"),
        (("pass", "warn"), True, "fail"),
        (("pass",), True, "pass"),
    ],
)
def test_the_json_verdict_is_the_worst_and_fail_exactly_when_the_exit_is_1(
    tmp_path: Path, statuses: tuple[Status, ...], strict: bool, overall: str
) -> None:
    reports = [one(s) for s in statuses]
    assert report.overall(reports, strict=strict) == overall
    report.write_json(tmp_path / "r.json", reports, strict=strict)
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == overall


def test_vllm_s_bfloat16_is_llama_cpp_s_bf16(tmp_path: Path, lines: list[str]) -> None:
    code, doc = run(tmp_path, "--gpu", "rtx3090", "--kv-cache-dtype", "bfloat16", "llama-cuda")
    cuda = by_target(doc)["llama-cuda"]
    assert code == 0 and [f for f in cuda["figures"] if "bf16/bf16" in f["note"]]
    assert not [x for x in lines if "does not apply" in x]


# 7. a preflight.json of another shape: one line naming the file and the key (issue 18)

GGUF_MODEL = "gemma-4-12b-q4_k_m"
CONFIG_MODEL = "gemma-4-12b-qat-w4a16"
MTP_MODEL = "qwen3.8-27b-iq3_s-mtp"


def _set(path: tuple[str | int, ...], value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        node: Any = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "target", "kind", "words"),
    [
        (_set(("targets",), [1]), "llama-cuda", LockError, "targets is a list, not an object"),
        (_set(("models",), "gguf"), "llama-cuda", LockError, "models is a string, not an object"),
        (_set(("models", GGUF_MODEL), ["gguf"]), "llama-cuda", LockError,
         f"models.{GGUF_MODEL} is a list, not an object"),
        (_set(("targets", "llama-cuda"), "rtx3090"), "llama-cuda", LockError,
         "targets.llama-cuda is a string, not an object"),
        (_set(("targets", "llama-cuda", "card"), 3090), "llama-cuda", LockError,
         "targets.llama-cuda: card is an integer, not a string"),
        (_set(("targets", "llama-cuda-slots", "llama_slots"), [1]), "llama-cuda-slots",
         LockError, "targets.llama-cuda-slots: llama_slots is a list, not an object"),
        (_set(("targets", "llama-cuda-slots", "llama_slots", "points"), [1, 2]),
         "llama-cuda-slots", LockError, "llama_slots: points[0] is an integer, not an object"),
        (_set(("targets", "llama-cuda-slots", "llama_slots", "cache_types"), []),
         "llama-cuda-slots", LockError, "llama_slots.cache_types: give the K and V cache types"),
        (_set(("models", GGUF_MODEL, "gguf", "gemma4.block_count"), "48"), "llama-cuda",
         FormatError, f"models.{GGUF_MODEL}: gemma4.block_count is a string, not an integer"),
        (_set(("models", GGUF_MODEL, "gguf", "gemma4.attention.key_length"), [256]),
         "llama-cuda", FormatError, "gemma4.attention.key_length is a list, not an integer"),
        (_set(("models", CONFIG_MODEL, "config", "text_config", "num_hidden_layers"), "48"),
         "frank-small", FormatError,
         f"models.{CONFIG_MODEL}: text_config.num_hidden_layers is a string, not an integer"),
        (_set(("models", CONFIG_MODEL, "config", "text_config"), [1]), "frank-small",
         FormatError, "text_config is a list, not an object"),
        (_set(("models", GGUF_MODEL, "gguf", "gemma4.attention.sliding_window_pattern"), "5"),
         "llama-cuda", FormatError, "sliding_window_pattern is a string, not a period or a "
         "per-layer list"),
        (_set(("models", GGUF_MODEL, "gguf", "gemma4.attention.sliding_window_pattern"),
              ["true", "false"]), "llama-cuda", FormatError,
         "sliding_window_pattern holds a string, not true/false per layer"),
        (_set(("models", MTP_MODEL, "gguf", "qwen35.ssm.state_size"), "128"), "llama-cuda-mtp",
         FormatError, f"models.{MTP_MODEL}: qwen35.ssm.state_size is a string, not an integer"),
        (_set(("models", MTP_MODEL, "gguf", "qwen35.full_attention_interval"), [4]),
         "llama-cuda-mtp", FormatError, "qwen35.full_attention_interval is a list, not an integer"),
    ],
)  # fmt: skip
def test_a_preflight_json_of_another_shape_names_the_file_and_key(
    tmp_path: Path, edit: Any, target: str, kind: type[Exception], words: str
) -> None:
    """Each was an AttributeError, TypeError, IndexError or ValueError traceback."""
    doc = preflight_doc()
    edit(doc)
    path = write(tmp_path, doc)
    with pytest.raises(kind) as info:
        run(tmp_path, "--gpu", "rtx3090", "--preflight", str(path), target)
    assert str(info.value).startswith(f"{path}: ") and words in str(info.value)


def test_a_preflight_file_that_is_not_text_is_one_line_from_the_command(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "preflight.json"
    path.write_bytes(b"\xff\xfe{}")
    done = subprocess.run(
        [sys.executable, "-m", "lockpipe", "preflight", "--lock", str(LOCK), "--preflight",
         str(path), "--gpu", "rtx3090", "llama-cuda"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == LockError.return_code, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{path}: cannot be read as preflight calibrations (UnicodeDecodeError" in done.stderr


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b"[1]", "config.json is a list, not an object"),
        (b"{not json", "config.json is not JSON"),
        (b'{"text_config": {"num_hidden_layers": 48.5}}', "text_config.num_hidden_layers is a "
         "number, not an integer"),
    ],
)  # fmt: skip
def test_a_stored_config_json_of_another_shape_is_one_line_naming_it(
    tmp_path: Path, text: bytes, words: str
) -> None:
    """A snapshot's config.json is read where preflight.json's models entry would be; a list
    was an AttributeError traceback, a broken file a JSONDecodeError."""
    from lockpipe.lock.model import load_lock
    from lockpipe.payloads import store as payload_store

    folder = payload_store.payload_path(tmp_path / "store", load_lock(LOCK).payloads[CONFIG_MODEL])
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes(text)
    with pytest.raises(FormatError) as info:
        run(tmp_path, "--gpu", "rtx3090", "--store", str(tmp_path / "store"), "frank-small")
    message = str(info.value)
    assert message.startswith(f"{folder / 'config.json'}: ")
    assert words in message


@pytest.mark.parametrize(
    ("where", "written"),
    [("/proc/self/x.json", False), ("a" * 245 + ".json", True)],
    ids=["unwritable-folder", "a-250-byte-name"],
)
def test_a_json_path_that_cannot_be_written_is_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, written: bool
) -> None:
    """A folder no file can be made in is one usage error naming the path and the fix; a
    name of 250 bytes (a folder takes 255) is written: the temporary file beside it has a
    short name of its own."""
    path = tmp_path / where  # an absolute `where` is itself
    code = main(["preflight", "llama-cuda", "--gpu", "rtx3090", "--lock", str(LOCK),
                 "--json", str(path)])  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    if written:
        assert code in (0, 1, 16) and json.loads(path.read_text())["targets"], err
        assert [p.name for p in tmp_path.iterdir()] == [path.name]
    else:
        assert code == UsageError.return_code, err
        assert f"--json {path}: cannot write it" in err and "writable" in err, err
        assert len(err.strip().splitlines()) == 1, err
