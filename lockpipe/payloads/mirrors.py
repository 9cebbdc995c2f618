"""Mirrors that find a payload's file by more than its URL: the Protocol the run asks.

An OCI registry (``--mirror oci://REGISTRY/PREFIX``) holds each file as a blob
named by its sha256, and knows whether it has it before a byte is fetched. The
payload stage cannot reach the registry client (the layers keep them apart), so
the verb that builds the run hands it an object with this shape
(:class:`lockpipe.publish.ocimirror.OciMirror`).
"""

from __future__ import annotations

from typing import Protocol

from lockpipe.lock.model import Payload, PayloadFile
from lockpipe.payloads.sources import Candidate


class BlobMirror(Protocol):
    def candidates(self, payload: Payload, file: PayloadFile) -> list[Candidate]:
        """Where the mirror serves ``file``'s bytes (tried before the Hub); [] when it lacks
        them or cannot be asked (it then says why, and the Hub serves the file)."""
        ...
