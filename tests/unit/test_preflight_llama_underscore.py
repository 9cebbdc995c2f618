"""llama-server reads ``--ctx_size`` as ``--ctx-size``: b10069 ``common/arg.cpp:672-675``
turns every ``_`` of a ``--`` token into ``-`` before the lookup (single-dash tokens and
values are read as given), and has no ``--opt=value`` form. preflight must read the command
line the same way, or it judges a context the server is not given."""

from __future__ import annotations

import re
import tarfile

import pytest

from lockpipe.errors import FormatError
from lockpipe.preflight import llama_args, recurrent
from lockpipe.smoke.probes import speculates
from tests import pinned_llama

UNDERSCORED = ["llama-server", "--ctx_size", "262144", "--cache_type_k", "q4_0",
               "--cache_type_v", "Q8_0", "--no_kv_unified", "--parallel", "2"]  # fmt: skip


def test_underscore_spellings_are_the_dashed_options() -> None:
    dashed = [t.replace("_", "-") if t.startswith("--") else t for t in UNDERSCORED]
    args = llama_args.parse(UNDERSCORED)
    assert args == llama_args.parse(dashed)
    assert (args.ctx, args.type_k, args.type_v, args.kv_unified) == (262144, "q4_0", "q8_0", False)
    assert args.intent(None)[0] == "explicit"  # not "fit": the server keeps 262144


def test_single_dash_and_values_are_read_as_given() -> None:
    args = llama_args.parse(["llama-server", "-no_kvu", "-c", "4096"])
    assert args.unified is None  # -no_kvu is not -no-kvu: only -- tokens are rewritten
    assert llama_args.parse(["llama-server", "--swa_full"]).swa_full


@pytest.mark.parametrize("token", ["--ctx-size=4096", "--ctx_size=4096", "--no-kv-unified=1"])
def test_opt_equals_value_is_refused_as_llama_server_does(token: str) -> None:
    with pytest.raises(FormatError, match="no --opt=value form"):
        llama_args.parse(["llama-server", token])


def test_speculative_flags_in_underscore_spelling() -> None:
    spec = recurrent.speculative(["llama-server", "--spec_type", "draft-mtp",
                                  "--spec_draft_n_max", "3", "--cache_type_k_draft", "Q8_0",
                                  "--model_draft", "d.gguf"])  # fmt: skip
    assert (spec.types, spec.draft_n_max, spec.draft_type_k) == (("draft-mtp",), 3, "q8_0")
    assert spec.draft_model
    assert speculates(["llama-server", "--spec_type", "draft-mtp"])
    assert speculates(["vllm", "serve", "--speculative_config={}"])
    assert not speculates(["llama-server", "-m", "x.gguf"])


def test_the_rule_is_the_pinned_trees() -> None:
    with tarfile.open(pinned_llama.sdist()) as tar:
        member = tar.extractfile(f"{pinned_llama.ROOT}/common/arg.cpp")
        assert member is not None
        lines = member.read().decode().splitlines()
    body = "\n".join(lines[668:677])  # parse_cli_args, common/arg.cpp:669-677
    assert re.search(
        r'arg_prefix = "--";\s*std::string arg = argv\[i\];\s*'
        r"if \(arg\.compare\(0, arg_prefix\.size\(\), arg_prefix\) == 0\) \{\s*"
        r"std::replace\(arg\.begin\(\), arg\.end\(\), '_', '-'\);\s*\}\s*"
        r"if \(arg_to_options\.find\(arg\) == arg_to_options\.end\(\)\)",
        body,
    ), body
