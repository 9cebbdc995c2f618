"""Values read out of JSON from elsewhere: each wrong shape is one line, in the caller's error."""

from __future__ import annotations

from typing import Any

import pytest

from lockpipe.errors import CheckFailed, RegistryError
from lockpipe.jsonshape import Reader, kind_of, render

ANSWER = Reader(where="http://h/v1/models", root="the answer", error=CheckFailed)
DOC: dict[str, Any] = {"data": [{"id": "m", "n": 3, "ok": True, "none": None}], "o": {}}


def test_values_of_the_right_type_are_returned() -> None:
    assert ANSWER.get(DOC, ("data", 0, "id"), str) == "m"
    assert ANSWER.get(DOC, ("data", 0, "n"), int) == 3
    assert ANSWER.get(DOC, ("data", 0, "ok"), bool) is True
    assert ANSWER.get(DOC, (), dict) is DOC
    assert ANSWER.parse(b'{"a": 1}') == {"a": 1}


def test_a_default_stands_for_what_is_absent_or_null_only() -> None:
    assert ANSWER.get(DOC, ("usage", "tokens"), int, default=0) == 0
    assert ANSWER.get(DOC, ("data", 5, "id"), str, default="-") == "-"
    assert ANSWER.get(DOC, ("data", 0, "none"), str, default="-") == "-"
    assert ANSWER.get(DOC, ("data", 0, "none", "x"), int, default=7) == 7
    with pytest.raises(CheckFailed, match=r"data\[0\]\.id is a string, not an integer"):
        ANSWER.get(DOC, ("data", 0, "id"), int, default=0)


@pytest.mark.parametrize(
    ("doc", "path", "want", "message"),
    [
        ([1], ("data",), list, "http://h/v1/models: the answer is a list, not an object"),
        ({"data": {}}, ("data", 0), dict, "http://h/v1/models: data is an object, not a list"),
        (DOC, ("data", 1, "id"), str, "http://h/v1/models: the answer has no data[1]"),
        (DOC, ("data", 0, "name"), str, "http://h/v1/models: the answer has no data[0].name"),
        (DOC, ("data", 0, "none"), str, "http://h/v1/models: data[0].none is null, not a string"),
        (DOC, ("data", 0, "ok"), int, "http://h/v1/models: data[0].ok is true/false, not an "
         "integer"),
        (None, (), dict, "http://h/v1/models: the answer is null, not an object"),
    ],
)  # fmt: skip
def test_each_wrong_shape_is_one_line_naming_the_source_and_path(
    doc: object, path: tuple[str | int, ...], want: type, message: str
) -> None:
    with pytest.raises(CheckFailed) as info:
        ANSWER.get(doc, path, want)
    assert str(info.value) == message


def test_the_caller_s_error_class_and_fix() -> None:
    manifest = Reader(where="r/app@sha256:1", root="the manifest", error=RegistryError,
                      fix="bypass it")  # fmt: skip
    with pytest.raises(RegistryError) as info:
        manifest.parse(b"[]")
    assert str(info.value) == "r/app@sha256:1: the manifest is a list, not an object; bypass it"
    with pytest.raises(RegistryError, match="the manifest is not JSON; bypass"):
        manifest.parse(b"{")
    assert kind_of(1.5) == "a number" and kind_of(object()) == "object"
    assert render(("a", 0, "b", 1)) == "a[0].b[1]"
