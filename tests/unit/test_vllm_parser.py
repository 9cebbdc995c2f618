"""The runner of vLLM's own serve-argument parser (lockpipe/preflight/vllm_parser.py).

Here against a stand-in vLLM tree: the same module paths and calls as the wheel's
(``FlexibleArgumentParser``, ``make_arg_parser``, ``validate_parsed_serve_args``,
``AsyncEngineArgs.from_cli_args``), run by this Python, so no torch is needed. The real
0.29.0 parser runs in tests/integration/test_vllm_parser.py.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lockpipe.errors import CheckFailed, EngineError
from lockpipe.lock.model import load_lock
from lockpipe.preflight import vllm_parser, vllm_rules
from lockpipe.preflight.vllm_args import VllmArgs, parse_args
from lockpipe.preflight.vllm_parser import Accepted, ParserEnv, Refused, Unavailable
from lockpipe.preflight.whatif import Overrides
from tests.frank_small import run_preflight as run

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
WHEEL = vllm_rules.release("0.29.0")["wheel"]

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P needs 3.11")

# A stand-in for the wheel's modules: argparse with vLLM's names, a few of its flags.
FAKE = {
    "vllm/__init__.py": "",
    "vllm/version.py": '__version__ = "0.29.0"\n',
    "vllm/utils/__init__.py": "",
    "vllm/utils/argparse_utils.py": (
        "import argparse\nclass FlexibleArgumentParser(argparse.ArgumentParser):\n    pass\n"
    ),
    "vllm/entrypoints/__init__.py": "",
    # read, never imported (the real one imports the API server): where the parser comes from
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": (
        "import uvloop_missing\nfrom vllm.entrypoints.launchers.cli_args import (\n"
        "    make_arg_parser,\n    validate_parsed_serve_args,\n)\n"
    ),
    "vllm/entrypoints/launchers/__init__.py": "",
    "vllm/entrypoints/launchers/cli_args.py": """
import json
def make_arg_parser(p):
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--kv-cache-dtype", choices=["auto", "bfloat16", "turboquant_k8v4"],
                   default="auto")
    for flag in ("--max-model-len", "--max-num-seqs", "--port"):
        p.add_argument(flag, type=int)
    for flag in ("--served-model-name", "--host", "--attention-backend"):
        p.add_argument(flag)
    p.add_argument("--speculative-config", type=json.loads)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.92)
    return p
def validate_parsed_serve_args(args):
    if args.max_num_seqs == 0:
        raise ValueError("max_num_seqs must be positive")
""",
    "vllm/engine/__init__.py": "",
    "vllm/engine/arg_utils.py": """
import dataclasses
@dataclasses.dataclass
class AsyncEngineArgs:
    model: str = "Qwen/Qwen3-0.6B"
    kv_cache_dtype: str = "auto"
    max_model_len: int = None
    max_num_seqs: int = None
    attention_backend: str = None
    gpu_memory_utilization: float = 0.92
    speculative_config: dict = None
    @classmethod
    def from_cli_args(cls, args):
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{n: getattr(args, n) for n in names if hasattr(args, n)})
""",
}


@pytest.fixture
def fake_env(tmp_path: Path) -> Path:
    """A parser environment as nox -s vllm-parser leaves it, with the stand-in tree and this
    Python as its venv's."""
    where = tmp_path / "vllm-parser" / "0.29.0"
    for name, text in FAKE.items():
        (where / "tree" / name).parent.mkdir(parents=True, exist_ok=True)
        (where / "tree" / name).write_text(text)
    (where / "venv" / "bin").mkdir(parents=True)
    (where / "venv" / "bin" / "python").symlink_to(sys.executable)
    marker = {"vllm": "0.29.0", "wheel": WHEEL["file"], "sha256": WHEEL["sha256"]}
    (where / vllm_parser.MARKER).write_text(json.dumps(marker))
    return where


def env_of(where: Path) -> ParserEnv:
    found = vllm_parser.find_env(where, "0.29.0", WHEEL)
    assert isinstance(found, ParserEnv), found
    return found


def test_the_lock_command_is_accepted_and_read_as_vllm_reads_it(fake_env: Path) -> None:
    command = LOCK.target("frank-small").serve.command
    (got,) = vllm_parser.parse(env_of(fake_env), [command])
    assert isinstance(got, Accepted)
    assert got.argv[:2] == ("serve", "/store/gemma-4-12b-qat-w4a16")  # placeholders stood in
    assert got.engine["max_model_len"] == LOCK.target("frank-small").serve.context
    assert got.engine["speculative_config"]["model"] == "/store/gemma-4-12b-mtp-assistant-bf16"
    args = vllm_parser.as_vllm_args(got.engine, parse_args(command))
    assert (args.kv_dtype, args.max_num_seqs, args.utilization) == ("bfloat16", 2, 0.92)


def test_refusals_carry_vllms_own_message(fake_env: Path) -> None:
    base = ("vllm", "serve", "m")
    bad_dtype, unknown, invalid = vllm_parser.parse(
        env_of(fake_env),
        [(*base, "--kv-cache-dtype", "bfloat17"), (*base, "--no-such-flag"),
         (*base, "--max-num-seqs", "0")],
    )  # fmt: skip
    assert isinstance(bad_dtype, Refused) and isinstance(unknown, Refused)
    assert "argument --kv-cache-dtype: invalid choice: 'bfloat17'" in bad_dtype.message
    assert "unrecognized arguments: --no-such-flag" in unknown.message
    assert isinstance(invalid, Refused) and invalid.message == (
        "ValueError: max_num_seqs must be positive"
    )


def test_the_parser_is_taken_from_where_serve_py_imports_it(fake_env: Path) -> None:
    # 0.33.0 moved entrypoints/launchers/cli_args.py to entrypoints/common/cli_args.py
    tree = fake_env / "tree" / "vllm" / "entrypoints"
    (tree / "common").mkdir()
    (tree / "common" / "__init__.py").write_text("")
    (tree / "launchers" / "cli_args.py").rename(tree / "common" / "cli_args.py")
    serve = tree / "cli" / "serve.py"
    serve.write_text(serve.read_text().replace(".launchers.", ".common."))
    (got,) = vllm_parser.parse(env_of(fake_env), [("vllm", "serve", "m", "--max-num-seqs", "3")])
    assert isinstance(got, Accepted) and got.engine["max_num_seqs"] == 3
    serve.write_text("import argparse\n")  # serve.py no longer says: the parser is not run
    (gone,) = vllm_parser.parse(env_of(fake_env), [("vllm", "serve", "m")])
    assert isinstance(gone, Unavailable)
    assert "imports no make_arg_parser and validate_parsed_serve_args" in gone.reason


def test_a_tree_that_does_not_import_makes_every_command_unavailable(fake_env: Path) -> None:
    (fake_env / "tree" / "vllm" / "engine" / "arg_utils.py").write_text("import torch_missing\n")
    results = vllm_parser.parse(env_of(fake_env), [("vllm", "serve"), ("vllm", "serve", "m")])
    assert len(results) == 2 and all(isinstance(r, Unavailable) for r in results)
    assert isinstance(results[0], Unavailable) and "did not run" in results[0].reason
    assert "torch_missing" in results[0].reason and "nox -s vllm-parser" in results[0].fix


def test_an_environment_is_found_only_for_the_rules_wheel(fake_env: Path, tmp_path: Path) -> None:
    missing = vllm_parser.find_env(tmp_path / "nowhere", "0.29.0", WHEEL)
    assert isinstance(missing, Unavailable) and "is not built" in missing.reason
    assert "nox -s vllm-parser" in missing.fix
    other = {"file": "vllm-0.29.0+cu129-….whl", "sha256": "0" * 64}
    wrong = vllm_parser.find_env(fake_env, "0.29.0", other)
    assert isinstance(wrong, Unavailable) and "(the rules' wheel)" in wrong.reason
    assert WHEEL["sha256"][:12] in wrong.reason
    assert isinstance(vllm_parser.find_env(fake_env, "0.33.0", WHEEL), Unavailable)


def test_what_ifs_are_passed_after_the_commands_own_flags() -> None:
    over = Overrides(kv_dtype="fp8", attention_backend="auto", max_model_len=65536, parallel=3)
    assert vllm_parser.asked(("vllm", "serve", "m", "--kv-cache-dtype", "bfloat16"), over) == (
        "vllm", "serve", "m", "--kv-cache-dtype", "bfloat16", "--kv-cache-dtype", "fp8",
        "--attention-backend", "auto", "--max-model-len", "65536",
    )  # fmt: skip


def test_vllms_values_replace_the_extracts_and_the_differences_are_named() -> None:
    engine: dict[str, Any] = {
        "kv_cache_dtype": "bfloat16", "max_model_len": 131072, "max_num_seqs": 2,
        "gpu_memory_utilization": 0.92, "attention_backend": None, "block_size": None,
        "max_num_batched_tokens": None, "kv_cache_dtype_skip_layers": ["0", "1"],
        "async_scheduling": None, "speculative_config": None,
        "attention_config": {"backend": "FLASH_ATTN", "flash_attn_version": None},
    }  # fmt: skip
    extract = VllmArgs(kv_dtype="bfloat16", max_model_len=131072, max_num_seqs=2)
    used = vllm_parser.as_vllm_args(engine, extract)
    assert used.utilization == 0.92 and used.skip_layers == ("0", "1")
    assert used.async_scheduling is True  # vLLM's None: decided later, on by default
    assert used.attention_config == {"backend": "FLASH_ATTN"}
    named = vllm_parser.differences(used, extract)
    # the extract leaves --gpu-memory-utilization unset (None: the wheel's default), not 0.9
    assert extract.utilization is None and not any(d.startswith("utilization") for d in named)
    assert [d.split(":")[0] for d in named] == ["skip_layers", "attention_config"]
    assert vllm_parser.differences(used, replace(extract, utilization=0.9))[0] == (
        "utilization: extract 0.9, vLLM 0.92"
    )


def test_preflight_uses_vllms_parse_and_says_so(fake_env: Path, tmp_path: Path) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "--vllm-parser", str(fake_env), "frank-small")
    fs = by["frank-small"]
    (said,) = [c for c in fs["checks"] if c["name"] == "serve-args"]
    assert code == 0 and said["status"] == "pass"
    assert re.search(r"vLLM 0\.29\.0's own parser \(FlexibleArgumentParser serve", said["detail"])
    read = next(f for f in fs["figures"] if f["name"] == "serve command")
    assert read["value"] == "parsed by vLLM 0.29.0"
    assert "utilization" not in read["note"]  # both take the wheel's 0.92 (config/cache.py)
    assert "KV memory" in {f["name"] for f in fs["figures"]}
    assert next(f for f in fs["figures"] if f["name"] == "KV memory")["note"].startswith("0.92 x")


def test_a_what_if_vllm_refuses_fails_with_its_message(fake_env: Path, tmp_path: Path) -> None:
    # fp8 is one of 0.29.0's dtypes, so lockpipe lets it through; the stand-in parser
    # offers only three, so "vLLM" refuses it, as a real parser refuses what it lacks.
    code, by = run(tmp_path, "--gpu", "rtx3090", "--vllm-parser", str(fake_env),
                   "--kv-cache-dtype", "fp8", "frank-small")  # fmt: skip
    (said,) = [c for c in by["frank-small"]["checks"] if c["name"] == "serve-args"]
    assert code == CheckFailed.return_code and said["status"] == "fail"
    assert (
        "refuses the serve command: vllm serve: error: argument --kv-cache-dtype"
        in (said["detail"])
    )
    assert "targets.frank-small.serve.command" in said["fix"]


def test_without_the_parser_the_extract_reads_it_and_the_report_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, by = run(tmp_path, "--gpu", "rtx3090", "--vllm-parser", str(tmp_path / "absent"),
                   "frank-small")  # fmt: skip
    fs = by["frank-small"]
    assert code == 0 and not [c for c in fs["checks"] if c["name"] == "serve-args"]
    read = next(f for f in fs["figures"] if f["name"] == "serve command")
    assert read["value"] == "read by lockpipe's extract"
    assert "is not built" in read["note"] and "nox -s vllm-parser" in read["note"]
    assert "lockpipe's extract did" in capsys.readouterr().err
    assert fs["numbers"]["serve_command"].startswith("read by lockpipe's extract")


def _pins(text: str) -> dict[str, list[str]]:
    pins: dict[str, list[str]] = {}
    name = ""
    for line in text.splitlines():
        if m := re.match(r"^([A-Za-z0-9._-]+)==(\S+)", line):
            name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
            pins[name] = []
        elif m := re.search(r"--hash=sha256:([0-9a-f]{64})", line):
            pins[name].append(m.group(1))
    return pins


@pytest.mark.parametrize(
    "wanted", sorted((REPO / "constraints").glob("vllm-parser-*.in")), ids=lambda p: p.stem
)
def test_the_parsers_packages_are_pinned_with_hashes(wanted: Path) -> None:
    lines = [x for x in wanted.read_text().splitlines() if x.strip() and not x.startswith("#")]
    names = {
        re.sub(r"[-_.]+", "-", re.split(r"[=<>!~\s]", x, maxsplit=1)[0]).lower() for x in lines
    }
    resolved = wanted.with_suffix(".txt").read_text()
    pins = _pins(resolved)
    assert names <= set(pins) and all(pins.values())
    # torch is named exactly in the .in (0.29.0: the CPU build of the wheel's pin; 0.33.0:
    # the pin as PyPI's CUDA build, the header says why) and resolved to that one
    (torch,) = [x for x in lines if x.startswith("torch==")]
    assert f"{torch} \\\n" in resolved
    assert "vllm" not in pins  # the tree comes from the rules' wheel, never installed


def test_the_torch_the_parser_runs_on_is_said_beside_the_wheels_pin(tmp_path: Path) -> None:
    from lockpipe.preflight.vllm_parser_env import torch_pin

    wheel = tmp_path / "vllm-9.9.9-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        requires = ("torchaudio==2.11.0", "torch==2.14.0", "torchvision==0.29.0")
        metadata = "Name: vllm\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
        z.writestr("vllm-9.9.9.dist-info/METADATA", metadata)
    assert torch_pin(wheel) == "==2.14.0"
    env = ParserEnv(version="9.9.9", python=Path("p"), tree=Path("t"), wheel=wheel.name,
                    sha256="0" * 64, torch="2.14.1", torch_pin="==2.14.0")  # fmt: skip
    assert env.torch_note == "torch 2.14.1 (the wheel pins torch==2.14.0)"
    # the CPU build of the pinned version is the pin: nothing to say
    same = replace(env, torch="2.13.0+cpu", torch_pin="==2.13.0")
    assert same.torch_note == "torch 2.13.0+cpu"
    assert "not recorded" in replace(env, torch=None).torch_note


def test_the_parser_child_does_not_see_this_hosts_vllm_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child took this host's environment whole: a VLLM_* variable set where preflight
    runs (not in the image or the lock) reached vLLM's parser and validators, judging
    another shape than the server's (issue 18)."""
    monkeypatch.setenv("VLLM_ATTENTION_BACKEND", "FLASHINFER")
    monkeypatch.setenv("HOME", str(tmp_path))
    seen: list[dict[str, str]] = []

    def runner(argv: Sequence[str], env: Mapping[str, str]) -> str:
        seen.append(dict(env))
        raise EngineError("stopped here")

    env = vllm_parser.ParserEnv(version="0.0", python=tmp_path / "python", tree=tmp_path,
                                wheel="vllm.whl", sha256="0" * 64)  # fmt: skip
    (got,) = vllm_parser.parse(env, [("vllm", "serve", "m")], run=runner)
    assert isinstance(got, vllm_parser.Unavailable)
    (child,) = seen
    assert "VLLM_ATTENTION_BACKEND" not in child and child["HOME"] == str(tmp_path)
    assert child["VLLM_TARGET_DEVICE"] == "cpu"
