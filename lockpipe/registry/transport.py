"""One registry host over HTTP: auth challenges, token cache, rate limits.

:class:`Registry` is the registry's knowledge on top of :class:`lockpipe.http.transport.Transport`,
which owns the session (connection reuse matters: resolving 40 bases is 160 small
requests), the retries, Retry-After and redirects. Here: Bearer tokens cached per scope
under a lock, so threads resolving different references share them; the answer to a
401 challenge; and the registry's words for each failure (:meth:`Registry.fixes`), so
every one leaves as a :class:`RegistryError` naming the host, what was asked, the status
and the fix.

Credentials go to this registry's own origin (scheme, host, port) and to the token
server it names, nowhere else: neither a redirect (a blob GET sent on to a storage
backend) nor an upload ``Location`` on another host or over plain http carries them.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Collection, Mapping
from urllib.parse import urljoin

import requests

from lockpipe.errors import RegistryError
from lockpipe.http import MAX_REDIRECTS, Answer, Data, Retries
from lockpipe.http.transport import Fixes, Policy, Req, Transport, literal
from lockpipe.log import echo
from lockpipe.registry.creds import Credential
from lockpipe.registry.headers import Challenge, parse_challenge, ratelimit_remaining
from lockpipe.registry.tokens import TokenServers, refused
from lockpipe.urls import basic_auth, redact, same_origin, shown

RETRY_AFTER_CAP = 60.0  # a Retry-After asking for longer fails at once: no run sleeps for hours
BACKOFF_BASE, BACKOFF_CAP = 0.5, 8.0
LOW_RATELIMIT = 10
MIRROR_FIX = "use a mirror (registries.conf)"
# containers/image (podman, buildah, skopeo) reads no manifest past 4 MiB
# (internal/iolimits MaxManifestBodySize); the same here, whatever the registry sends
MAX_MANIFEST = 4 << 20
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")  # a URL's scheme (any case): absolute


class Registry:
    """The v2 API of one host; thread-safe; one per host, shared by every reference on it."""

    def __init__(
        self,
        endpoint_host: str,
        *,
        scheme: str,
        credential: Credential | None,
        timeout: float = 30.0,
        retries: int = 4,
    ) -> None:
        self.host = endpoint_host
        self.scheme = scheme
        self.credential = credential
        self.timeout = timeout
        self.ratelimit_remaining: int | None = None  # the last value the registry sent
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[str, float]] = {}  # scope -> (token, expires at)
        self._basic = False  # the host asked for Basic: send it up front
        self._challenge: Challenge | None = None  # the last Bearer challenge: renews tokens early
        policy = Policy(retries=Retries(attempts=retries, base=BACKOFF_BASE, cap=BACKOFF_CAP,
                                        longest=RETRY_AFTER_CAP), timeout=timeout)  # fmt: skip
        self.transport = Transport(policy, self.fixes(), watch=self._note_ratelimit)
        self.token_servers = TokenServers(endpoint_host, scheme, credential, policy)
        self.transport.login(self.url("", "/"), self, self._challenged)

    def __repr__(self) -> str:
        return f"Registry({self.scheme}://{self.host}, credential={self.credential})"

    def url(self, repository: str, path: str) -> str:
        """A full URL: ``path`` under ``/v2/<repository>/`` (``manifests/…``), or a URL
        (``http://…``, ``//host/…``, ``/v2/…``) as RFC 3986 resolves it on this registry.
        An upload Location is resolved against its request first (:meth:`request`)."""
        base = f"{self.scheme}://{self.host}/v2/{repository}/"
        if path.startswith("/") or _SCHEME.match(path):
            return urljoin(base, path)
        return base + path

    def owns(self, url: str) -> bool:
        """Whether ``url`` is on this registry's origin, the one its credentials are for."""
        return same_origin(url, f"{self.scheme}://{self.host}/")

    def request(
        self,
        method: str,
        repository: str,
        path: str,
        *,
        actions: str = "pull",
        headers: Mapping[str, str] | None = None,
        data: Data = None,
        ok: Collection[int] = (200,),
    ) -> requests.Response:
        """Send one API request, authenticating and retrying as the registry asks."""
        what = redact(f"{method} {self.host}/{repository} {path.split('?', 1)[0]}")
        scope = f"repository:{repository}:{actions}"
        limit = MAX_MANIFEST if path.startswith("manifests/") else None
        req = Req(method=method, url=self.url(repository, path), scope=scope, headers=headers,
                  data=data, limit=limit)  # fmt: skip
        resp = self.transport.request(req, what=what, ok=ok)
        _resolve_location(resp, what)
        return resp

    def fixes(self) -> Fixes:
        """What this registry's failures say, for its transport."""
        host, cred = literal(self.host), self.credential
        refused = (
            f"{host} refused credentials ({{status}}): the credentials of {literal(str(cred))}; "
            "check the user and password (podman login / docker login, or REGISTRY_AUTH_FILE)"
            if cred
            else f"{host} refused credentials ({{status}}): anonymous access; the image must "
            "be public, or log in (podman login / docker login)"
        )
        here = f"{self.scheme}://{host}"
        return Fixes(
            error_class=RegistryError,
            name=f"registry {host}",
            statuses={
                # a 401 reaches here only from another host, which gets no credentials
                401: f"{here} sent the request on to {{there}} (an upload Location or a "
                "redirect), which asks for credentials (401); lockpipe sends the credentials "
                f"of {host} to it alone: configure the registry to hand out locations on its "
                "own host and scheme",
                403: refused,
                404: f"not found at {host} (404); check the repository and tag",
                429: f"{host} is rate limiting (429) after {{tries}}; wait, log in for a higher "
                f"limit, or {MIRROR_FIX}",
                500: f"{host} answered {{status}} after {{tries}}; the registry is failing, "
                "retry later",
                0: f"{host} answered {{status}}; check the reference and the registry",
            },
            waits={
                429: f"rate limited by {host} for {{wait}}, log in for a higher limit, or "
                f"{MIRROR_FIX}",
                0: f"{host} answered {{status}} and asks to wait {{wait}}, or {MIRROR_FIX}",
            },
            unreachable="registry {host} unreachable ({cause}) after {tries}; check the "
            "network, DNS or proxy (HTTPS_PROXY) from this host",
            loop=f"more than {MAX_REDIRECTS} redirects from {host}; the registry or a proxy in "
            "front of it loops: check its storage redirect settings",
        )

    def _challenged(self, answer: Answer, *, scope: str, what: str, again: bool) -> bool:
        """A 401 from this host: a token or Basic to send again, or the refusal."""
        if not self.owns(answer.url):
            return False  # a redirect's host: its 401 is reported as from another host
        if again or (answer.authorized and self._basic):
            raise self._refused(what, answer.status)
        self._forget(scope)
        self._authenticate(answer.response, scope, what)
        return True

    def authorization(
        self, repository: str, actions: str = "pull", *, margin: float = 0.0
    ) -> str | None:
        """The Authorization header for ``repository`` now, renewing a Bearer token that
        expires within ``margin`` seconds (before a long upload's next chunk, a ranged
        download's next request); None where the registry asked for nothing."""
        scope = f"repository:{repository}:{actions}"
        with self._lock:
            token, challenge = self._tokens.get(scope), self._challenge
        if challenge is not None and (token is None or token[1] <= time.monotonic() + margin):
            fresh, lifetime = self.token_servers.fetch(
                challenge, scope, f"token for {self.host}/{repository}"
            )
            with self._lock:
                self._tokens[scope] = (fresh, time.monotonic() + max(lifetime - 5, 1))
        return self.header(scope)

    def header(self, scope: str) -> str | None:
        """The Authorization value for ``scope`` now, as the host last asked; None: none."""
        with self._lock:
            token = self._tokens.get(scope)
            if token and token[1] > time.monotonic():
                return f"Bearer {token[0]}"
        if self._basic and self.credential and not self.credential.identity_token:
            return basic_auth(self.credential.username, self.credential.secret)
        return None

    def _forget(self, scope: str) -> None:
        with self._lock:
            self._tokens.pop(scope, None)

    def _authenticate(self, resp: requests.Response, scope: str, what: str) -> None:
        challenge = parse_challenge(resp.headers.get("WWW-Authenticate", ""))
        if challenge is None:
            raise RegistryError(
                f"{what}: {self.host} answered 401 without a WWW-Authenticate challenge; "
                "it is not a v2 registry, or a proxy in front of it strips the header"
            )
        if challenge.scheme == "basic":
            if self.credential is None or self.credential.identity_token:
                raise RegistryError(
                    f"{what}: {self.host} asks for a user and password (Basic) and none is "
                    "configured; log in with podman login / docker login, or set REGISTRY_AUTH_FILE"
                )
            self._basic = True
            return
        if challenge.scheme == "bearer" and "realm" not in challenge.params:
            raise RegistryError(
                f"{what}: {self.host} asks for a Bearer token but names no realm to get one "
                "from; it is not a v2 registry, or a proxy in front of it rewrites the header"
            )
        if challenge.scheme != "bearer":
            raise RegistryError(
                f"{what}: {self.host} asks for {challenge.scheme} auth, which lockpipe does "
                "not speak (Bearer and Basic only); use a registry or mirror that does"
            )
        token, lifetime = self.token_servers.fetch(challenge, scope, what)
        with self._lock:
            self._challenge = challenge
            self._tokens[scope] = (token, time.monotonic() + max(lifetime - 5, 1))

    def _refused(self, what: str, status: int) -> RegistryError:
        return refused(what, self.host, status, self.credential)

    def _note_ratelimit(self, answer: Answer, what: str) -> None:
        left = ratelimit_remaining(answer.response.headers.get("ratelimit-remaining"))
        if left is None:
            return
        self.ratelimit_remaining = left
        if left < LOW_RATELIMIT:
            echo(f"warning: {self.host}: {left} pulls left in this rate-limit window; log in "
                 "for a higher limit, or use a mirror", style="yellow")  # fmt: skip


def _resolve_location(resp: requests.Response, what: str) -> None:
    """``resp``'s ``Location`` (an upload's) made absolute against the URL of the request
    that answered it, as RFC 3986 resolves a reference and distribution's clients read
    one: ``abc?_state=x`` from ``/v2/r/blobs/uploads/`` is ``/v2/r/blobs/uploads/abc…``,
    ``//other:5001/…`` is on another host. Which credentials go there is the
    transport's to decide: its origin's alone."""
    location = resp.headers.get("Location")
    if not location:
        return
    try:
        resp.headers["Location"] = urljoin(resp.url, location)
    except ValueError as exc:  # an IPv6 host without its "]"
        resp.close()
        raise RegistryError(f"{what}: the registry answered a Location that is not a URL "
                            f"({shown(location, 200)}: {exc}); the registry is broken, or a "
                            "proxy in front of it rewrites Locations") from None  # fmt: skip
