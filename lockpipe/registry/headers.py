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

# A name starts where no name character comes before it: from inside a word the scan of
# 'Bearer aaaa…' would start again at every letter (quadratic; 64 KiB took 35 s).
_PARAM = re.compile(r'(?<![\w-])([A-Za-z_][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))')


@dataclass(frozen=True)
class Challenge:
    """One auth challenge: ``Bearer`` or ``Basic``, with its parameters (realm, service, scope)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)


def parse_challenge(header: str) -> Challenge | None:
    """The first challenge of a ``WWW-Authenticate`` value; None when there is none."""
    header = header.strip()
    if not header:
        return None
    scheme, _, rest = header.partition(" ")
    params = {}
    for match in _PARAM.finditer(rest):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        params[match.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
    return Challenge(scheme.lower(), params)


def ratelimit_remaining(value: str | None) -> int | None:
    """``ratelimit-remaining: 76;w=21600`` → 76; None when absent or unreadable."""
    if not value:
        return None
    return whole_number(value.split(";", 1)[0].strip())
