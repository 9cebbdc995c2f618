"""A sha256 for a file the Hub keeps in git, which its tree lists only by git blob id.

An OCI registry names a file's blob by its sha256 (``payloads publish``,
``--mirror oci://``), and the Hub publishes one only for LFS files. So when
refresh-digests pins a file kept in git whose sha256 the lock lacks (or whose git
id moved), it fetches the file at the new commit through the payload downloader
(one GET: such files are kilobytes to a few MB), checks its git blob id, and pins
the sha256 of those bytes beside it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from lockpipe.fs import sha256_file
from lockpipe.payloads.gitfetch import fetch_git_blob
from lockpipe.payloads.settings import Context, Tuning
from lockpipe.payloads.sources import candidates, hf_url
from lockpipe.refresh.api import Api

# The most bytes refresh-digests fetches for a file the Hub keeps in git (no LFS entry):
# lockpipe's choice, far above the config, tokenizer and template files kept there, so a
# tree claiming 2**62 bytes (and a body without end) cannot fill the temporary folder.
MAX_GIT_FILE = 64 << 20


def git_file_sha256(
    hub: Api, repository: str, commit: str, path: str, size: int, git_sha1: str, label: str
) -> str:
    """The sha256 of ``path`` at ``commit``, its bytes verified by ``git_sha1`` first."""
    url = hf_url(hub.base.rstrip("/"), repository, commit, path)
    with tempfile.TemporaryDirectory(prefix="lockpipe-refresh-") as tmp:
        dest = Path(tmp) / git_sha1
        ctx = Context(tuning=Tuning(connections=1))
        fetch_git_blob(label, candidates(url, None, hub.token), dest, size, git_sha1, ctx)
        return sha256_file(dest)
