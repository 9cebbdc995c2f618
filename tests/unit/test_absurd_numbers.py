"""A number of thousands of digits, a value of the wrong kind, a URL that does not parse,
in what a server or a repository gives: one lockpipe error or problem, never a traceback.

Python's ``int()`` refuses a string of more than 4300 digits (ValueError), and a float
overflows past 10**308: each place that reads a number from outside bounds its digits.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import RegistryError
from lockpipe.http import Retries, retry_after, whole_number
from lockpipe.http.transport import Policy
from lockpipe.lock.model import Payload, PayloadFile
from lockpipe.lock.refs import DIGEST_RE
from lockpipe.payloads.checks import check_file
from lockpipe.payloads.snapshot import check_snapshot
from lockpipe.refresh import rules
from lockpipe.registry.creds import Credential
from lockpipe.registry.headers import Challenge
from lockpipe.registry.tokens import TokenServers
from tests.lockfactory import DIGEST, make_repo

DIGITS = "9" * 5000


def test_a_header_number_of_thousands_of_digits_is_no_number() -> None:
    assert whole_number(DIGITS) is None
    assert whole_number("9" * 21) is None
    assert whole_number("9" * 20) == 10**20 - 1
    assert retry_after(DIGITS) is None  # the client's own backoff, as for no header


def test_a_release_tag_of_thousands_of_digits_is_no_build_number() -> None:
    assert rules.build_number("b" + "1" * 5000) is None
    assert rules.build_number("b10069\n") is None
    assert rules.build_number("b10069") == 10069
    assert rules.tag_backwards("sources", "llama.cpp", "b10069", "b" + "1" * 5000) == []


def test_a_size_past_what_a_float_holds_still_gets_its_warning() -> None:
    (w,) = rules.size_jump("m", "m.gguf", 1000, 10**400)
    assert w.message.startswith("m.gguf: size 1,000 -> 10,000,000,")
    assert w.message.endswith(" %), more than 5%; check it is the same model")
    assert rules.size_jump("m", "x", 1000, 940)[0].message.count("(-6.0 %)") == 1
    assert rules.size_jump("m", "x", 1000, 1050) == []


def test_quantization_weights_that_are_not_an_object_are_a_problem_naming_them(
    tmp_path: Path,
) -> None:
    groups = {"group_0": {"weights": ["num_bits", 4]}}
    cfg = {"architectures": ["X"], "model_type": "x",
           "quantization_config": {"quant_method": "compressed-tensors",
                                   "config_groups": groups}}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "chat_template.jinja").write_text("{{x}}")
    p = Payload(name="p", repository="o/n", revision="a" * 40, snapshot=True, role="model",
                format="safetensors", files=(PayloadFile(path="config.json", size=1,
                                                         sha256="b" * 64),),
                expect={"quantization": {"format": "compressed-tensors", "bits": 4}})  # fmt: skip
    files = {n: tmp_path / n for n in ("config.json", "chat_template.jinja")}
    (problem,) = check_snapshot(p, files).problems
    assert problem.startswith("payloads.p.files.config.json: ")
    assert "quantization_config.config_groups.group_0.weights is list, not an object" in problem


def _text(x: str) -> bytes:
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def test_a_gguf_layer_number_of_thousands_of_digits_is_no_nextn_layer(tmp_path: Path) -> None:
    name = "blk." + "1" * 5000 + ".nextn.w"
    data = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + _text("general.architecture")
    data += struct.pack("<I", 8) + _text("qwen3")
    data += _text(name) + struct.pack("<I", 1) + struct.pack("<Q", 32) + struct.pack("<IQ", 0, 0)
    data += b"\0" * 512
    f = tmp_path / "m.gguf"
    f.write_bytes(data)
    p = Payload.one_file(name="p", repository="o/n", revision="a" * 40, filename="m.gguf",
                         size=len(data), sha256="b" * 64, role="model", format="gguf",
                         expect={})  # fmt: skip
    assert check_file(p, f, len(data)).problems == []


def _tokens() -> TokenServers:
    cred = Credential(username="u", secret="pw-do-not-log", source="auth.json")
    policy = Policy(retries=Retries(attempts=0), timeout=1.0)
    return TokenServers("registry.example", "https", cred, policy)


@pytest.mark.parametrize("realm", ["https://[::1/token", "/token", "ftp://tok/t", "https:///t"])
def test_a_token_realm_that_is_no_url_is_one_error_naming_the_registry(realm: str) -> None:
    """A relative or non-http realm ('/token') was requests' MissingSchema, 'check the
    address of  and the credentials given for it': no host, and the credentials blamed."""
    challenge = Challenge(scheme="Bearer", params={"realm": realm})
    with pytest.raises(RegistryError) as err:
        _tokens().fetch(challenge, "repository:x:pull", "GET x")
    assert str(err.value) == (
        f"GET x: registry.example names the token server {realm!r}, which is not an http(s) "
        "URL; fix the registry's auth realm to the URL of its token server"
    )


def test_a_token_realms_user_and_password_are_not_shown() -> None:
    challenge = Challenge(scheme="Bearer", params={"realm": "http://me:realm-secret@tok/t"})
    with pytest.raises(RegistryError, match="names the token server http://\\*\\*\\*@tok/t, "
                       "not https") as err:  # fmt: skip
        _tokens().fetch(challenge, "repository:x:pull", "GET x")
    assert "realm-secret" not in str(err.value)


def test_a_digest_with_a_last_newline_is_no_digest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = make_repo(tmp_path, relocked=False)
    text = json.loads(lock.read_text())
    text["bases"]["busybox"]["digest"] = DIGEST + "\n"
    lock.write_text(json.dumps(text))
    assert main(["plan", "--lock", str(lock)]) != 0
    err = capsys.readouterr().err
    assert "bases.busybox.digest: " in err and "must be 'sha256:' and 64 lowercase hex" in err
    assert "Traceback" not in err
    assert DIGEST_RE.match(DIGEST + "\n") is None  # as the engines and the registry client use it
