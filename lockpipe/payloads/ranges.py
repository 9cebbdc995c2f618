"""Sets of half-open byte ranges: which parts of a partial file are already written."""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class RangeSet:
    """Sorted, merged, non-overlapping ``[start, end)`` ranges."""

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()) -> None:
        self._r: list[tuple[int, int]] = []
        for start, end in ranges:
            self.add(start, end)

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        merged: list[tuple[int, int]] = []
        for s, e in sorted([*self._r, (start, end)]):
            if merged and s <= merged[-1][1]:  # overlapping or touching
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((s, e))
        self._r = merged

    def total(self) -> int:
        return sum(e - s for s, e in self._r)

    def covers(self, start: int, end: int) -> bool:
        return any(s <= start and end <= e for s, e in self._r)

    def end_of(self, offset: int) -> int | None:
        """The end of the range holding ``offset``, or None if ``offset`` is not written."""
        for s, e in self._r:
            if s <= offset < e:
                return e
        return None

    def missing(self, size: int) -> list[tuple[int, int]]:
        """The gaps in ``[0, size)``."""
        gaps, pos = [], 0
        for s, e in self._r:
            if s > pos:
                gaps.append((pos, min(s, size)))
            pos = max(pos, e)
        if pos < size:
            gaps.append((pos, size))
        return [(s, e) for s, e in gaps if e > s]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(list(self._r))

    def as_list(self) -> list[list[int]]:
        return [[s, e] for s, e in self._r]


def split(gaps: Iterable[tuple[int, int]], piece: int) -> list[tuple[int, int]]:
    """Cut each gap into pieces of at most ``piece`` bytes, in file order."""
    out = []
    for start, end in gaps:
        for s in range(start, end, piece):
            out.append((s, min(s + piece, end)))
    return out
