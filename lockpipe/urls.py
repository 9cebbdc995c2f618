"""URLs at a trust boundary: whose a URL is, and how one is shown.

Credentials belong to one origin: the scheme, host and port of the URL they
were given for. A redirect or an upload ``Location`` to another host or port,
or from https down to http, gets none. A URL may carry a user and password
(``http://user:token@mirror/``): :func:`split_userinfo` takes them out before
any request is made, and :func:`redact` shows any URL with them as ``***``, and
the signature of a signed URL (a CDN's redirect target) the same way.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import Callable
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

DEFAULT_PORTS = {"http": 80, "https": 443}
LINK_SHOWN = 200  # characters of a Link header an error shows
# A target ends at the next '<' too: from every '<' the scan stops there, so a header of
# '<' after '<' is read in linear time (up to 100 headers of 64 KiB each can arrive).
_NEXT = re.compile(r'<([^<>]*)>\s*;\s*rel="?next"?')
# A scheme: at most 32 characters (none is longer), so a run like 'a.a.a…' is tried from
# each character for 32 at most, in linear time in all; no word boundary is asked of its
# start, so '-https://u:pw@h' or '12https://…' hides the password too.
_SCHEME = r"[a-z][a-z0-9+.-]{0,31}://"
# scheme://authority : it ends at the first / ? # (as urlsplit reads it), and in running text
# at the line's end or where another URL starts. Its userinfo is everything up to its LAST
# '@', as split_userinfo reads it, so a password holding '@' or a space is hidden whole.
_AUTHORITY = re.compile(rf"(?i)({_SCHEME})((?:(?!{_SCHEME})[^/?#\r\n])*)")
# The same, read loosely: up to the next whitespace, quote, comma or angle bracket, past
# / ? #. A password a user typed may hold them unescaped (https://user:s3cr#et@host/): what
# precedes the last '@' there is hidden when it holds a ':' (user:password), unless that
# '@' starts a digest (docker://host:5000/repo@sha256:…). Quotes and commas end it, so a
# URL in JSON does not take the text after it along ("url":"https://h:443/x","by":"a@b").
_LOOSE = re.compile(rf"(?i)({_SCHEME})((?:(?!{_SCHEME})[^\s\"'<>,])*)")
_DIGEST_AFTER = re.compile(r"(?i)[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-f]{32,}")
# A query parameter that signs or authorizes a URL (S3's and the Hub's CDNs' X-Amz-*,
# GCS's X-Goog-*, CloudFront's Signature and Policy, Azure's sig, any *token* or *key*):
# its value is a credential for as long as the URL lives.
_SIGNED = re.compile(
    r"(?i)([?&](?:x-(?:amz|goog)-(?:signature|credential|security-token)|[^=&#\s]*"
    r"(?:sig|token|secret|passw|policy|auth|apikey|api_key|access_key)[^=&#\s]*)=)"
    r"[^&#\s'\"),;:\]]+"
)


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the port filled in from the scheme: where requests
    connects, read by urllib3's parser as requests reads it. ValueError if ``url`` cannot
    be parsed, or if urllib.parse reads another host or port in it: in
    ``http://a:1\\@b:2/`` urllib3 ends the authority at the backslash (host a, port 1)
    where urllib.parse reads b:2, and such a URL is nobody's origin."""
    try:
        sent = parse_url(url)
    except LocationParseError as e:
        raise ValueError(f"{redact(url)!r} is not a URL ({e})") from None
    scheme = (sent.scheme or "").lower()
    host = (sent.host or "").lower().removeprefix("[").removesuffix("]")
    found = scheme, host, sent.port or DEFAULT_PORTS.get(scheme)
    parts = urlsplit(url)
    read = unquote(parts.hostname or "")
    with contextlib.suppress(UnicodeError):  # urllib3 sends a name in IDNA
        read = read.encode("idna").decode("ascii")
    scheme = parts.scheme.lower()
    if (scheme, read.lower(), parts.port or DEFAULT_PORTS.get(scheme)) != found:
        raise ValueError(f"{redact(url)!r} names two hosts: its authority reads differently to "
                         "urllib3, which connects, and to urllib.parse")  # fmt: skip
    return found


def same_origin(url: str, other: str) -> bool:
    """Whether credentials given for ``other`` may be sent to ``url``."""
    try:
        return origin(url) == origin(other)
    except ValueError:  # a port out of range, a broken IPv6 literal: nobody's origin
        return False


def redact(text: str) -> str:
    """``text`` with the user and password of every URL in it, and the values of query
    parameters that sign or authorize it (``X-Amz-Signature``, ``token``, …), shown as
    ``***``; what is not a secret (the host, the path, ``X-Amz-Expires``) stays readable."""
    loose = _LOOSE.sub(_without_loose_userinfo, text)
    return _SIGNED.sub(r"\1***", _AUTHORITY.sub(_without_userinfo, loose))


def redact_url(url: str) -> str:
    """One URL as given (an option's value, a URL an error quotes) as :func:`redact` shows
    it, and read as a URL even without a scheme: ``alice:pw@host:8080`` is shown as
    ``***@host:8080``. In running text, redact cannot tell that from other words."""
    if re.match(_SCHEME, url, re.IGNORECASE):
        return redact(url)
    return redact(f"x://{url}")[len("x://") :]


def shown(value: object, limit: int = 80) -> str:
    """``value`` (a server's answer, a value from a file) as one line of an error: a string
    quoted as repr, anything else (null, a number) as its repr; credentials redacted, and
    cut at ``limit`` characters with its length."""
    if not isinstance(value, str):
        return clipped(repr(value), limit)
    t = redact(value)
    if len(t) <= limit:
        return repr(t)
    return f"{t[:limit]!r}… ({len(t):,} characters)"


def clipped(text: str, limit: int = 200) -> str:
    """``text`` that is already words (an exception's message) as part of a one-line error:
    credentials redacted, line ends as spaces, cut at ``limit`` characters with its length."""
    t = " ".join(redact(text).split())
    return t if len(t) <= limit else f"{t[:limit]}… ({len(t):,} characters)"


def _without_userinfo(match: re.Match[str]) -> str:
    _, at, hostport = match[2].rpartition("@")
    return match[0] if not at else f"{match[1]}***@{hostport}"


def _without_loose_userinfo(match: re.Match[str]) -> str:
    rest = match[2]
    ats = [i for i, c in enumerate(rest) if c == "@" and not _DIGEST_AFTER.match(rest, i + 1)]
    if not ats or ":" not in rest[: ats[-1]]:
        return match[0]
    return f"{match[1]}***{rest[ats[-1] :]}"


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """``url`` without its user and password, and them (percent-decoded) if it had any.

    ValueError if ``url`` cannot be parsed."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    return urlunsplit(parts._replace(netloc=hostport)), (unquote(user), unquote(password))


def basic_auth(user: str, secret: str) -> str:
    """The ``Authorization`` value of HTTP Basic auth for ``user`` and ``secret``."""
    return "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()


def next_page(link: str, page: str, fail: Callable[[str], Exception]) -> str | None:
    """The ``rel="next"`` target of a ``Link`` header (GitHub, the Hub, distribution's
    tags/list), resolved against ``page``, the URL that answered: RFC 8288 makes it a URI
    reference, so ``</v2/x/tags/list?last=b>`` is on the page's origin. None on the last page.
    Whether credentials go with it is the transport's question (:func:`same_origin`).

    A target urllib cannot read (``<http://[::1/next>``, a port past 65535) is the caller's
    error: ``fail`` makes it of words naming the header (cut to LINK_SHOWN characters) and
    ``page``; never urllib's ValueError."""
    found = _NEXT.search(link)
    if not found:
        return None
    target: str = found[1]
    try:
        url = urljoin(page, target)
        urlsplit(url).port  # noqa: B018 (read to check it: urljoin lets 99999 through)
    except ValueError as e:
        shown = redact(link)
        shown = shown if len(shown) <= LINK_SHOWN else shown[:LINK_SHOWN] + "…"
        raise fail(f"the Link header {shown!r} of {redact(page)} names a next page that is no "
                   f"URL ({e})") from None  # fmt: skip
    return url
