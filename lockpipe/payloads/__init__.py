"""Payloads: fast, verified, resumable downloads of model files into a store.

Entry points, each in its own module (this package imports nothing eagerly):

- :func:`lockpipe.payloads.run.run_payloads`: what the ``payloads`` verb calls.
- :func:`lockpipe.payloads.store.payload_path`: where a verified payload lives.
- :func:`lockpipe.payloads.cache.fetch_verified`: any URL by sha256 (source archives).
"""
