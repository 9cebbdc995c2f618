"""Pure parsers for the registry headers that steer the client.

``WWW-Authenticate`` (which auth scheme, and where to get a token) and
``ratelimit-remaining`` (how many pulls Docker Hub still allows). No I/O: unit
tests feed them text. ``Retry-After`` and backoff are every client's, in
:mod:`lockpipe.http`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lockpipe.http import whole_number

# One item at a time from where the last ended (each character read once: a search from
# every position of 'Bearer aaaa…' was quadratic, 64 KiB took 35 s): a parameter of the
# challenge before it, or a word that starts a challenge of its own (its scheme).
_SEP = re.compile(r"[\s,]*")
_PARAM = re.compile(r'([A-Za-z_][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))')
_WORD = re.compile(r"[^\s,]+")


@dataclass(frozen=True)
class Challenge:
    """One auth challenge: ``Bearer`` or ``Basic``, with its parameters (realm, service, scope)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)


def parse_challenges(header: str) -> list[Challenge]:
    """Every challenge of a ``WWW-Authenticate`` value (RFC 9110 11.6.1), in order. requests
    joins two such headers with ", ", so ``Bearer realm="…",service="…", Basic
    realm="Registry"`` is two challenges: read as one, Basic's realm replaced Bearer's."""
    out: list[Challenge] = []
    pos, end = 0, len(header)
    while (pos := _SEP.match(header, pos).end()) < end:  # type: ignore[union-attr]
        param = _PARAM.match(header, pos)
        if param and out:
            value = param.group(2) if param.group(2) is not None else param.group(3)
            out[-1].params[param.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
            pos = param.end()
            continue
        if param:  # a parameter before any scheme: no challenge to give it to
            pos = param.end()
            continue
        word = _WORD.match(header, pos)
        assert word is not None  # _SEP stopped at a character that is neither space nor ','
        out.append(Challenge(word.group().lower()))  # a scheme (or a token68 after one)
        pos = word.end()
    return out


def parse_challenge(header: str) -> Challenge | None:
    """The challenge to answer of a ``WWW-Authenticate`` value: its Bearer one when it
    offers one (the distribution spec's token flow), else its first; None when none."""
    found = parse_challenges(header)
    return next((c for c in found if c.scheme == "bearer"), found[0] if found else None)


def ratelimit_remaining(value: str | None) -> int | None:
    """``ratelimit-remaining: 76;w=21600`` → 76; None when absent or unreadable."""
    if not value:
        return None
    return whole_number(value.split(";", 1)[0].strip())
