"""Pure Dockerfile checks for the pinning rules.

- every FROM is pinned by digest, is ``scratch`` or an earlier stage, or is
  an ARG the pipeline fills with a digest from the lock; so is every image a
  ``COPY --from=`` / ``ADD --from=`` or a ``RUN --mount=…,from=`` (bind or
  cache) names, where an earlier stage may also go by its index;
- no ``latest`` anywhere an image is named;
- targets that forbid it (frank-small) have no COPY or ADD;
- no download in a RUN step without a checksum check, and no ``# syntax=``
  frontend that is not pinned by digest;
- apt packages (``*_APT_PACKAGES`` build args) come from a dated snapshot, and no RUN
  installs with a package manager that takes what its index serves today.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Set
from dataclasses import dataclass

from lockpipe.errors import LintError
from lockpipe.fs import read_utf8
from lockpipe.imagebuild.dockerfile import (
    WORDS,
    Instruction,
    builder_flags,
    escape_char,
    mount_options,
    syntax_directives,
)
from lockpipe.imagebuild.dockerfile import instructions as instructions  # context.py reads it
from lockpipe.lock import closure, requirements
from lockpipe.lock.llama_argv import option
from lockpipe.lock.model import Lock, Target
from lockpipe.lock.refs import DIGEST_RE

_ARG_REF = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_PIP = r"pip(3(\.\d+)?)?\s+(install|download)"
_DOWNLOAD = re.compile(
    rf"\b(curl|wget|git\s+(clone|fetch|pull)|{_PIP}|python(3(\.\d+)?)?\s+-m\s+{_PIP})\b",
    re.IGNORECASE,
)
# A source ADD fetches (dockerfile2llb/convert_copy.go, isHTTPSource and isGitSource, by
# dfgitutil.ParseGitRef): a URL of a git transport (util/gitutil/git_url.go, the scheme
# in any case) or an scp-style git@host:path (util/sshutil/scpurl.go). BuildKit takes
# HTTP:// for a context path; lint flags it all the same.
_REMOTE = re.compile(r"(?i)\b(https?|git|ssh)://|(^|\s)[a-z0-9_-]+@[a-z0-9.-]+:")
_CHECKED = re.compile(
    r"sha256sum\s+(-c|--check)|--require-hashes|--hash=sha256:|\bsha256sum\b.*\bgrep\b"
)
# Package managers that install what their index serves today, with no hash to hold it to:
# apt outside a snapshot, apk, dnf/yum/zypper, conda/mamba, npm/yarn/pnpm adds (npm ci keeps
# to package-lock.json's integrity hashes), gem, pipx, uv tool. Options, with their values,
# may stand between the manager and its verb (apt-get -o Acquire::Retries=3 install), up
# to the end of the command (; && || | or a line's end).
_MANAGERS = {
    "apt-get|apt|aptitude|dnf|microdnf|yum|zypper|conda|mamba|micromamba": "install",
    "apk": "add",
    "npm": "install|i|add",
    "yarn|pnpm": "add",
    "gem|pipx|uv\\s+tool": "install",
}
_PACKAGES = re.compile(
    "|".join(rf"\b(?:{m})\b[^;&|\n]*?\s(?:{v})(?=\s|$)" for m, v in _MANAGERS.items()),
    re.IGNORECASE,
)
_APT_SNAPSHOT = re.compile(r"APT_SNAPSHOT|snapshot\.debian\.org|--snapshot\b")
_PIPE_TO_SHELL = re.compile(r"\|\s*(sudo\s+)?(ba|da|z)?sh\b")
# a control character other than tab: "embedded null byte" where a source names a path
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


@dataclass(frozen=True)
class Finding:
    line: int
    rule: str
    message: str

    def render(self, path: str) -> str:
        return f"{path}:{self.line}: [{self.rule}] {self.message}"


def _from_image(args: str, escape: str) -> tuple[str, str | None]:
    words = builder_flags(args, escape)[1].split()  # after the flags, as BuildKit reads them
    image = words[0] if words else ""
    alias = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
    return image, alias


def _pin(line: int, shown: str, image: str, pinned_args: Set[str], why: str = "") -> list[Finding]:
    """The finding for ``image`` (not a stage) unless it is pinned by digest or is an ARG
    the lock fills; ``shown`` is how the instruction named it."""
    arg = _ARG_REF.match(image)
    if arg and arg.group(1) not in pinned_args:
        fix = f"ARG {arg.group(1)} is not filled from the lock; name it in the target's bases"
        return [Finding(line, "pin", f"{shown}: {fix}")]
    if arg or DIGEST_RE.match(image.partition("@")[2]):
        return []
    fix = "pin it by digest (@sha256:…) or fill it from the lock through an ARG"
    return [Finding(line, "pin", f"{shown}: {why}{fix}")]


def _is_stage(name: str, stages: list[str], *, by_index: bool) -> bool:
    """Whether ``name`` is an earlier stage: by its name (any case), or, where the
    instruction allows it (``--from``), by its index."""
    if by_index and name.isdigit():
        return int(name) < len(stages)
    return bool(name) and name.lower() in stages


def _check_from(
    ins: Instruction, stages: list[str], pinned_args: Set[str], escape: str
) -> list[Finding]:
    image, alias = _from_image(ins.args, escape)
    out = []
    if not _is_stage(image, stages, by_index=False) and image != "scratch":
        out = _pin(ins.line, f"FROM {image}", image, pinned_args)
    stages.append(alias or "")  # "": a stage without a name, still counted by its index
    return out


def _named_images(ins: Instruction, escape: str) -> Iterator[tuple[str, str]]:
    """(how it was written, image) for each ``--from=`` of a COPY or ADD and each ``from=``
    of a RUN ``--mount``: the leading flags only, not the words of the command.

    Flags as BuildKit's parser reads them (quotes out, parser/split_command.go); a flag's
    name in its case (``--FROM`` is an unknown flag, instructions/bflag.go); a mount spec
    as CSV with its keys in any case (instructions/commands_runmount.go).
    """
    keyword, args = ins.keyword, ins.args
    if keyword == "ONBUILD":  # the instruction it carries runs in a child image's build
        inner, *rest = WORDS.split(args, maxsplit=1)
        keyword, args = inner.upper(), rest[0] if rest else ""
    for flag in builder_flags(args, escape)[0]:
        name, _, value = flag.partition("=")
        if name == "--from" and keyword in ("COPY", "ADD"):
            yield f"{keyword} --from={value}", value
        elif name == "--mount" and keyword == "RUN":
            for key, image in mount_options(value):
                if key == "from":
                    yield f"RUN --mount=…,from={image}", image


def _check_named(
    ins: Instruction, stages: list[str], pinned_args: Set[str], escape: str
) -> list[Finding]:
    """Each image named outside FROM: an earlier stage (by name or index), or pinned."""
    out = []
    for shown, image in _named_images(ins, escape):
        if _is_stage(image, stages, by_index=True):
            continue
        if re.search(r"(^|[:/])latest(@|$)", image):
            out.append(Finding(ins.line, "latest", f"{shown}: 'latest' is not a pin; use a "
                               "version and a digest"))  # fmt: skip
        why = "not an earlier stage, so an image pulled at build time: "
        out += _pin(ins.line, shown, image, pinned_args, why)
    return out


def _unpinned_packages(script: str) -> str | None:
    """The first package manager install in ``script`` that no pin holds, or None; apt is
    held by a dated snapshot named in the same script."""
    for found in _PACKAGES.finditer(script):
        word = found.group(0)
        if not (word.lower().startswith("apt") and _APT_SNAPSHOT.search(script)):
            said = " ".join(word.split())
            return said if len(said) <= 60 else said[:59] + "…"
    return None


def unpinned_apt(build_args: Mapping[str, str]) -> list[str]:
    """Build args that install apt packages without a dated snapshot (whatever is current)."""
    if build_args.get("APT_SNAPSHOT"):
        return []
    return [k for k, v in sorted(build_args.items()) if k.endswith("APT_PACKAGES") and v.strip()]


def lint_dockerfile(text: str, *, pinned_args: Set[str], allow_copy: bool = True) -> list[Finding]:
    """Every rule broken by ``text``; an empty list when it is clean."""
    findings: list[Finding] = []
    for line, image in syntax_directives(text):  # a frontend is an image docker pulls
        if not DIGEST_RE.match(image.partition("@")[2]):
            why = "the frontend is pulled at build time; pin it by digest or drop the line"
            findings.append(Finding(line, "pin", f"# syntax={image}: {why}"))
    escape = escape_char(text)
    stages: list[str] = []  # each stage's name ("" if it has none), in order
    for ins in instructions(text):
        script = f"{ins.args}\n{ins.body}"  # a RUN runs its heredocs (parser/parser.go)
        control = _CONTROL.search(ins.args)
        if control:
            findings.append(Finding(ins.line, "control", f"{ins.keyword} holds the control "
                                    f"character {control.group()!r}; remove it"))  # fmt: skip
        if re.search(r"(^|[:/\s=])latest(\s|$|@)", ins.args) and ins.keyword in ("FROM", "ARG"):
            findings.append(
                Finding(
                    ins.line,
                    "latest",
                    f"{ins.keyword} {ins.args}: 'latest' is not a pin; use a version and a digest",
                )
            )
        findings += _check_named(ins, stages, pinned_args, escape)
        if ins.unterminated:  # an engine without heredocs runs the rest as instructions
            findings.append(Finding(ins.line, "heredoc", (
                f"{ins.keyword} opens the heredoc <<{ins.unterminated}, which no line ends: "
                "BuildKit fails the build, and an engine without heredocs (buildah 1.28, whose "
                "binary holds none) reads every line after it as instructions "
                f"lint did not check; end it with a line {ins.unterminated}")))  # fmt: skip
        if ins.keyword == "FROM":
            findings += _check_from(ins, stages, pinned_args, escape)
        elif ins.keyword in ("COPY", "ADD") and not allow_copy:
            findings.append(
                Finding(
                    ins.line,
                    "no-copy",
                    f"{ins.keyword} is not allowed in this "
                    "target; install with RUN --mount=type=bind instead",
                )
            )
        elif ins.keyword == "ADD" and _REMOTE.search(ins.args):
            findings.append(
                Finding(
                    ins.line,
                    "download",
                    "ADD from a URL skips the checksum; fetch the file through the lock instead",
                )
            )
        elif ins.keyword == "RUN" and _DOWNLOAD.search(script) and _PIPE_TO_SHELL.search(script):
            why = "RUN pipes a download into a shell, which no checksum can vet; use the lock"
            findings.append(Finding(ins.line, "download", why))
        elif ins.keyword == "RUN" and (found := _unpinned_packages(script)):
            findings.append(Finding(ins.line, "download", (
                f"RUN installs with '{found}', which takes what its index serves at build "
                "time; give apt packages to a *_APT_PACKAGES build arg (installed from the "
                "lock's APT_SNAPSHOT), and others through a hash-pinned file (pip "
                "--require-hashes, npm ci)")))  # fmt: skip
        elif ins.keyword == "RUN" and _DOWNLOAD.search(script) and not _CHECKED.search(script):
            tool = _DOWNLOAD.search(script)
            findings.append(
                Finding(
                    ins.line,
                    "download",
                    f"RUN downloads with "
                    f"'{tool.group(0) if tool else '?'}' without a checksum check; "
                    "add sha256sum -c or pip --require-hashes",
                )
            )
    return findings


def derived_problems(lock: Lock, target: Target) -> list[str]:
    """The closure check of each derived requirements file the target installs.

    A target built with ``VLLM_VERSION`` installs its pip files with ``--no-deps`` on top
    of vLLM, so each must be derived (``# derived-for:`` header) and pass the check.
    """
    out = []
    for name in target.pip:
        file = lock.pip[name].file
        path = lock.root / file
        text = read_utf8(path, LintError) if path.is_file() else ""
        derivation = requirements.derived_for(text)
        if derivation is None and requirements.version_arg("vllm") not in target.build_args:
            continue  # hand-written, for an image without vLLM: nothing to check it against
        arg = requirements.version_arg(derivation.package if derivation else "vllm")
        facts = closure.closure_path(path)
        out += closure.problems(
            text,
            read_utf8(facts, LintError) if facts.is_file() else None,
            where=file,
            closure_where=str(facts.relative_to(lock.root)),
            expected_version=target.build_args.get(arg),
            version_from=f"targets.{target.name}.build_args.{arg}",
        )
    return out


_PAYLOAD = re.compile(r"\{payload:([^}]+)\}")
# llama.cpp b10069's spellings (common/arg.cpp:3907, :3915; docs/llama-shapes.md)
_DRAFT_FLAGS = ("--model-draft", "-md", "--spec-draft-model")


def mtp_problems(lock: Lock, target: Target) -> list[str]:
    """``--spec-type draft-mtp`` without a draft model drafts with the model's own MTP head,
    so its ``-m`` payload must say (``expect.nextn_layers``) that it carries one: the
    payload check then proves the ``blk.N.nextn.*`` tensors are there. A model without
    them starts, logs that speculative decoding is off, and serves slowly: caught here."""
    cmd = list(target.serve.command)  # names as llama-server reads them: --spec_type too
    after = {option(flag): cmd[i + 1] for i, flag in enumerate(cmd[:-1])}
    spec = after.get("--spec-type", "")
    if "draft-mtp" not in spec.split(",") or any(f in after for f in _DRAFT_FLAGS):
        return []
    model = _PAYLOAD.fullmatch(after.get("-m", after.get("--model", "")))
    where = f"targets.{target.name}.serve.command"
    if model is None or model[1] not in lock.payloads:
        return [f"{where}: --spec-type {spec} without --model-draft needs -m {{payload:NAME}}"]
    payload = lock.payloads[model[1]]
    if not payload.expect.get("nextn_layers"):
        return [
            f"{where}: --spec-type {spec} without --model-draft drafts with the model's own "
            f"MTP head, but payloads.{payload.name}.expect has no nextn_layers: pin the -mtp "
            "GGUF that carries blk.N.nextn.* (and set expect.nextn_layers), or pass "
            "--model-draft {payload:ASSISTANT}"
        ]
    return []
