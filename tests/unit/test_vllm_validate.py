"""What preflight asks vLLM's own backend and page functions, and how it reads the answer.

The answers vLLM's code gives are tested in tests/integration/test_vllm_parser.py (the
real wheel, torch's CPU build); here only lockpipe's side: the facts sent, the checks made
from an answer, and the interpreter check of the parser's environment.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.errors import LockpipeError
from lockpipe.lock.model import load_lock
from lockpipe.preflight import config, host, plan, vllm_kv, vllm_parser_env, vllm_validate
from lockpipe.preflight.whatif import Overrides

REPO = Path(__file__).resolve().parents[2]
LOCK = load_lock(REPO / "locks" / "digests.json")
CFG = config.load(REPO / "locks" / "preflight.json")


def asked(card: str, over: Overrides) -> dict:  # type: ignore[type-arg]
    target = LOCK.target("frank-small")
    shape = plan.model_shape(LOCK, CFG, target, None)
    got = plan.validation_request(LOCK, CFG, target, host.card_named(card), shape, over)
    assert got is not None
    return got


def test_the_request_carries_each_layer_as_the_runner_would_build_its_spec() -> None:
    got = asked("rtx3090", Overrides())
    layers = got["layers"]
    assert got["capability"] == [8, 6] and got["gemma4_hook"] is True
    assert got["assumed"] == {"kv_cache_dtype": "bfloat16", "backend": None}
    assert len(layers) == 48 and sum(1 for x in layers if x["sliding_window"]) == 40
    full = next(x for x in layers if not x["sliding_window"])
    assert (full["head_size"], full["head_size_v"], full["num_kv_heads"]) == (512, 512, 1)
    assert {x["kv_cache_dtype"] for x in layers} == {"bfloat16"}


def test_turboquant_boundary_layers_are_asked_at_auto() -> None:
    got = asked("rtx3090", Overrides(kv_dtype="turboquant_k8v4", attention_backend="TURBOQUANT"))
    auto = [x["index"] for x in got["layers"] if x["kv_cache_dtype"] == "auto"]
    assert auto == [0, 1, 46, 47]
    assert got["assumed"] == {"kv_cache_dtype": "turboquant_k8v4", "backend": "TURBOQUANT"}


def _kind(backend: str | None, refused: str | None = None) -> vllm_validate.Kind:
    return vllm_validate.Kind(head_size=512, sliding=False, kv_dtype="bfloat16", layers=(5, 11),
                              backend=backend, refused=refused, not_importable=())  # fmt: skip


def test_a_refusal_fails_with_vllms_own_words_and_says_it_ran_on_a_faked_card() -> None:
    v = vllm_validate.Validation(version="0.29.0", forced="FLASH_ATTN", after_hook="FLASH_ATTN",
                                 kinds=(_kind(None, "Selected backend … not valid"),))  # fmt: skip
    check = vllm_validate.backend_check(v, (8, 6))
    assert check.status == "fail" and "Selected backend … not valid" in check.detail
    assert "sm 8.6 card and the wheel's compiled extensions are fakes" in check.detail
    assert check.fix is not None and "drop --attention-backend" in check.fix


def test_pages_that_differ_from_lockpipes_arithmetic_warn_naming_both() -> None:
    page = vllm_kv.Page(layer=5, sliding=False, kv_dtype="bfloat16", per_token=2048, block=16,
                        page=32768)  # fmt: skip
    rows = (vllm_validate.PageRow(index=5, page_before=32768, block=32, page=65536),)
    v = vllm_validate.Validation(version="0.29.0", forced=None, after_hook=None,
                                 kinds=(_kind("TRITON_ATTN"),), pages=rows)  # fmt: skip
    check = vllm_validate.page_check(v, [page])
    assert check is not None and check.status == "warn"
    assert "layer 5: vLLM block 32 page 65,536 B, lockpipe block 16 page 32,768 B" in check.detail
    same = vllm_validate.page_check(
        vllm_validate.Validation(version="0.29.0", forced=None, after_hook=None, kinds=(),
                                 pages=(vllm_validate.PageRow(index=5, page_before=32768,
                                                              block=16, page=32768),)),
        [page],
    )  # fmt: skip
    assert same is not None and same.status == "pass"


def test_an_answer_that_did_not_run_is_said_so() -> None:
    got = vllm_validate.read({"not_run": "vLLM parsed {...}"}, "0.29.0")
    assert isinstance(got, vllm_validate.NotRun) and "vLLM parsed" in got.reason
    err = vllm_validate.read({"error": "ModuleNotFoundError: x"}, "0.29.0")
    assert isinstance(err, vllm_validate.NotRun) and "failed here" in err.reason


def test_the_parser_environment_takes_the_constraints_set_of_the_running_python() -> None:
    sets = vllm_parser_env.constraint_sets(REPO, "0.29.0")
    assert {py: p.name for py, p in sets.items()} == {
        "3.11": "vllm-parser-0.29.0.txt", "3.13": "vllm-parser-0.29.0-py3.13.txt"}  # fmt: skip
    for version in ("0.29.0", "0.33.0"):
        for python in ((3, 11), (3, 13)):
            vllm_parser_env.check_python(REPO, version, python)
            pins = vllm_parser_env.constraints_for(REPO, version, python)
            assert pins.is_file() and pins.with_suffix(".in").is_file()
            # each set says the Python it was resolved for in its re-resolve command
            resolved = f"--python-version {python[0]}.{python[1]}"
            assert resolved in pins.with_suffix(".in").read_text()
    with pytest.raises(LockpipeError) as err:
        vllm_parser_env.check_python(REPO, "0.29.0", (3, 12))
    text = str(err.value)
    assert "pinned for Python 3.11 (constraints/vllm-parser-0.29.0.txt), 3.13 " in text
    assert "this is Python 3.12" in text
    assert "python3.13 -m lockpipe.preflight.vllm_parser_env" in text
    assert "copy constraints/vllm-parser-0.29.0-py3.13.in to " in text
    assert "constraints/vllm-parser-0.29.0-py3.12.in" in text
    # a version with no set at all: the name its first set would have, no Python refused
    assert vllm_parser_env.constraints_for(REPO, "9.9.9").name == "vllm-parser-9.9.9.txt"
    vllm_parser_env.check_python(REPO, "9.9.9", (3, 12))


def test_every_version_with_a_set_for_a_python_is_what_the_scheduled_refresh_builds() -> None:
    """nox -s vllm-parser -- --all (.github/workflows/refresh.yml): the versions whose
    parser environment this Python can build, each with lockpipe's rules for it."""
    for python in ((3, 11), (3, 13)):
        assert vllm_parser_env.with_sets(REPO, python) == ["0.29.0", "0.33.0"]
    assert vllm_parser_env.with_sets(REPO, (3, 12)) == []  # no set is resolved for 3.12
