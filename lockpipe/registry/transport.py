"""One registry host over HTTP: auth challenges, token cache, retries, rate limits.

:class:`Registry` wraps one ``requests.Session`` (connection reuse matters:
resolving 40 bases is 160 small requests). Bearer tokens are cached per scope
under a lock, so threads resolving different references share them. Every
failure leaves here as a :class:`RegistryError` naming the host, what was
asked, the status and the fix; ``requests`` exceptions never escape.

Credentials go to this registry's own origin (scheme, host, port) and to the
token server it names, nowhere else: redirects are followed here, not by
``requests``, and neither a redirect (a blob GET sent on to a storage backend)
nor an upload ``Location`` on another host or over plain http carries them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import BinaryIO
from urllib.parse import urlsplit

import requests

from lockpipe.errors import RegistryError
from lockpipe.http import (
    MAX_REDIRECTS,
    Answer,
    NoAnswer,
    Retries,
    follow,
    retry_after,
    retryable,
    until,
)
from lockpipe.log import echo
from lockpipe.registry.creds import Credential
from lockpipe.registry.headers import Challenge, parse_challenge, ratelimit_remaining
from lockpipe.urls import basic_auth, redact, same_origin

RETRY_AFTER_CAP = 60.0  # a Retry-After asking for longer fails at once: no run sleeps for hours
BACKOFF_BASE, BACKOFF_CAP = 0.5, 8.0
TOKEN_LIFETIME = 60  # seconds, when the token server names none (the distribution spec's default)
LOW_RATELIMIT = 10
Data = bytes | BinaryIO | None


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
        self.retries = retries
        self.session = requests.Session()
        self.ratelimit_remaining: int | None = None  # the last value the registry sent
        # tests may replace it to record the waits asked for; production waits for real
        self.sleep: Callable[[float], None] = time.sleep
        self._lock = threading.Lock()
        self._tokens: dict[str, tuple[str, float]] = {}  # scope -> (token, expires at)
        self._basic = False  # the host asked for Basic: send it up front
        self._challenge: Challenge | None = None  # the last Bearer challenge: renews tokens early

    def __repr__(self) -> str:
        return f"Registry({self.scheme}://{self.host}, credential={self.credential})"

    def url(self, repository: str, path: str) -> str:
        """A full URL; ``path`` may also be an upload Location (absolute or ``/v2/…``)."""
        if path.startswith(("http://", "https://")):
            return path
        if path.startswith("/"):
            return f"{self.scheme}://{self.host}{path}"
        return f"{self.scheme}://{self.host}/v2/{repository}/{path}"

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
        url = self.url(repository, path)
        fresh_auth = False  # a token or Basic header obtained during this call was sent
        rewindable = data is None or isinstance(data, bytes) or data.seekable()
        policy = Retries(attempts=self.retries if rewindable else 0,  # a spent stream: once
                         base=BACKOFF_BASE, cap=BACKOFF_CAP, longest=RETRY_AFTER_CAP)  # fmt: skip
        attempt = 0
        while True:
            answer = self._send(method, url, dict(headers or {}), scope, data, what, attempt,
                                policy)  # fmt: skip
            if answer is None:
                attempt += 1
                continue
            resp = answer.response
            self._note_ratelimit(resp)
            status = resp.status_code
            if status == 401 and 401 not in ok:
                if not self.owns(answer.url):
                    raise self._elsewhere(what, answer.url)
                if fresh_auth or (answer.authorized and self._basic):
                    raise self._refused(what, status)
                self._forget(scope)
                self._authenticate(resp, scope, what)
                fresh_auth = True
                continue
            if retryable(status) and status not in ok:
                now = time.time()
                asked = retry_after(resp.headers.get("Retry-After"), now)
                if policy.too_long(asked):
                    raise self._rate_limited(what, status, until(now, asked or 0.0))
                if attempt < policy.attempts:
                    self.sleep(policy.pause(attempt, asked))
                    attempt += 1
                    continue
            if status not in ok:
                raise self._status_error(what, resp, authed=answer.authorized, tries=attempt + 1)
            return resp

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        scope: str,
        data: Data,
        what: str,
        attempt: int,
        policy: Retries,
    ) -> Answer | None:
        """The answer, or None after a connection error that leaves retries to spend.

        Each hop of the redirects is authorized only on this registry's origin."""
        try:
            answer = follow(self.session, method, url, origin=f"{self.scheme}://{self.host}/",
                            auth=self._authorization(scope), headers=headers, data=data,
                            timeout=self.timeout)  # fmt: skip
        except NoAnswer as no:
            if attempt < policy.attempts:
                self.sleep(policy.pause(attempt))
                return None
            host = self.host if self.owns(no.url) else urlsplit(redact(no.url)).netloc
            raise RegistryError(
                f"{what}: registry {host} unreachable ({type(no.cause).__name__}) after "
                f"{attempt + 1} tries; check the network, DNS or proxy (HTTPS_PROXY) from this host"
            ) from None
        if answer.looped:
            answer.response.close()
            raise RegistryError(
                f"{what}: more than {MAX_REDIRECTS} redirects from {self.host}; the registry or a "
                "proxy in front of it loops: check its storage redirect settings"
            )
        return answer

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
            fresh, lifetime = self._fetch_token(
                challenge, scope, f"token for {self.host}/{repository}"
            )
            with self._lock:
                self._tokens[scope] = (fresh, time.monotonic() + max(lifetime - 5, 1))
        return self._authorization(scope)

    def _authorization(self, scope: str) -> str | None:
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

    def _elsewhere(self, what: str, url: str) -> RegistryError:
        """A 401 from a host this registry sent the request on to, which gets no credentials."""
        there = urlsplit(redact(url))
        return RegistryError(
            f"{what}: {self.scheme}://{self.host} sent the request on to "
            f"{there.scheme}://{there.netloc} (an upload Location or a redirect), which asks "
            f"for credentials (401); lockpipe sends the credentials of {self.host} to it "
            "alone: configure the registry to hand out locations on its own host and scheme"
        )

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
        if challenge.scheme != "bearer" or "realm" not in challenge.params:
            raise RegistryError(
                f"{what}: {self.host} asks for {challenge.scheme} auth, which lockpipe does "
                "not speak (Bearer and Basic only); use a registry or mirror that does"
            )
        token, lifetime = self._fetch_token(challenge, scope, what)
        with self._lock:
            self._challenge = challenge
            self._tokens[scope] = (token, time.monotonic() + max(lifetime - 5, 1))

    def _fetch_token(self, challenge: Challenge, scope: str, what: str) -> tuple[str, float]:
        realm = challenge.params["realm"]
        params = {"service": challenge.params.get("service", ""), "scope": scope}
        cred = self.credential
        if cred and self.scheme == "https" and urlsplit(realm).scheme.lower() != "https":
            raise RegistryError(
                f"{what}: {self.host} names the token server {realm}, not https; lockpipe "
                "sends no credentials unencrypted: fix the registry's auth realm to https"
            )
        try:
            if cred and cred.identity_token:  # OAuth2 refresh token, as docker login stores
                resp = self.session.post(realm, timeout=self.timeout, data={
                    **params, "grant_type": "refresh_token", "refresh_token": cred.secret,
                    "client_id": "lockpipe"})  # fmt: skip
            else:
                auth = (cred.username, cred.secret) if cred else None
                resp = self.session.get(realm, params=params, auth=auth, timeout=self.timeout)
        except requests.RequestException as exc:
            raise RegistryError(
                f"{what}: token server {urlsplit(realm).netloc or realm} unreachable "
                f"({type(exc).__name__}); check the network, DNS or proxy (HTTPS_PROXY) "
                "from this host"
            ) from None
        if resp.status_code in (401, 403):
            raise self._refused(what, resp.status_code, realm=realm, scope=scope)
        if resp.status_code != 200:
            raise RegistryError(
                f"{what}: the token server at {realm} answered {resp.status_code}; retry later, "
                "or pin the base from another registry"
            )
        try:
            body = resp.json()
        except ValueError:
            body = None
        token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(
                f"{what}: the token server at {realm} answered without a token (no 'token' or "
                "'access_token' in its JSON); it is not a registry token server, or it is "
                "misconfigured: check the registry's auth settings"
            )
        assert isinstance(body, dict)
        expires = body.get("expires_in")
        lifetime = float(expires) if isinstance(expires, (int, float)) and expires > 0 else None
        return token, lifetime or TOKEN_LIFETIME

    def _refused(
        self, what: str, status: int, *, realm: str | None = None, scope: str | None = None
    ) -> RegistryError:
        by = f"the token server at {realm}" if realm else self.host
        cred = self.credential
        who = f"the credentials of {cred}" if cred else "anonymous access"
        fix = (
            "check the user and password (podman login / docker login, or REGISTRY_AUTH_FILE)"
            if cred
            else "the image must be public, or log in (podman login / docker login)"
        )
        return RegistryError(
            f"{what}: {by} refused credentials ({status}): {who}"
            f"{f' for {scope}' if scope else ''}; {fix}"
        )

    def _status_error(
        self, what: str, resp: requests.Response, *, authed: bool, tries: int
    ) -> RegistryError:
        status = resp.status_code
        if status in (401, 403) and (authed or self.credential):
            return self._refused(what, status)
        if status == 404:
            return RegistryError(
                f"{what}: not found at {self.host} (404); check the repository and tag"
            )
        if status == 429:
            return RegistryError(
                f"{what}: {self.host} is rate limiting (429) after {tries} tries; wait, "
                "log in for a higher limit, or use a mirror (registries.conf)"
            )
        if status >= 500:
            return RegistryError(
                f"{what}: {self.host} answered {status} after {tries} tries; the "
                "registry is failing, retry later"
            )
        return RegistryError(
            f"{what}: {self.host} answered {status}; check the reference and the registry"
        )

    def _rate_limited(self, what: str, status: int, after: str) -> RegistryError:
        """A Retry-After past the cap: the time to come back, not an hour asleep."""
        if status == 429:
            return RegistryError(f"{what}: rate limited by {self.host} for {after}, log in for a "
                                 "higher limit, or use a mirror (registries.conf)")  # fmt: skip
        return RegistryError(f"{what}: {self.host} answered {status} and asks to wait {after}, "
                             "or use a mirror (registries.conf)")  # fmt: skip

    def _note_ratelimit(self, resp: requests.Response) -> None:
        left = ratelimit_remaining(resp.headers.get("ratelimit-remaining"))
        if left is None:
            return
        self.ratelimit_remaining = left
        if left < LOW_RATELIMIT:
            echo(f"warning: {self.host}: {left} pulls left in this rate-limit window; log in "
                 "for a higher limit, or use a mirror", style="yellow")  # fmt: skip
