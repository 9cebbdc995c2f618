"""Ctrl-C during a build a daemon runs: stop the daemon's build, wait for it, say what was done.

A build posted to dockerd or podman's API service runs in the daemon, not under
lockpipe, so ending lockpipe does not end it. What each does when the client goes
(measured with dockerd 20.10 and podman 4.3, a RUN step sleeping):

- dockerd (BuildKit, and the classic builder) cancels the build when the connection
  closes, and ``POST /build/cancel?id=BUILDID`` cancels it by the ID the request
  gave; either way its RUN processes end and nothing stays.
- podman's service cancels only its context: a RUN step runs on to its end (its
  processes are the service's, not ours), the steps after it do not start, and the
  working containers stay unless the request asked for ``forcerm``. Its API has no
  cancel; ending the RUN step's processes fails the build, and the service then
  removes the working containers itself.

So the answer stream is read in a thread (:class:`BuildStream`): urllib3 closes the
connection when an exception cuts one of its reads, and the daemon's report that the
build ended would be lost. After Ctrl-C, :meth:`BuildStop.stop` asks the daemon to
stop in its engine's way, reads on until the daemon reports the end (at most
STOP_WAIT seconds; a second Ctrl-C stops waiting), and returns what was done, for the
``interrupted`` message.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

from lockpipe.engines.base import BuildRequest, Log
from lockpipe.errors import BuildError, interrupted
from lockpipe.jsonshape import Reader
from lockpipe.log import echo

STOP_WAIT = 30.0  # seconds an interrupted build's daemon gets to end it and clean up
_END = object()  # the reader thread's last item


class BuildStream:
    """A streamed /build answer, its JSON items read in a thread of their own by ``read``
    (a line that is not a JSON object raises its error where the items are taken)."""

    def __init__(self, resp: Any, read: Reader) -> None:
        self.resp, self.read = resp, read
        self.failed = False  # the daemon reported an error: its build ended, cleaned up
        self._items: queue.Queue[object] = queue.Queue()
        threading.Thread(target=self._read, name="build-stream", daemon=True).start()

    def _read(self) -> None:
        try:
            for raw in self.resp.iter_lines():
                if raw.strip():  # not a keep-alive
                    self._items.put(self.read.parse(raw))
        except BaseException as exc:  # handed over to the reading thread
            self._items.put(exc)
        self._items.put(_END)

    def items(self) -> Iterator[dict[str, Any]]:
        """The answer's items, as they arrive; a failed read raises here."""
        while (item := self._items.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield cast(dict[str, Any], item)

    def wait(self, seconds: float, poll: Callable[[], None]) -> bool:
        """Read on until the daemon ends the answer or ``seconds`` pass; whether it ended.

        ``poll`` runs about ten times a second meanwhile. An answer that reports an
        error has ended: the daemon writes it once its build has returned.
        """
        deadline = time.monotonic() + seconds
        while True:
            poll()
            if time.monotonic() >= deadline:
                return False
            try:
                item = self._items.get(timeout=0.1)
            except queue.Empty:
                continue
            if item is _END:
                return True
            if isinstance(item, BaseException):
                return False  # the connection broke: what the daemon did is unknown
            if isinstance(item, dict) and "error" in item:
                self.failed = True
                return True

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.resp.close()


class BuildStop:
    """How one build in a daemon is stopped after Ctrl-C; each SDK engine has its own.

    ``params`` go into the build's request (what lets it be stopped); the engine's
    ``build_items`` hands over the answer's :class:`BuildStream`.
    """

    engine: str = ""

    def __init__(self, client: Any, url: str, tag: str) -> None:
        self.client = client
        self.url = url
        self.tag = tag
        self.params: dict[str, str] = {}
        self.stream: BuildStream | None = None

    def ask(self) -> None:
        """Ask the daemon to stop the build (once, right after Ctrl-C)."""

    def poll(self) -> None:
        """Keep the build stopping while the daemon ends it (podman: each RUN step)."""

    def wait_seconds(self) -> float:
        """How long to wait for the daemon to report the end (0: it cannot be made to end)."""
        return STOP_WAIT

    def ended(self) -> str:
        """What was done, once the daemon reported the end of the build."""
        raise NotImplementedError

    def left(self) -> str:
        """What the daemon does with the build it did not end within the wait."""
        raise NotImplementedError

    def stop(self) -> list[str]:
        """Stop the build after Ctrl-C and wait for the daemon; what was done, one line."""
        if self.stream is None:  # cut before the daemon answered: no build to speak of
            self.ask()
            return []
        with contextlib.suppress(OSError):  # a closed stderr must not keep the build going
            echo(f"stopping {self.engine}'s build of {self.tag} (Ctrl-C again to stop waiting)",
                 style="yellow")  # fmt: skip
        done = False
        try:
            self.ask()
            done = self.stream.wait(self.wait_seconds(), self.poll)
        except KeyboardInterrupt:
            done = False
        finally:
            self.close()
        return [self.ended() if done else self.left()]

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()


BuildMethod = Callable[[Any, BuildRequest, Log], str]


def stopped_by(kind: type[BuildStop]) -> Callable[[BuildMethod], BuildMethod]:
    """Make an SDK engine's ``build`` stop the daemon's build on Ctrl-C, the ``kind`` way.

    While it runs, the engine's ``stopping`` is the build's :class:`BuildStop`; an
    interrupt leaves as :class:`lockpipe.errors.Interrupted`, naming what was done.
    Any other failure but the daemon's own (BuildError: its build ended) stops the
    build the same way before it goes on.
    """

    def wrap(fn: BuildMethod) -> BuildMethod:
        @functools.wraps(fn)
        def build(engine: Any, req: BuildRequest, log: Log) -> str:
            engine.stopping = stop = kind(engine.client, engine.url, req.tag)
            try:
                return fn(engine, req, log)
            except KeyboardInterrupt as exc:
                raise interrupted(exc, *stop.stop()) from None
            except BuildError:
                raise
            except BaseException:  # a broken connection, a closed stdout: the build goes on
                stop.stop()
                raise
            finally:
                engine.stopping = None
                stop.close()

        return build

    return wrap
