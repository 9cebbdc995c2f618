"""lockpipe's provenance for a published payload: an in-toto statement about its manifest.

Pure and deterministic (no clock in it): the same payload gives the same bytes,
so a re-run finds the referrer it attached before and attaches nothing. It
shares the image statements' envelope (:mod:`lockpipe.imagebuild.provenance`)
with a build type of its own: what was published is a lock entry's pinned
files, not something lockpipe built.
"""

from __future__ import annotations

from typing import Any

from lockpipe import __version__
from lockpipe.imagebuild.provenance import PREDICATE_TYPE, STATEMENT_TYPE
from lockpipe.lock.model import Payload
from lockpipe.registry.modelpack import ARTIFACT_TYPE, Layer

PAYLOAD_BUILD_TYPE = "urn:lockpipe:payload:v1"  # externalParameters: a lock payload, published


def payload_statement(
    payload: Payload,
    reference: str,
    manifest_digest: str,
    layers: tuple[Layer, ...],
    urls: dict[str, str],
    git_ids: dict[str, str],
) -> dict[str, Any]:
    """The statement that ``reference@manifest_digest`` holds ``payload``'s pinned files;
    ``urls``: path -> the Hub URL each came from; ``git_ids``: path -> the git blob id the
    lock pins for files kept in git."""
    deps = []
    for x in layers:
        digest = {"sha256": x.digest.removeprefix("sha256:")}
        if x.path in git_ids:
            digest["gitBlob"] = git_ids[x.path]
        deps.append({"name": x.path, "uri": urls[x.path], "digest": digest})
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {"name": reference, "digest": {"sha256": manifest_digest.removeprefix("sha256:")}}
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": PAYLOAD_BUILD_TYPE,
                "externalParameters": {
                    "payload": payload.name,
                    "repository": payload.repository,
                    "revision": payload.revision,
                },
                "internalParameters": {
                    "artifactType": ARTIFACT_TYPE,
                    "format": payload.format,
                    "role": payload.role,
                },
                "resolvedDependencies": deps,
            },
            "runDetails": {
                "builder": {
                    "id": "urn:lockpipe:payloads-publish",
                    "version": {"lockpipe": __version__},
                },
                "byproducts": [
                    {
                        "name": "manifest",
                        "digest": {"sha256": manifest_digest.removeprefix("sha256:")},
                    }
                ],
            },
        },
    }
