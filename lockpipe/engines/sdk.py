"""What the docker SDK and podman-py engines share.

Both clients expose the same object model over the same (Docker-compatible)
API: ``images.get(ref).attrs``, ``.tag()``, ``containers.run(...)``,
``containers.get(id).attrs``, the /build endpoint's JSON stream, and an ``errors``
module with the same names (podman-py copies docker-py's). What differs (the build
parameters, push, mounts and devices, logs, stop) stays in each engine's module.

Every public method that talks to the daemon runs under :func:`sdk_call`: an
exception from the SDK (or from ``requests`` beneath it) leaves the engine as a
pipeline error that names the engine, the operation, the reference and a fix.
A daemon that does not answer is EngineMissing. No SDK traceback reaches a user.
The SDKs themselves are imported lazily, so merely loading this module stays cheap.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Concatenate, ParamSpec, TypeVar

from lockpipe.engines.base import (
    BuildRequest,
    ContainerState,
    EngineName,
    RunSpec,
    checked_id,
    env_of,
    normalize_id,
)
from lockpipe.engines.stop import BuildStop, BuildStream
from lockpipe.errors import BuildError, EngineError, EngineMissing, LockpipeError
from lockpipe.jsonshape import Reader

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="SdkEngine")
DETAIL_CHARS = 400
# How long a call waits for the daemon's answer (to connect, and between reads): the docker
# SDK's own default. A service that accepts the connection but never answers (a hung podman
# service) then fails the call instead of hanging lockpipe. Builds, pulls and pushes, whose
# answers may be silent for longer (a quiet RUN step, a pull of a large layer), wait on
# reads without end (SdkEngine.stream_timeout): Ctrl-C stops them (stop.stopped_by).
API_TIMEOUT = 60  # seconds
RUN_HINT = (
    "check that the image {ref} is in {engine}'s local storage (`{engine} images`); "
    "build it first: nox -s build"
)
PUSH_HINT = "check that the destination registry runs and accepts pushes, then retry"
BUILD_HINT = "see the build log above for the failing step"
# What an SDK raises on an answer of a shape it does not expect (nested past Python's
# recursion limit, a list for an object, a number for a string): each one line, not a
# traceback, where the SDK raised it (SdkEngine.raised_reading); in lockpipe's code, a bug.
SHAPE_ERRORS = (RecursionError, TypeError, AttributeError, KeyError, ValueError)


def sdk_call(
    op: str, *, error: type[EngineError] = EngineError, hint: str = ""
) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """Translate the SDK's exceptions raised by the decorated engine method.

    ``op`` names the operation in messages; the method's first argument names the
    reference (an image, a container, a BuildRequest's tag, a RunSpec's image).
    ``error`` is the class for a failed call (BuildError for builds); ``hint`` is the
    fix to name when the daemon's answer points at none (``{engine}``, ``{ref}``).
    """

    def wrap(fn: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(fn)
        def translated(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            ref = subject(args[0]) if args else ""
            try:
                return fn(self, *args, **kwargs)
            except LockpipeError:
                raise  # lockpipe's own, already one line
            except self.sdk_errors() as exc:
                raise self.translate(exc, op, ref, error, hint) from exc
            except SHAPE_ERRORS as exc:
                if not self.raised_reading(exc):
                    raise  # lockpipe's own bug: its traceback is the report to file
                raise self.odd_answer(exc, op, ref) from None
            except Exception as exc:
                if type(exc) is not Exception:  # the SDKs' bare Exception("Can't create ...")
                    raise
                raise self.odd_answer(exc, op, ref) from None

        return translated

    return wrap


def subject(arg: object) -> str:
    """The reference an engine method acts on, for messages."""
    if isinstance(arg, BuildRequest):
        return arg.tag
    if isinstance(arg, RunSpec):
        return arg.image
    return str(arg)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of the daemon's answer, when the exception carries one."""
    code = getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) else None


def detail_of(exc: BaseException) -> str:
    """The daemon's own explanation (not the SDK's URL-laden text), on one line."""
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    one_line = re.sub(r"\s+", " ", str(text)).strip()
    return one_line[:DETAIL_CHARS]


def _caused_by(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc``, or an exception it wraps, is one of ``kinds``."""
    seen: BaseException | None = exc
    for _ in range(5):  # the SDKs wrap once or twice (podman-py: requests' in its APIError)
        if seen is None:
            return False
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def unreachable(exc: BaseException) -> bool:
    """Whether the daemon's socket refused or was absent (here or in a wrapped cause)."""
    import requests

    return _caused_by(exc, (requests.ConnectionError, ConnectionError, FileNotFoundError))


def timed_out(exc: BaseException) -> bool:
    """Whether the daemon did not answer in time (here or in a wrapped cause)."""
    import requests
    from urllib3.exceptions import TimeoutError as Urllib3Timeout

    return _caused_by(exc, (requests.Timeout, Urllib3Timeout, TimeoutError))


def fix_for(engine: str, op: str, status: int | None, detail: str, ref: str, hint: str) -> str:
    """The fix to name for a failed call, from the daemon's status and words."""
    if status == 400 or "invalid reference" in detail.lower():
        return f"check that {ref!r} is a valid reference (a lowercase name[:tag] or sha256:ID)"
    if status == 404 and "container" in op:
        return f"no container {ref} exists in {engine} (`{engine} ps -a` lists them); check the ID"
    if status == 404:
        return (
            f"nothing named {ref} exists in {engine}'s storage (`{engine} images` lists it); "
            "check the name, or build the image first: nox -s build"
        )
    if status == 409:
        return (
            f"it conflicts with something {engine} already has (a container of the same "
            f"name, or one using the image): remove that (`{engine} rm -f NAME`) and retry"
        )
    if hint:
        return hint.format(engine=engine, ref=ref)
    return f"see {engine}'s own log for the cause, then retry"


class SdkEngine:
    name: EngineName
    client: Any
    url: str  # where the daemon's API answers, for messages
    timeout: float = API_TIMEOUT  # a call's wait for the daemon's answer (not a stream's)
    _version: str  # the daemon's, read once when the engine is made
    stopping: BuildStop | None = None  # the running build's, set by stop.stopped_by

    def version(self) -> str:
        """The daemon's version string, part of every build key."""
        return self._version

    def start_hint(self) -> str:
        """How to install and start this engine's daemon (for EngineMissing)."""
        raise NotImplementedError

    def stuck_hint(self) -> str:
        """What to check when the daemon's socket accepts but does not answer."""
        return f"is {self.name}'s daemon running and well? restart it; {self.start_hint()}"

    def no_answer(self, what: str, timeout: float) -> str:
        """The message for a call ``what`` that the daemon left unanswered ``timeout`` s."""
        return (
            f"{what}: {self.name} did not answer at {self.url} within {timeout:g} s (its socket "
            f"is there, but nothing answers on it); {self.stuck_hint()}"
        )

    def stream_timeout(self) -> tuple[float, None]:
        """A build's, pull's or push's timeout: to connect as any call, then reads unbounded."""
        return (self.timeout, None)

    def errors(self) -> ModuleType:
        """The SDK's ``errors`` module, imported only when needed."""
        raise NotImplementedError

    def run_options(self, spec: RunSpec) -> dict[str, object]:
        """The SDK's own ``containers.run`` keywords for the spec's mounts and devices."""
        raise NotImplementedError

    def sdk_errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions this engine's SDK raises, translated by :func:`sdk_call`."""
        import requests

        errors = self.errors()
        return (requests.RequestException, errors.DockerException, errors.StreamParseError)

    def translate(
        self, exc: BaseException, op: str, ref: str, error: type[EngineError], hint: str
    ) -> EngineError:
        """The pipeline error for ``exc``, raised while ``op`` acted on ``ref``."""
        what = f"{self.name} {op} {ref}".rstrip()
        if unreachable(exc):  # before timed_out: a connect timeout is both, and no socket
            return EngineMissing(
                f"{what}: {self.name} does not answer at {self.url} ({type(exc).__name__}); "
                f"{self.start_hint()}"
            )
        if timed_out(exc):  # connected, and then no answer in time
            return EngineError(self.no_answer(what, self.timeout))
        status, detail = status_of(exc), detail_of(exc)
        why = f"{status}" if status is not None else type(exc).__name__
        fix = fix_for(self.name, op, status, detail, ref, hint)
        return error(f"{what} failed ({why}: {detail}); {fix}")

    def raised_reading(self, exc: BaseException) -> bool:
        """Whether ``exc`` came from reading the daemon's answer: raised in the SDK, requests
        or json (an answer of a shape they do not read), not in lockpipe's own code."""
        import json

        import requests

        sdk = importlib.import_module(self.errors().__name__.partition(".")[0])
        roots = tuple(os.path.dirname(str(m.__file__)) + os.sep for m in (sdk, requests, json))
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(roots):
                return True
            tb = tb.tb_next
        return False

    def odd_answer(self, exc: BaseException, op: str, ref: str) -> EngineError:
        """The error for an answer to ``op`` on ``ref`` that the SDK could not read."""
        what = f"{op} {ref}".rstrip()
        return EngineError(
            f"{self.name} at {self.url} answered {what} with a shape lockpipe does not read "
            f"({type(exc).__name__}); is this a {self.name} version lockpipe supports, and is "
            f"{self.url} its API service? see lockpipe doctor"
        )

    def stop_params(self) -> dict[str, str]:
        """What the running build's request adds so that Ctrl-C can stop it (stop.BuildStop)."""
        return dict(self.stopping.params) if self.stopping is not None else {}

    def build_items(self, tag: str, resp: Any) -> Iterator[dict[str, Any]]:
        """The JSON items of a streamed /build answer for ``tag``, keep-alives skipped.

        A refused request, or an item that reports an error, raises BuildError; a line
        that is not a JSON object, or an error that is not a string, an EngineError (the
        daemon's build may go on: stop.stopped_by stops it). The answer is read in a
        thread (stop.BuildStream), so that Ctrl-C leaves it open for the running build's
        BuildStop to read the daemon's end from.
        """
        if resp.status_code != 200:
            raise BuildError(f"{self.name} build of {tag}: {resp.status_code} {resp.text[:500]}")
        read = self.build_reader(tag)
        stream = BuildStream(resp, read)
        if self.stopping is not None:
            self.stopping.stream = stream
        for item in stream.items():
            if "error" in item:
                error = read.get(item, ("error",), str).strip()
                raise BuildError(f"{self.name} build of {tag} failed: {error}")
            yield item

    def build_reader(self, tag: str) -> Reader:
        """The Reader of a /build answer's lines for ``tag``: another shape is an EngineError."""
        return self._reader(f"build of {tag}", root="a line of its answer")

    @sdk_call("inspect image")
    def image_id(self, ref: str) -> str | None:
        try:
            found = self.client.images.get(ref).id
        except self.errors().ImageNotFound:
            return None
        return checked_id(found, self._reader(f"inspect image {ref}"))

    @sdk_call("inspect image")
    def layers(self, ref: str) -> list[str]:
        attrs, read = self.client.images.get(ref).attrs, self._reader(f"inspect image {ref}")
        return [read.get(x, (), str) for x in read.get(attrs, ("RootFS", "Layers"), list)]

    @sdk_call("inspect image")
    def image_env(self, ref: str) -> dict[str, str]:
        attrs, read = self.client.images.get(ref).attrs, self._reader(f"inspect image {ref}")
        return env_of(read, attrs, ("Config", "Env"))

    @sdk_call("tag")
    def tag(self, ref: str, new: str) -> None:
        repo, _, tag = new.rpartition(":")
        if not self.client.images.get(ref).tag(repo, tag):
            raise EngineError(
                f"{self.name} could not tag {ref} as {new}; check that {new!r} is a valid name:tag"
            )

    @sdk_call("remove image")
    def remove(self, ref: str) -> None:
        self.client.images.remove(ref, force=True)

    @sdk_call("run", hint=RUN_HINT)
    def run(self, spec: RunSpec) -> str:
        container = self.client.containers.run(
            spec.image, list(spec.command) or None, detach=True, name=spec.name,
            ports={f"{i}/tcp": ("127.0.0.1", o) for i, o in spec.ports.items()},
            environment=dict(spec.env),
            entrypoint=list(spec.entrypoint) if spec.entrypoint is not None else None,
            **self.run_options(spec),
        )  # fmt: skip
        return str(container.id)

    @sdk_call("inspect container")
    def state(self, container: str) -> ContainerState:
        c = self.client.containers.get(container)
        c.reload()
        read = self._reader(f"inspect container {container}")
        running = read.get(c.attrs, ("State", "Running"), bool)
        code = None if running else read.get(c.attrs, ("State", "ExitCode"), int)
        return ContainerState(running, code, normalize_id(read.get(c.attrs, ("Image",), str)))

    def _reader(self, what: str, root: str = "its answer") -> Reader:
        """A Reader of the daemon's JSON for ``what``: another shape is an EngineError."""
        fix = f"is this a {self.name} version lockpipe supports? see lockpipe doctor"
        return Reader(where=f"{self.name} {what}", root=root, error=EngineError, fix=fix)
