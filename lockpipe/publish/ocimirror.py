"""``--mirror oci://REGISTRY/PREFIX``: payload files read as blobs of their ModelPack artifact.

A file pinned by sha256 is the blob of that digest in ``PREFIX/NAME``, so no
manifest is read for it; a file pinned only by its git blob id is found by its
path in the manifest tagged ``rev-<commit>`` (and still verified by the git id).
One HEAD per file says whether the registry has it: a missing blob, a refusal or
a registry that cannot be reached is noted and the file comes from the Hub. The
bytes then go through the same ranged, resumable downloader as any mirror; the
registry's token is renewed before a request that would outlive it, and is sent
to the registry's own origin only (a 307 to a storage backend gets none).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lockpipe.errors import RegistryError, UsageError
from lockpipe.lock.model import Payload, PayloadFile
from lockpipe.log import echo
from lockpipe.payloads.errors import NO_ANSWER, HTTPFatal
from lockpipe.payloads.sources import Candidate
from lockpipe.publish.push import check_prefix
from lockpipe.registry import modelpack as mp
from lockpipe.registry.client import registry_for
from lockpipe.registry.names import RegistryConf, find, host_confs
from lockpipe.registry.push import blob_exists
from lockpipe.registry.transport import Registry

SCHEME = "oci://"
HUB_PREFIX = "huggingface.co"  # the registries.conf table whose mirrors serve payloads
RENEW = 15.0  # seconds a token must still be good for when a ranged request starts


@dataclass(frozen=True, kw_only=True)
class OciCandidate(Candidate):
    """A blob URL whose Authorization is asked of the registry at each request."""

    registry: Registry | None = field(default=None, repr=False, compare=False)
    repository: str = ""

    @property
    def authorization(self) -> str | None:
        """The registry's token, renewed if it is about to expire. A token server that
        refuses or cannot be reached fails this candidate (:class:`HTTPFatal`), so the
        downloader moves on to the next one (the Hub) instead of ending the run."""
        if self.registry is None:
            return None
        try:
            return self.registry.authorization(self.repository, margin=RENEW)
        except RegistryError as exc:
            raise HTTPFatal(f"{self.url}: {exc}", NO_ANSWER) from None

    def refused_fix(self, sent: bool) -> str:
        """A registry's credentials come from its login (auth.json), never the oci:// URL."""
        cred = self.registry.credential if self.registry else None
        login = f"podman login {self.host} (or docker login), or set REGISTRY_AUTH_FILE"
        if sent and cred is not None:
            return f"the registry refused the credentials of {cred}; check them ({login})"
        return f"the registry asks for credentials to read {self.repository}: log in with {login}"


def is_oci(mirror: str | None) -> bool:
    return bool(mirror) and str(mirror).startswith(SCHEME)


def conf_mirrors(confs: Sequence[RegistryConf] | None = None) -> list[str]:
    """The mirror locations registries.conf gives ``huggingface.co`` (``[[registry]] prefix =
    "huggingface.co"`` with ``[[registry.mirror]] location = "REGISTRY/PREFIX"``)."""
    hit = find(host_confs() if confs is None else confs, HUB_PREFIX)
    if hit is None or hit[0].prefix != HUB_PREFIX:  # a "*.co" table is about images, not this
        return []
    return [m.location for m in hit[0].mirrors]


class OciMirror:
    """The registry at ``oci://REGISTRY/PREFIX`` as a :class:`BlobMirror`."""

    def __init__(self, location: str) -> None:
        prefix = location.removeprefix(SCHEME)
        try:
            self.prefix = check_prefix(prefix, "--mirror", SCHEME)
        except UsageError as exc:
            raise UsageError(f"{exc}; e.g. --mirror oci://127.0.0.1:5000/models") from None
        self.registry_host, _, self.path_prefix = self.prefix.partition("/")
        self._lock = threading.Lock()
        self._registry: Registry | None = None
        self._layers: dict[str, Mapping[str, mp.Layer] | None] = {}

    def _reg(self) -> Registry:
        with self._lock:
            if self._registry is None:
                self._registry, _ = registry_for(f"{self.prefix}/probe:latest")
            return self._registry

    def candidates(self, payload: Payload, file: PayloadFile) -> list[Candidate]:
        try:
            repo = mp.repository(self.path_prefix, payload)
            reg = self._reg()
            digest = (
                f"sha256:{file.sha256}" if file.sha256 else self._by_path(reg, repo, payload, file)
            )
            if digest is None:
                return []
            if not blob_exists(reg, repo, digest):
                echo(
                    f"note: {self.registry_host}/{repo} has no blob {digest[:19]}… for "
                    f"{file.path}; fetching it from the Hub"
                )
                return []
        except (RegistryError, UsageError) as exc:
            echo(f"note: oci mirror {self.prefix}: {exc}; fetching {file.path} from the Hub")
            return []
        return [
            OciCandidate(
                url=reg.url(repo, f"blobs/{digest}"), kind="mirror", registry=reg, repository=repo
            )
        ]

    def _by_path(self, reg: Registry, repo: str, payload: Payload, file: PayloadFile) -> str | None:
        """The digest the artifact's manifest gives ``file`` (a git-pinned file), else None."""
        with self._lock:
            known = payload.name in self._layers
            layers = self._layers.get(payload.name)
        if not known:
            tag = mp.tag(payload)
            resp = reg.request(
                "GET", repo, f"manifests/{tag}", ok=(200, 404), headers={"Accept": mp.OCI_MANIFEST}
            )
            layers = (
                mp.file_layers(f"{reg.host}/{repo}:{tag}", resp.content)
                if resp.status_code == 200
                else None
            )
            with self._lock:
                self._layers[payload.name] = layers
        layer = (layers or {}).get(file.path)
        if layer is None:
            echo(
                f"note: {reg.host}/{repo}:{mp.tag(payload)} lists no {file.path}; fetching it "
                "from the Hub"
            )
        return layer.digest if layer else None


def oci_mirror(mirror: str | None) -> tuple[str | None, OciMirror | None]:
    """(the HTTP mirror, the OCI mirror) ``--mirror`` and registries.conf give a run."""
    if is_oci(mirror):
        return None, OciMirror(str(mirror))
    if mirror:
        return mirror, None
    try:
        found = conf_mirrors()
    except RegistryError as exc:  # a broken registries.conf: the Hub still serves payloads
        echo(f"note: registries.conf not read for a payload mirror: {exc}")
        return None, None
    return None, (OciMirror(SCHEME + found[0]) if found else None)
