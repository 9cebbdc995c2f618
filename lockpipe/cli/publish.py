"""``lockpipe publish`` and ``lockpipe verify``: push built images by digest, check them.

publish pushes each current build to ``--to REGISTRY/PREFIX``, records the
digest in ``images.json`` beside the lock and attaches the provenance;
verify checks a pushed image (``--image REF@sha256:…`` or ``--published``)
against its provenance and the lock, and with ``--rebuild`` rebuilds here.
"""

from __future__ import annotations

import argparse
from typing import Any

from lockpipe.cli import jsonout
from lockpipe.cli.options import state_dir, targets
from lockpipe.engines import get_engine
from lockpipe.errors import CheckFailed, UsageError
from lockpipe.imagebuild.plan import built_here
from lockpipe.lock.model import load_lock
from lockpipe.log import echo, result
from lockpipe.publish.outputs import images_path, published_for
from lockpipe.publish.push import check_prefix, publish_target


def do_publish(args: argparse.Namespace) -> int:
    loaded = load_lock(args.lock)
    if not args.to:
        raise UsageError("publish needs --to REGISTRY/PREFIX (or LOCKPIPE_PUBLISH_TO), "
                         "e.g. --to 127.0.0.1:5000/lockpipe")  # fmt: skip
    check_prefix(args.to)
    names = built_here(loaded, targets(args, loaded), "publish")
    engine = get_engine(args.engine)
    state = state_dir(args, loaded)
    images = images_path(loaded.path)
    outcomes = [
        publish_target(loaded, n, engine, state=state, prefix=args.to, images=images,
                       force=args.force)
        for n in names
    ]  # fmt: skip
    pushed = sum(o.uploaded for o in outcomes)
    echo(f"published {pushed} of {len(outcomes)} target(s); {len(outcomes) - pushed} unchanged")
    return 0


def image_for(args: argparse.Namespace, target: str) -> str:
    """--image, or with --published the entry of images.json beside the lock."""
    if args.image and args.published:
        raise UsageError("give --image REF@sha256:… or --published, not both")
    if args.image:
        return str(args.image)
    if args.published:
        return published_for(images_path(args.lock), target).pinned
    raise UsageError(f"verify {target} needs --image REF@sha256:… or --published (images.json)")


def do_verify(args: argparse.Namespace) -> int:
    """The verdict on stdout (``--json``: also as JSON, written whether it passes or not)."""
    jsonout.begin(args.json)
    from lockpipe.verify.check import verify_image

    loaded = load_lock(args.lock)
    if len(args.targets) != 1:
        raise UsageError("verify takes one TARGET: the one the image was built for")
    name = args.targets[0]
    if loaded.target(name).external is not None:
        raise UsageError(f"{name}: an external image, built elsewhere; lockpipe wrote no "
                         "provenance for it, so there is nothing to verify it against")  # fmt: skip
    image = image_for(args, name)
    mismatch = None
    verdict: dict[str, Any] = {"target": name, "image": image, "lock": str(loaded.path)}
    try:
        checked = verify_image(loaded, name, image)
    except CheckFailed as exc:
        verdict.update(matches=False, mismatch=str(exc))
        if not args.rebuild:
            jsonout.emit(args.json, "verify", verdict)
            raise
        # The rebuild and its explanation (a moved base, another engine) say why; go on.
        mismatch = exc
        result(str(exc), style="yellow")
    else:
        verdict.update(matches=True, provenance=checked.provenance, checked=checked.checked)
        result(f"{name}: {image} matches its provenance ({checked.provenance[:19]}) and "
               f"{loaded.path}: {checked.checked} inputs checked")  # fmt: skip
    if not args.rebuild:
        jsonout.emit(args.json, "verify", verdict)
        return 0
    from lockpipe.imagebuild.run import Settings
    from lockpipe.verify.rebuild import rebuild_and_compare

    engine = get_engine(args.engine)
    settings = Settings(state=state_dir(args, loaded), cache=args.cache.expanduser(),
                        mirror=args.mirror, force=True)  # fmt: skip
    comparison = rebuild_and_compare(loaded, name, engine, settings, image)
    result(str(comparison), style=None if comparison.same else "yellow")
    verdict["rebuild"] = {
        "same": comparison.same,
        "engine": comparison.engine,
        "rebuilt": comparison.rebuilt,
        "explanation": str(comparison),
    }
    jsonout.emit(args.json, "verify", verdict)
    if not comparison.same:
        raise CheckFailed(f"{name}: a rebuild here does not give {image}; see above")
    if mismatch is not None:
        raise CheckFailed(f"{name}: {image} does not match {loaded.path} (see above), though a "
                          "rebuild here gives the same image")  # fmt: skip
    return 0
