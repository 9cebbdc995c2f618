"""Payloads: fast, verified, resumable downloads of model files into a store.

Public entry points:

- :func:`run_payloads` (with :class:`Options`): what the ``payloads`` verb calls.
- :func:`payload_path`: where a verified payload lives (what a smoke run mounts).
- :func:`download_url`: the same downloader for any URL and sha256 (source archives).
- :func:`default_store`: the store used without ``--store`` / ``PIPELINE_STORE``.
"""

from __future__ import annotations

from pipeline.payloads.download import download_url
from pipeline.payloads.run import Options, Result, run_payloads
from pipeline.payloads.store import default_store, payload_path

__all__ = ["Options", "Result", "default_store", "download_url", "payload_path", "run_payloads"]
