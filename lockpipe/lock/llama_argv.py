"""How ``llama-server`` reads an option's name from argv (b10069 ``common/arg.cpp``); pure.

``common_params_parse_ex`` (``parse_cli_args``, ``common/arg.cpp:672-675``; the same at
``:1029-1031`` in ``common_params_to_map``, the router's copy): a token that
begins with ``--`` has every ``_`` turned into ``-`` before it is looked up, so
``--ctx_size`` is ``--ctx-size``; a single-dash token (``-no_kvu``) and the value token that
follows an option (read raw as ``argv[++i]``) are left as they are. There is no
``--opt=value`` form: the whole token is looked up, no name holds ``=``, and the server
stops with "error: invalid argument: --ctx-size=4096".
"""

from __future__ import annotations

from collections.abc import Container


def option(token: str) -> str:
    """``token`` as ``common/arg.cpp`` looks it up: ``_`` -> ``-`` in a ``--`` token."""
    return token.replace("_", "-") if token.startswith("--") else token


def refused(token: str, known: Container[str]) -> str | None:
    """The option an ``--opt=value`` token spells when ``opt`` is in ``known``: llama-server
    refuses it as an invalid argument (no ``=`` form), so it sets nothing; else None."""
    name, eq, _ = option(token).partition("=")
    return name if eq and token.startswith("--") and name in known else None
