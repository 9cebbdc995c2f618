"""``lockpipe upgrade NAME VERSION``: apply one proposed upgrade as one reviewable change."""

from __future__ import annotations

import argparse
import os

from lockpipe.errors import UsageError
from lockpipe.lock.model import load_lock, write_lock
from lockpipe.log import echo
from lockpipe.refresh.api import Api
from lockpipe.refresh.bases import default_registry


def do_upgrade(args: argparse.Namespace) -> int:
    from lockpipe.refresh import upgrade

    loaded = load_lock(args.lock)
    cache = args.cache.expanduser()
    if args.name in loaded.bases:
        done = upgrade.upgrade_base(
            loaded,
            args.name,
            args.version,
            registry=default_registry(cache / "registry"),
            wheel=args.wheel,
            rules_dir=args.rules_dir,
        )
    elif args.name in loaded.sources:
        from lockpipe.refresh.archive import fetch_unpinned, tree_hash
        from lockpipe.refresh.sources import Archives

        github = Api(
            base=args.github_api,
            name="GitHub's API",
            refused="set GITHUB_TOKEN to a token that can read the repository",
            token=os.environ.get("GITHUB_TOKEN") or None,
        )
        archives = Archives(
            fetch=lambda url: fetch_unpinned(url, cache, args.mirror), tree=tree_hash, cache=cache
        )
        done = upgrade.upgrade_source(
            loaded, args.name, args.version, github=github, archives=archives
        )
    else:
        known = ", ".join([*sorted(loaded.bases), *sorted(loaded.sources)])
        raise UsageError(f"{args.name}: not a base or a source of {args.lock}; choose from {known}")
    for line in done.said:
        echo(line)
    write_lock(args.lock, done.document)
    echo(
        f"{args.lock}: upgraded {args.name} to {args.version}; review with git diff, then "
        "nox -s lock -- --check"
    )
    return 0
