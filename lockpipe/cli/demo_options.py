"""``lockpipe demo``'s options; imported when the parser is built, so it imports no stage."""

from __future__ import annotations

import argparse
from pathlib import Path

from lockpipe.cli.options import find_lock

DEMO_LOCK = Path("locks/demo/digests.json")  # lockpipe.demo.plan.LOCK, checked by a test
HELP = {
    "lock": "the demo lock (default locks/demo/digests.json of the checkout; LOCKPIPE_LOCK "
    "is not read)",
    "engine": "buildah (default), podman or docker",
    "mirror": "not used: the demo serves its inputs from a loopback mirror of its own",
    "state": "where build records live (default WORK/state)",
    "cache": "verified downloads by sha256 (LOCKPIPE_CACHE; default ~/.cache/lockpipe); the "
    "demo's own inputs (root filesystems, the GGUF's wheels) go under CACHE/demo",
}


def add_demo_options(p: argparse.ArgumentParser) -> None:
    """The demo's own: where its bases go and where it keeps its run. ``p`` has a ``--lock``
    of its own (not shared with other verbs), defaulting to the demo lock."""
    p.set_defaults(lock=find_lock(lock=DEMO_LOCK))  # from any folder of the checkout
    for action in p._actions:  # this verb's own copies (lockpipe.cli.main.OWN_LOCK_DEFAULT)
        if action.dest in HELP:
            action.help = HELP[action.dest]
    p.add_argument("--registry", metavar="HOST:PORT",
                   help="push the Debian bases here (default 127.0.0.1:5000: the registry "
                   "there, or Debian's docker-registry started on it for the run)")  # fmt: skip
    p.add_argument("--work", type=Path, metavar="DIR",
                   help="the run's lock, state, store, mirror and unit (default "
                   ".lockpipe/demo in the checkout)")  # fmt: skip
    p.add_argument("--store", type=Path, metavar="DIR",
                   help="payload store (default WORK/store)")  # fmt: skip
