"""The token server a registry names in its Bearer challenge: an origin of its own.

Its requests go through a :class:`~lockpipe.http.transport.Transport` of their own
(the realm may share the registry's origin, whose credentials are the registry's), so
they are retried as any request is (429, 5xx, no answer; ``Retry-After``), and the
credentials go to the realm's origin alone: the Basic header on hops to it, the
refresh token (an OAuth2 form's body) on no redirect to another host or over http.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlencode, urljoin, urlsplit

import requests

from lockpipe.errors import RegistryError
from lockpipe.http import MAX_REDIRECTS
from lockpipe.http.transport import Fixes, Header, Policy, Req, Transport
from lockpipe.jsonshape import loads
from lockpipe.registry.creds import Credential
from lockpipe.registry.headers import Challenge
from lockpipe.urls import basic_auth, redact, same_origin, shown

TOKEN_LIFETIME = 60  # seconds, when the token server names none (the distribution spec's default)
LONGEST_LIFETIME = 86400  # seconds a token is trusted for at most (a 401 renews it sooner)
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what "Bearer TOKEN" can carry
REDIRECTS = (301, 302, 303, 307, 308)  # a refresh-token POST follows none to another origin
FAILING = (
    "the token server at {url} answered {status} after {tries}; retry later, or pin the base "
    "from another registry"
)
FIXES = Fixes(
    error_class=RegistryError,
    name="token server",
    statuses={
        429: FAILING,
        500: FAILING,
        0: "the token server at {url} answered {status}; retry later, or pin the base "
        "from another registry",
    },
    waits={
        0: "the token server at {url} answered {status} and asks to wait {wait}; retry "
        "then, or pin the base from another registry"
    },
    unreachable="token server {host} unreachable ({cause}) after {tries}; check the network, "
    "DNS or proxy (HTTPS_PROXY) from this host",
    loop=f"more than {MAX_REDIRECTS} redirects from the token server at {{url}}; fix the "
    "registry's auth realm to name the server that issues its tokens",
)


def refused(
    what: str, by: str, status: int, credential: Credential | None, scope: str | None = None
) -> RegistryError:
    """``by`` (a registry, a token server) turned ``credential`` down with ``status``."""
    who = f"the credentials of {credential}" if credential else "anonymous access"
    fix = (
        "check the user and password (podman login / docker login, or REGISTRY_AUTH_FILE)"
        if credential
        else "the image must be public, or log in (podman login / docker login)"
    )
    return RegistryError(
        f"{what}: {by} refused credentials ({status}): {who}"
        f"{f' for {scope}' if scope else ''}; {fix}"
    )


class TokenServers:
    """The token servers of one registry host, and the one credential they are all sent."""

    def __init__(self, host: str, scheme: str, credential: Credential | None, policy: Policy):
        self.host, self.scheme, self.credential = host, scheme, credential
        self.transport = Transport(policy, FIXES)

    def fetch(self, challenge: Challenge, scope: str, what: str) -> tuple[str, float]:
        """A token for ``scope`` from the challenge's realm, and its lifetime in seconds."""
        realm = challenge.params["realm"]
        cred = self.credential
        try:
            parts = urlsplit(realm)
        except ValueError:  # "https://[::1/token": an unclosed bracket
            parts = None
        if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise RegistryError(  # '/token', 'ftp://…': requests' MissingSchema named no host
                f"{what}: {self.host} names the token server {shown(realm, 200)}, which is "
                "not an http(s) URL; fix the registry's auth realm to the URL of its token "
                "server"
            )
        realm_scheme = parts.scheme.lower()
        if cred and self.scheme == "https" and realm_scheme != "https":
            raise RegistryError(
                f"{what}: {self.host} names the token server {redact(realm)}, not https; lockpipe "
                "sends no credentials unencrypted: fix the registry's auth realm to https"
            )
        params = {"service": challenge.params.get("service", ""), "scope": scope}
        if cred and cred.identity_token:  # OAuth2 refresh token, as docker login stores
            form = {**params, "grant_type": "refresh_token", "refresh_token": cred.secret,
                    "client_id": "lockpipe"}  # fmt: skip
            self.transport.login(realm, None)
            req = Req(method="POST", url=realm, data=urlencode(form).encode(), secret_body=True,
                      headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
        else:
            basic = Header(basic_auth(cred.username, cred.secret)) if cred else None
            self.transport.login(realm, basic)
            req = Req(method="GET", url=realm, params=params)
        resp = self.transport.request(req, what=what, ok=(200, 401, 403, *REDIRECTS))
        if resp.status_code != 200:
            raise self._turned_down(resp, realm, scope, what)
        return _token(resp, realm, what)

    def _turned_down(
        self, resp: requests.Response, realm: str, scope: str, what: str
    ) -> RegistryError:
        """The error for a token request refused, or sent on where its secret may not go."""
        status = int(resp.status_code)
        if status in REDIRECTS:  # a secret body's redirect off its origin, not followed
            there, how = urljoin(realm, resp.headers.get("Location", "")), f" ({status})"
        elif same_origin(str(resp.url), realm):
            return refused(
                what, f"the token server at {redact(realm)}", status, self.credential, scope
            )
        else:  # followed without the credentials, and that host wants them
            there, how = str(resp.url), f", which answers {status}"
        where = urlsplit(there)
        return RegistryError(
            f"{what}: the token server at {redact(realm)} sends the request on to "
            f"{redact(f'{where.scheme}://{where.netloc}')}{how}; lockpipe sends the "
            "credentials for the token server to its own host alone, never to another host "
            "or over http: fix the registry's auth realm to name the server that issues its "
            "tokens"
        )


def _token(resp: requests.Response, realm: str, what: str) -> tuple[str, float]:
    """The token of a 200 answer and its lifetime; the error naming what is missing."""
    try:
        body = loads(resp.content)
    except ValueError:  # not JSON, nested too deeply, or a number of 5000 digits
        raise RegistryError(
            f"{what}: the token server at {redact(realm)} answered 200 with a body that is not "
            f"JSON lockpipe can read ({len(resp.content):,} bytes); it is not a registry token "
            "server, or it is misconfigured: check the registry's auth settings"
        ) from None
    token = _field(body, "token") or _field(body, "access_token")
    if not isinstance(body, Mapping) or not isinstance(token, str) or not token:
        raise RegistryError(
            f"{what}: the token server at {redact(realm)} answered without a token (no 'token' or "
            "'access_token' in its JSON); it is not a registry token server, or it is "
            "misconfigured: check the registry's auth settings"
        )
    if not _HEADER_SAFE.fullmatch(token):  # a newline was a retried 'unreachable' per request
        raise RegistryError(
            f"{what}: the token server at {redact(realm)} answered a token that cannot be sent in "
            "a header (it holds a space, a control character or non-ASCII text); it is "
            "misconfigured: check the registry's auth settings"
        )
    expires = body.get("expires_in")
    if isinstance(expires, (int, float)) and not isinstance(expires, bool) and expires > 0:
        return token, float(min(expires, LONGEST_LIFETIME))  # 10**400 is no float
    return token, TOKEN_LIFETIME


def _field(body: object, key: str) -> object:
    return body.get(key) if isinstance(body, Mapping) else None
