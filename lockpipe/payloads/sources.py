"""Where a payload comes from: the Hub's resolve URL, the mirror, and the token.

Pure functions over an environment mapping, so tests pass a dict instead of
touching ``os.environ``. The token travels inside :class:`Candidate` with
``repr=False``: it is only ever put into an Authorization header, and only for
the upstream host (never the mirror, never a redirect target elsewhere). A user
and password in a URL (``--mirror http://user:token@host/``) are taken out of
it the same way, so no URL a message shows carries them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from lockpipe.errors import FetchError, LockError
from lockpipe.fs import cache_home, read_utf8
from lockpipe.lock.model import Payload
from lockpipe.payloads.neterrors import bad_url
from lockpipe.urls import basic_auth, redact, split_userinfo

DEFAULT_ENDPOINT = "https://huggingface.co"


def mirror_url(mirror: str, url: str) -> str:
    """Where ``url`` lives on ``mirror``: ``{mirror}/{host}/{path}``."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # an HF_ENDPOINT such as "http://[::1"
        raise bad_url(redact(url), exc) from None
    host = parts.netloc.rpartition("@")[2]  # an HF_ENDPOINT's login is not the mirror's path
    return f"{mirror.rstrip('/')}/{host}{parts.path}"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One URL to try (without user and password: it is shown in messages).

    ``token``, else ``login`` (the user and password the URL was given with), is sent
    to ``url``'s own origin and nowhere else.
    """

    url: str
    kind: str = "upstream"  # "mirror" or "upstream"
    token: str | None = field(default=None, repr=False, compare=False)
    login: tuple[str, str] | None = field(default=None, repr=False, compare=False)

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc

    @property
    def authorization(self) -> str | None:
        """The Authorization header for ``url``'s origin, if any."""
        if self.token:
            return f"Bearer {self.token}"
        return basic_auth(*self.login) if self.login else None

    def header(self, scope: str) -> str | None:
        """As :class:`lockpipe.http.transport.Credentials`: :attr:`authorization`."""
        return self.authorization

    def refused_fix(self, sent: bool) -> str:
        """What to do when this mirror answers 401; ``sent``: credentials went with it."""
        if sent:
            return "the mirror refused the user and password in --mirror; check them"
        return "the mirror asks for credentials: give them in --mirror (http://USER:TOKEN@HOST/…)"


def candidate(url: str, kind: str, token: str | None = None) -> Candidate:
    """``url`` to try, its user and password (if it has them) moved into ``login``."""
    try:
        bare, login = split_userinfo(url)
    except ValueError as exc:
        raise bad_url(redact(url), exc) from None
    return Candidate(url=bare, kind=kind, token=token, login=login)


def hf_endpoint(env: Mapping[str, str]) -> str:
    """``HF_ENDPOINT`` (for a private Hub or a test server), else huggingface.co."""
    return (env.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_offline(env: Mapping[str, str]) -> bool:
    """``HF_HUB_OFFLINE`` is set as huggingface_hub reads it (1, ON, YES or TRUE)."""
    return env.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def hf_url(endpoint: str, repository: str, revision: str, filename: str) -> str:
    """``{endpoint}/{repo}/resolve/{revision}/{file}``: the Hub's download URL at a commit."""
    return f"{endpoint}/{repository}/resolve/{revision}/{quote(filename)}"


def hf_token(env: Mapping[str, str]) -> str | None:
    """The Hub token: ``HF_TOKEN``, else the file huggingface_hub's login writes.

    That file is ``HF_TOKEN_PATH``, else ``$HF_HOME/token`` (HF_HOME defaults to
    ``$XDG_CACHE_HOME/huggingface``, i.e. ``~/.cache/huggingface``).
    """
    token = env.get("HF_TOKEN", "").strip()
    if token:
        return token
    path = env.get("HF_TOKEN_PATH")
    if not path:
        path = os.path.join(env.get("HF_HOME") or cache_home(env) / "huggingface", "token")
    try:
        return read_utf8(Path(path).expanduser(), FetchError).strip() or None
    except OSError:
        return None


def candidates(url: str, mirror: str | None, token: str | None = None) -> list[Candidate]:
    """The mirror's copy first (no token: a mirror is ours), then upstream (with the token)."""
    out = [candidate(mirror_url(mirror, url), "mirror")] if mirror else []
    return [*out, candidate(url, "upstream", token)]


def file_url(payload: Payload, path: str, env: Mapping[str, str]) -> str:
    """The upstream URL of the file ``path`` of a pinned payload (one of a snapshot's too)."""
    if payload.revision is None:  # run_payloads refuses unpinned entries before this
        raise LockError(f"payloads.{payload.name}: no revision pinned; pin it before fetching")
    return hf_url(hf_endpoint(env), payload.repository, payload.revision, path)


def file_candidates(
    payload: Payload, path: str, mirror: str | None, env: Mapping[str, str]
) -> list[Candidate]:
    return candidates(file_url(payload, path, env), mirror, hf_token(env))


def repo_page(url: str) -> str:
    """The repository page of a resolve URL (where gated repos are accepted), else the URL."""
    head, sep, _ = url.partition("/resolve/")
    return head if sep else url
