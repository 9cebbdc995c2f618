"""Credentials at a trust boundary, without a network: origins, redaction, redirects.

The same rules against real servers on 127.0.0.1 and 127.0.0.2 run in
tests/integration/test_registry_boundaries.py and test_payload_boundaries.py.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import requests

from lockpipe.errors import RegistryError
from lockpipe.payloads.neterrors import bad_url
from lockpipe.payloads.partial import Partial
from lockpipe.payloads.sources import candidates
from lockpipe.registry.creds import Credential
from lockpipe.registry.transport import Registry
from lockpipe.urls import (
    basic_auth,
    clipped,
    next_page,
    origin,
    redact,
    redact_url,
    same_origin,
    shown,
    split_userinfo,
)

CRED = Credential(username="alice", secret="s3cret", source="test")


@pytest.mark.parametrize(
    ("url", "other", "same"),
    [
        ("https://r.example/v2/x", "https://R.example:443/", True),
        ("http://127.0.0.1:5000/v2/x?digest=1", "http://127.0.0.1:5000/", True),
        ("http://127.0.0.2:5000/v2/x", "http://127.0.0.1:5000/", False),  # another host
        ("http://127.0.0.1:5001/v2/x", "http://127.0.0.1:5000/", False),  # another port
        ("http://r.example/v2/x", "https://r.example/", False),  # https down to http
        ("http://[::1/x", "http://[::1]/", False),  # unparsable: nobody's origin
        # urllib.parse reads 127.0.0.1:5000 after the '@'; urllib3 connects to :6000
        ("http://127.0.0.1:6000\\@127.0.0.1:5000/x", "http://127.0.0.1:5000/", False),
        ("http://127.0.0.1:6000\\\\@127.0.0.1:5000/x", "http://127.0.0.1:5000/", False),
        ("http://evil.example\\@r.example/x", "http://r.example/", False),
        ("http://Bücher.example/x", "http://xn--bcher-kva.example/", True),  # IDNA
        ("http://[::1]:80/x", "http://[::1]/", True),
    ],
)
def test_credentials_belong_to_one_scheme_host_and_port(url: str, other: str, same: bool) -> None:
    assert same_origin(url, other) is same


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6000\\@127.0.0.1:5000/x",
        "http://evil.example\\@r.example/x",
        "http://a\\b/x",
        "http://u:pw@evil.example\\@r.example/x",
    ],
)
def test_a_url_read_two_ways_is_nobodys_origin(url: str) -> None:
    with pytest.raises(ValueError, match="names two hosts") as e:
        origin(url)
    assert "pw" not in str(e.value)


def test_the_origin_is_where_requests_connects() -> None:
    assert origin("HTTP://R.example/x") == ("http", "r.example", 80)
    assert origin("https://u:p@r.example:5000/x\\y@z") == ("https", "r.example", 5000)
    assert origin("http://127.0.0.1:6000\t@127.0.0.1:5000/x") == ("http", "127.0.0.1", 5000)


def test_userinfo_is_taken_out_and_never_shown() -> None:
    url = "http://me:t%40ken@mirror.local:8080/m/"
    assert split_userinfo(url) == ("http://mirror.local:8080/m/", ("me", "t@ken"))
    assert split_userinfo("https://huggingface.co/x") == ("https://huggingface.co/x", None)
    text = f"fetching x (mirror {url} first); then https://tok@h/y and ftp://h/@z"
    assert redact(text) == (
        "fetching x (mirror http://***@mirror.local:8080/m/ first); then https://***@h/y "
        "and ftp://h/@z"
    )
    mirror, upstream = candidates("https://hub.example/o/m/resolve/r/f", url, "hf_tok")
    assert mirror.url == "http://mirror.local:8080/m/hub.example/o/m/resolve/r/f"
    assert mirror.authorization == basic_auth("me", "t@ken") and "t@ken" not in repr(mirror)
    assert upstream.authorization == "Bearer hf_tok"


def test_a_url_without_a_scheme_is_shown_without_its_login() -> None:
    assert redact_url("alice:s3cretpw@127.0.0.1:8080/m") == "***@127.0.0.1:8080/m"
    assert redact_url("http://alice:pw@h/x") == "http://***@h/x"
    assert redact_url("127.0.0.1:8080/m") == "127.0.0.1:8080/m"
    url = "alice:s3cretpw@127.0.0.1:8080/127.0.0.1/x"
    with pytest.raises(requests.exceptions.InvalidSchema) as e:
        requests.get(url, timeout=1)  # no adapter: refused before any connection
    said = str(bad_url(url, e.value))
    assert "s3cretpw" not in said and "***@127.0.0.1:8080" in said


class Recorder(requests.Session):
    """A session that answers from ``answers`` (url -> (status, headers)) and records."""

    def __init__(self, answers: Mapping[str, tuple[int, dict[str, str]]]) -> None:
        super().__init__()
        self.answers = answers
        self.sent: list[tuple[str, str, str | None]] = []

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kw: Any) -> Any:
        assert kw.get("allow_redirects") is False  # every hop is the transport's to judge
        self.sent.append((str(method), str(url), (kw.get("headers") or {}).get("Authorization")))
        status, headers = self.answers[str(url)]
        resp = requests.Response()
        resp.status_code, resp.url = status, str(url)
        resp.headers.update(headers)
        resp.raw, resp._content = io.BytesIO(), b""
        return resp


def _registry(answers: Mapping[str, tuple[int, dict[str, str]]]) -> tuple[Registry, Recorder]:
    reg = Registry("r.example", scheme="https", credential=CRED)
    session = reg.transport.session = Recorder(answers)
    reg._basic = True  # the host asked for Basic before: sent up front
    return reg, session


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://cas-bridge.xethub.hf.co/x?X-Amz-Credential=AKIA%2F1&X-Amz-Expires=3600"
         "&X-Amz-Signature=abc&X-Amz-Security-Token=t0k",
         "https://cas-bridge.xethub.hf.co/x?X-Amz-Credential=***&X-Amz-Expires=3600"
         "&X-Amz-Signature=***&X-Amz-Security-Token=***"),
        ("https://cdn/f?Expires=1&Signature=aa&Policy=bb&Key-Pair-Id=K",
         "https://cdn/f?Expires=1&Signature=***&Policy=***&Key-Pair-Id=K"),
        ("https://acct.blob.core.windows.net/c/f?sv=2020&se=2026&sig=cc",
         "https://acct.blob.core.windows.net/c/f?sv=2020&se=2026&sig=***"),
        ("(https://u:p@h/x?access_token=abc, next)", "(https://***@h/x?access_token=***, next)"),
        ("https://hub/api/models/o/r/tree/main?recursive=true&cursor=5",
         "https://hub/api/models/o/r/tree/main?recursive=true&cursor=5"),
    ],
)  # fmt: skip
def test_a_signed_url_is_shown_without_its_signature(url: str, shown: str) -> None:
    assert redact(f"GET {url}: HTTP 403") == f"GET {shown}: HTTP 403"


def test_a_redirect_elsewhere_or_down_to_http_carries_no_credentials() -> None:
    blob = "https://r.example/v2/app/blobs/sha256:1"
    reg, session = _registry({
        blob: (307, {"Location": "http://r.example/v2/app/blobs/sha256:1?plain"}),
        "http://r.example/v2/app/blobs/sha256:1?plain": (302, {"Location": "https://s.example/b"}),
        "https://s.example/b": (302, {"Location": "https://r.example/v2/app/back"}),
        "https://r.example/v2/app/back": (200, {}),
    })  # fmt: skip
    assert reg.request("GET", "app", "blobs/sha256:1").status_code == 200
    auth = basic_auth("alice", "s3cret")
    assert [a for _, _, a in session.sent] == [auth, None, None, auth]


def test_an_upload_location_elsewhere_gets_none_and_its_401_is_named() -> None:
    there = "https://uploads.example/u/1?_state=x"
    reg, session = _registry({there + "&digest=sha256:1": (401, {"WWW-Authenticate": "Basic"})})
    with pytest.raises(RegistryError) as err:
        reg.request("PUT", "app", there + "&digest=sha256:1", data=b"x", ok=(201,))
    assert session.sent == [("PUT", there + "&digest=sha256:1", None)]
    assert "sent the request on to https://uploads.example" in str(err.value)
    assert "s3cret" not in str(err.value)


def test_an_https_registry_gets_no_password_sent_to_a_plain_http_token_server() -> None:
    challenge = 'Bearer realm="http://auth.example/token",service="r"'
    reg, session = _registry(
        {"https://r.example/v2/app/manifests/1": (401, {"WWW-Authenticate": challenge})}
    )
    reg._basic = False
    with pytest.raises(RegistryError, match=r"token server http://auth\.example/token, not https"):
        reg.request("GET", "app", "manifests/1")
    assert [url for _, url, _ in session.sent] == ["https://r.example/v2/app/manifests/1"]


def test_a_put_follows_307_but_not_302() -> None:
    put = "https://r.example/v2/app/manifests/1"
    reg, session = _registry({put: (302, {"Location": "https://r.example/v2/app/other"})})
    with pytest.raises(RegistryError, match="answered 302"):
        reg.request("PUT", "app", "manifests/1", data=b"{}", ok=(201,))
    assert len(session.sent) == 1  # a 302 would make the upload a GET: not followed


def test_a_partial_file_exists_only_once_bytes_arrive(tmp_path: Path) -> None:
    path = tmp_path / "blob.lockpipe-partial"
    partial = Partial(path, "0" * 64, 1 << 30)
    partial.flush(force=True)
    assert not path.exists() and not partial.journal.exists()  # nothing reserved yet
    partial.close()
    assert list(tmp_path.iterdir()) == []
    partial = Partial(path, "0" * 64, 1 << 20)
    os.pwrite(partial.fd, b"abc", 0)
    partial.wrote(0, 3)
    partial.flush(force=True)
    assert path.stat().st_size == 1 << 20  # reserved at the first bytes
    partial.close()
    resumed = Partial(path, "0" * 64, 1 << 20)
    assert resumed.done.total() == 3 and resumed.read(3, 0) == b"abc"
    resumed.reset()
    resumed.close()  # it holds nothing now: nothing is left behind
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # split_userinfo (like urlsplit) ends the userinfo at the LAST '@' of the authority
        ("mirror http://bob:s3cr@tpass@127.0.0.1:5000/m first",
         "mirror http://***@127.0.0.1:5000/m first"),
        ("mirror http://bob:pa ss@127.0.0.1:5000/m first",
         "mirror http://***@127.0.0.1:5000/m first"),
        ("http://a:b@c@h1 then https://d:e f@h2/x", "http://***@h1 then https://***@h2/x"),
        ("https://h/x a@b\nhttp://h2 c", "https://h/x a@b\nhttp://h2 c"),
    ],
)  # fmt: skip
def test_a_password_holding_at_or_a_space_is_never_shown_in_part(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert "s3cr" not in redact(text) and "tpass" not in redact(text) and "ss@" not in redact(text)


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("http://[::1/next", "Invalid IPv6 URL"),  # an IPv6 literal never closed
        ("//[::1/next", "Invalid IPv6 URL"),  # the same, scheme-relative
        ("http://r.example:99999/next", "Port out of range"),
        ("http://\uff03/next", "invalid characters under NFKC normalization"),
    ],
)
def test_a_next_link_that_is_no_url_is_the_callers_error_naming_it(target: str, why: str) -> None:
    """urllib's ValueError was a traceback out of every caller (issue 18)."""
    link = f'<{target}>; rel="next", <https://u:pw@r.example/{"x" * 500}>; rel="last"'
    with pytest.raises(RegistryError) as info:
        next_page(link, "http://r.example/v2/x/tags/list", RegistryError)
    text = str(info.value)
    assert text.startswith(f"the Link header '<{target}")
    assert "of http://r.example/v2/x/tags/list names a next page that is no URL" in text
    assert why in text and "pw" not in text and "x" * 300 not in text
    assert next_page(f'<{target[:-4]}ok>; rel="prev"', "http://r.example/", RegistryError) is None


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("mirror https://user:s3cr#et@mirror.example/ x", "mirror https://***@mirror.example/ x"),
        ("https://hf:s3cr/et@hub.example", "https://***@hub.example"),
        ("https://u:s3cr?t@h/y?a=1", "https://***@h/y?a=1"),
        ("https://user:s3cr@", "https://***@"),
        ("ftp://h/@z", "ftp://h/@z"),  # no ':' before the '@': a path, not a password
        (f"docker://h:5000/r@sha256:{'a' * 64}", f"docker://h:5000/r@sha256:{'a' * 64}"),
        (f"docker://u:s3cr#x@h/r@sha256:{'a' * 64}", f"docker://***@h/r@sha256:{'a' * 64}"),
    ],
)  # fmt: skip
def test_a_password_holding_hash_slash_or_question_mark_is_hidden(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_shown_quotes_short_text_whole() -> None:
    assert shown("not found") == "'not found'"


def test_shown_cuts_long_text_and_gives_its_length() -> None:
    assert shown("x" * 5000, 10) == "'xxxxxxxxxx'… (5,000 characters)"


def test_shown_keeps_a_text_of_exactly_the_limit_whole() -> None:
    assert shown("y" * 80) == repr("y" * 80)


def test_shown_escapes_a_newline_so_the_error_stays_one_line() -> None:
    out = shown("a\nb\x00c")
    assert "\n" not in out and "\x00" not in out
    assert out == "'a\\nb\\x00c'"


def test_shown_masks_a_password_in_the_text() -> None:
    out = shown("denied at https://user:pw@host/v2/ today")
    assert "pw" not in out.replace("***", "")
    assert "https://***@host/" in out


def test_shown_gives_a_value_that_is_no_string_as_its_repr_unquoted() -> None:
    """A missing header (None) or a Hub's size read as 'None' or "'1000'" before."""
    assert shown(None) == "None" and shown(1000) == "1000"
    assert shown(list(range(100)), 10) == "[0, 1, 2, … (390 characters)"


def test_clipped_keeps_a_message_one_line_unquoted_and_redacted() -> None:
    said = clipped("bad ref\n'x': see https://u:secret@host/ " + "y" * 300, 60)
    assert "\n" not in said and "secret" not in said and not said.startswith("'")
    assert said.startswith("bad ref 'x': see https://***@host/ y") and said.endswith(" characters)")
