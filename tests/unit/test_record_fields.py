"""Build records are read back field by field, each checked against its annotation: every
annotation a record field may have is known at import, so a new field of another type
fails a test naming it, never a KeyError in a user's read (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lockpipe.imagebuild.records import BuildRecord, field_kinds


@dataclass(frozen=True, kw_only=True)
class Future:
    tag: str
    note: str | None = None
    retries: int | None = None
    seconds: float = 0.0


def test_a_field_that_may_be_null_is_its_type_and_optional() -> None:
    assert field_kinds(Future) == {"tag": (str, False), "note": (str, True),
                                   "retries": (int, True), "seconds": (float, False)}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class Unreadable:
    tag: str
    layers: list[str]


def test_a_field_of_another_type_is_named_with_the_fix() -> None:
    with pytest.raises(TypeError) as info:
        field_kinds(Unreadable)
    assert str(info.value).startswith("Unreadable.layers: list[str] is none of str, bool, int")
    assert "lockpipe/imagebuild/records.py" in str(info.value)


def test_every_field_of_a_build_record_is_readable() -> None:
    kinds = field_kinds(BuildRecord)
    assert kinds["source_date_epoch"] == (int, False) and kinds["reproducible"] == (bool, False)
