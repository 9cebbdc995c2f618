"""A few worker threads over a queue, stoppable with Ctrl-C without losing journals."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def run_parallel(
    items: Sequence[T], work: Callable[[T], None], at_once: int, stop: threading.Event
) -> None:
    """``work(item)`` for every item, ``at_once`` at a time, in order of ``items``.

    ``work`` reports its own failures; an exception out of it (a bug, or
    ``Stopped``) sets ``stop`` and is re-raised here once every worker is done.
    On Ctrl-C, ``stop`` is set and the workers get a few seconds to flush.
    """
    queue = list(reversed(items))
    lock = threading.Lock()
    crashed: list[BaseException] = []

    def worker(finished: threading.Event) -> None:
        try:
            while True:
                with lock:
                    if not queue or stop.is_set():
                        return
                    item = queue.pop()
                try:
                    work(item)
                except BaseException as exc:  # re-raised below
                    crashed.append(exc)
                    stop.set()
        finally:
            finished.set()

    # Events, not Thread.join: a Ctrl-C inside join() can leave the thread looking
    # finished (CPython), and then the journals would not be flushed before exit.
    done = [threading.Event() for _ in range(min(at_once, len(queue)))]
    for finished in done:
        threading.Thread(target=worker, args=(finished,), daemon=True).start()
    try:
        for finished in done:
            while not finished.wait(0.2):  # short waits keep Ctrl-C responsive here
                pass
    except KeyboardInterrupt:
        stop.set()  # workers stop at their next chunk and flush their journals
        for finished in done:
            finished.wait(5)
        raise
    if crashed:
        raise crashed[0]
