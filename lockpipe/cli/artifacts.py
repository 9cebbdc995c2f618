"""``lockpipe payloads publish --to REGISTRY/PREFIX [NAME…]``: stored payloads as OCI artifacts."""

from __future__ import annotations

import argparse
import os

from lockpipe.errors import UsageError
from lockpipe.lock.model import load_lock
from lockpipe.payloads.store import default_store
from lockpipe.publish.artifacts import PublishOptions, publish_payloads


def do_payloads_publish(args: argparse.Namespace) -> int:
    """Push each stored payload the names select (every one in the store without names)."""
    to = args.to or os.environ.get("LOCKPIPE_PUBLISH_TO")
    if not to:
        raise UsageError(
            "payloads publish: name the registry with --to REGISTRY/PREFIX "
            "(or LOCKPIPE_PUBLISH_TO), e.g. --to 127.0.0.1:5000/models"
        )
    env = dict(os.environ)
    store = (args.store or default_store(env)).expanduser().resolve()
    publish_payloads(
        load_lock(args.lock), args.targets[1:], PublishOptions(store=store, prefix=to, env=env)
    )
    return 0
