"""Did-you-mean hints for names a person typed: targets, payloads, cards, keys. Pure.

One helper, so that every refusal of a name offers the nearest known one the same way
(difflib's ratio, as argparse's own ``invalid choice`` hint in Python 3.12+ does).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable


def nearest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``word``, or None when none is close."""
    choices = list(known)
    folded = {c.lower(): c for c in choices}
    hit = difflib.get_close_matches(word.lower(), list(folded), n=1, cutoff=0.6)
    return folded[hit[0]] if hit else None


def hint(word: str, known: Iterable[str]) -> str:
    """``" (did you mean X?)"`` for the nearest known name, or ``""``."""
    near = nearest(word, known)
    return f" (did you mean {near}?)" if near else ""


def unknown_keys(where: str, given: Collection[str], known: Collection[str]) -> list[str]:
    """One line per key of ``given`` outside ``known``: ``WHERE.KEY: unknown key (did you
    mean K?); known keys: …``, in sorted order; empty when every key is known."""
    return [
        f"{where}.{key}: unknown key{hint(key, known)}; known keys: {', '.join(sorted(known))}"
        for key in sorted(set(given) - set(known))
    ]
