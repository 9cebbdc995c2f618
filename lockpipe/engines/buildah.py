"""buildah, driven through its CLI (``buildah bud``, ``push``, ``inspect``).

Builds use ``--isolation chroot`` (works without a daemon or user
namespaces on these hosts) and ``--timestamp``, which makes two builds of
the same input byte-identical. buildah has no long-running containers, so
run/logs/stop go through podman's CLI, which shares buildah's image storage.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from lockpipe import cmd
from lockpipe.engines.base import (
    BuildRequest,
    ContainerState,
    EngineName,
    Log,
    Reproducibility,
    RunSpec,
    checked_id,
    env_of,
    no_device_requests,
    normalize_id,
)
from lockpipe.engines.basenames import settle_first_names
from lockpipe.errors import BuildError, EngineError, interrupted
from lockpipe.jsonshape import Reader, loads
from lockpipe.lock.refs import DIGEST_RE
from lockpipe.log import echo
from lockpipe.urls import shown

_CONTAINER_ID = re.compile(r"^[0-9a-f]{64}$")
# buildah logs each container it creates at debug level only ("Container ID: …").
DEBUG_LINE = re.compile(r'^time="[^"]*" level=(?:debug|info) msg=')
CREATED = re.compile(r'msg="Container ID: ([0-9a-f]{64})"')


class BuildahEngine:
    name: EngineName = "buildah"

    def __init__(self) -> None:
        cmd.which("buildah")

    def version(self) -> str:
        out = _query(["buildah", "version", "--json"])
        read, doc = tool_json(out, "buildah version --json")
        return read.get(doc, ("version",), str)

    def reproducibility(self) -> Reproducibility:
        return Reproducibility(True, "buildah bud --timestamp (file and config times clamped)")

    def build(self, req: BuildRequest, log: Log) -> str:
        for ref in settle_first_names(
            "buildah", req.bases, self.first_name, lambda ref: self.pull(ref, req.platform)
        ):
            log(f"pulled {ref}: buildah records a base by its first local name")
        with tempfile.TemporaryDirectory() as tmp:
            iidfile = Path(tmp) / "iid"
            args = [
                "buildah", "bud", "--isolation", "chroot", "--layers",
                "--timestamp", str(req.timestamp), "--platform", req.platform,
                "--iidfile", str(iidfile), "-f", str(req.context / req.dockerfile),
                "-t", req.tag, *(["--no-cache"] if req.no_cache else []),
            ]  # fmt: skip
            for k, v in sorted(req.build_args.items()):
                args += ["--build-arg", f"{k}={v}"]
            made = WorkingContainers()
            try:
                cmd.call(made.argv([*args, str(req.context)]), on_line=log, error=BuildError,
                         keep=made.keep)  # fmt: skip
            except KeyboardInterrupt as exc:
                raise interrupted(exc, *made.remove()) from None
            except BaseException:  # a failed build, or a failure here (a closed stdout)
                for line in made.remove():
                    if not line.startswith("buildah removed"):  # what buildah did not
                        with contextlib.suppress(OSError):
                            echo(line, style="yellow")
                raise
            return checked_id(_built_id(iidfile, req.tag), _reader(f"`buildah bud` of {req.tag}"))

    def image_id(self, ref: str) -> str | None:
        found = _inspect_field(ref, "FromImageID")
        where = f"`buildah inspect --type image --format {{{{.FromImageID}}}} {ref}`"
        return checked_id(found, _reader(where)) if found else None

    def first_name(self, ref: str) -> str | None:
        """The first name local storage holds for ``ref``'s image, or None when it is absent."""
        return _inspect_field(ref, "FromImage")

    def pull(self, ref: str, platform: str) -> None:
        cmd.call(
            ["buildah", "pull", "--policy", "always", "--quiet", "--platform", platform, ref],
            error=BuildError,
        )

    def layers(self, ref: str) -> list[str]:
        out = _query(["buildah", "inspect", "--type", "image", ref])
        read, doc = tool_json(out, f"buildah inspect --type image {ref}")
        return [read.get(d, (), str) for d in read.get(doc, ("OCIv1", "rootfs", "diff_ids"), list)]

    def image_env(self, ref: str) -> dict[str, str]:
        out = _query(["buildah", "inspect", "--type", "image", ref])
        read, doc = tool_json(out, f"buildah inspect --type image {ref}")
        return env_of(read, doc, ("OCIv1", "config", "Env"))

    def tag(self, ref: str, new: str) -> None:
        cmd.call(["buildah", "tag", ref, new])

    def push(self, ref: str, dest: str, *, tls_verify: bool = True) -> str:
        with tempfile.TemporaryDirectory() as tmp:
            digestfile = Path(tmp) / "digest"
            cmd.call([
                "buildah", "push", f"--tls-verify={str(tls_verify).lower()}",
                "--digestfile", str(digestfile), ref, f"docker://{dest}",
            ])  # fmt: skip
            digest = digestfile.read_text().strip() if digestfile.exists() else ""
        if not DIGEST_RE.match(digest):
            what = f"wrote {digest!r}, not sha256:<64 hex>" if digest else "wrote no digest"
            raise _reader(f"`buildah push` to {dest}").fail(f"its --digestfile {what}")
        return digest

    def remove(self, ref: str) -> None:
        cmd.call(["buildah", "rmi", "--force", ref])

    # buildah's containers are build containers; serving ones are podman's.
    def run(self, spec: RunSpec) -> str:
        argv = run_argv(spec)
        lines = cmd.call(argv, stdout_only=True).strip().splitlines()
        if not lines or not _CONTAINER_ID.match(lines[-1]):  # what podman run -d prints last
            last = shown(lines[-1], 120) if lines else "nothing"
            raise _reader(f"`{' '.join(argv[:3])} …`").fail(
                f"no container ID (its last line: {last})"
            )
        return lines[-1]

    def logs(self, container: str) -> str:
        return cmd.call(["podman", "logs", container], quiet=True, timeout=cmd.QUERY_TIMEOUT)

    def state(self, container: str) -> ContainerState:
        out = _query(["podman", "inspect", "--type", "container", container])
        read, doc = tool_json(out, f"podman inspect --type container {container}")
        running = read.get(doc, (0, "State", "Running"), bool)
        code = None if running else read.get(doc, (0, "State", "ExitCode"), int)
        return ContainerState(running, code, normalize_id(read.get(doc, (0, "Image"), str)))

    def stop(self, container: str) -> None:
        cmd.call(["podman", "rm", "--force", "--ignore", "--time", "0", container], quiet=True)


class WorkingContainers:
    """The working containers of one ``buildah bud``, read from its debug log.

    ``--force-rm`` has buildah remove them itself when a step fails, a RUN step that
    Ctrl-C ended included. A buildah ended by a signal elsewhere (a COPY, a commit, the
    pull) leaves them: :meth:`remove` removes those, and never a container of another
    build, as it knows only the IDs this buildah logged creating. The debug lines are
    read for those IDs alone; they reach neither the build log nor an error's tail.
    """

    def __init__(self) -> None:
        self.created: list[str] = []

    def argv(self, args: list[str]) -> list[str]:
        """``args`` (``buildah bud …``) at debug level, removing its containers on failure."""
        assert args[:2] == ["buildah", "bud"], args
        return ["buildah", "--log-level", "debug", "bud", "--force-rm", *args[2:]]

    def keep(self, line: str) -> bool:
        """Whether ``line`` belongs in the build log; a created container's ID is noted."""
        if not DEBUG_LINE.match(line):
            return True
        found = CREATED.search(line)
        if found and found.group(1) not in self.created:
            self.created.append(found.group(1))
        return False

    def remove(self) -> list[str]:
        """Remove what is left of this build's working containers; one line per container."""
        if not self.created:
            return []
        try:
            out = _query(["buildah", "containers", "--json"])
            read, doc = tool_json(out, "buildah containers --json")
            listed = read.get(doc, (), list, [])  # null: none at all
            ids = [read.get(listed, (i, "id"), str) for i in range(len(listed))]
            left = {c: read.get(listed, (i, "containername"), str)
                    for i, c in enumerate(ids) if c in self.created}  # fmt: skip
            if left:
                cmd.call(["buildah", "rm", *left], quiet=True)
        except EngineError as exc:
            return [f"could not remove the build's buildah working containers: {exc}"]
        gone = [f"buildah removed its working container {c[:12]}" for c in self.created
                if c not in left]  # fmt: skip
        return gone + [f"removed buildah working container {n} ({c[:12]})" for c, n in left.items()]


def _reader(where: str) -> Reader:
    fix = "is this a buildah/podman version lockpipe supports? see lockpipe doctor"
    return Reader(where=where, root="its output", error=EngineError, fix=fix)


def tool_json(out: str, what: str) -> tuple[Reader, Any]:
    """``out`` of the command ``what`` as JSON, with a Reader whose errors name the command:
    a tool whose output changed shape is an EngineError, never a KeyError's traceback."""
    read = _reader(f"`{what}`")
    try:
        return read, loads(out)  # a TooDeep for some thousand levels is a ValueError too
    except ValueError:
        raise read.fail("its output is not JSON") from None


def _inspect_field(ref: str, field: str) -> str | None:
    """One field of ``buildah inspect`` for the local image ``ref``; None when it is absent."""
    try:
        out = _query(
            ["buildah", "inspect", "--type", "image", "--format", f"{{{{.{field}}}}}", ref]
        )
    except EngineError:
        return None
    return out.strip() or None


def _csv_field(field: str) -> str:
    """``field`` as one field of a CSV record in Go's encoding/csv, which podman (and docker)
    split ``--mount`` with: quoted, ``"`` doubled, when it holds a ',', a '"' or a line
    break (a store at ``/srv/a,b`` was ``with: invalid mount option``)."""
    if not any(c in field for c in ',"\r\n'):
        return field
    return '"' + field.replace('"', '""') + '"'


def run_argv(spec: RunSpec) -> list[str]:
    """The ``podman run -d`` command line for ``spec``."""
    argv = ["podman", "run", "--detach"]
    if spec.name:
        argv += ["--name", spec.name]
    for inner, outer in sorted(spec.ports.items()):
        argv += ["--publish", f"127.0.0.1:{outer}:{inner}"]
    for m in spec.mounts:
        fields = ["type=bind", f"src={m.source}", f"dst={m.target}"]
        fields += ["ro=true"] if m.read_only else []
        argv += ["--mount", ",".join(_csv_field(f) for f in fields)]
    for k, v in sorted(spec.env.items()):
        argv += ["--env", f"{k}={v}"]
    if spec.entrypoint is not None:
        argv += ["--entrypoint", json.dumps(list(spec.entrypoint))]
    no_device_requests(spec, "buildah")
    for d in spec.devices:
        argv += ["--device", d]
    return [*argv, spec.image, *spec.command]


def _built_id(iidfile: Path, tag: str) -> str:
    """The image ID ``buildah bud`` of ``tag`` wrote to ``iidfile``; a BuildError when it
    wrote none, or none that is text (checked_id then checks it is one)."""
    try:
        return iidfile.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        why = "it wrote no image ID file"
    except UnicodeDecodeError:
        why = "its image ID file is not UTF-8 text"
    except OSError as exc:
        why = f"its image ID file could not be read ({exc.strerror or type(exc).__name__})"
    raise BuildError(
        f"`buildah bud` of {tag} exited 0, but {why}; see the build log above for the cause, "
        "and check that buildah works (`buildah bud` by hand, lockpipe doctor)"
    )


def _query(argv: list[str]) -> str:
    """The stdout of a buildah or podman query that answers at once on a well host."""
    return cmd.call(argv, quiet=True, stdout_only=True, timeout=cmd.QUERY_TIMEOUT)
