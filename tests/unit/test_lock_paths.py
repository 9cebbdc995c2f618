"""Lock values that name paths, tags and payload files are refused where the lock is read,
with one line naming the key, rather than met later by ``build`` or a fetch: a dockerfile
outside its context (an absolute one was overwritten by ``build``), a pip file outside the
checkout (``lint`` crashed), a payload path under another listed as a file, a tag no engine
takes, and a ``.GGUF`` file whose checks were skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli.main import main
from lockpipe.errors import LockError
from lockpipe.imagebuild.context import stage
from lockpipe.lock.model import load_lock
from lockpipe.payloads.checks import check_file
from tests.lockfactory import DOCKERFILE, make_repo
from tests.unit.test_payload_formats import write_gguf

SHA = "ab" * 32


def _lint(tmp_path: Path, change: Any, capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line of ``lockpipe lint`` on make_repo's lock after ``change``."""
    lock = make_repo(tmp_path)
    doc = json.loads(lock.read_text())
    change(doc)
    lock.write_text(json.dumps(doc))
    code = main(["lint", "--lock", str(lock)])
    err = capsys.readouterr().err
    assert code == LockError.return_code, err
    assert "Traceback" not in err and "Error:" not in err
    lines = [x.strip() for x in err.splitlines() if x.startswith("  ")]
    assert len(lines) == 1, err
    return lines[0]


def _dockerfile(value: str) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc["targets"]["app"]["dockerfile"] = value

    return change


def test_an_absolute_dockerfile_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absolute = str(tmp_path / "images" / "app" / "Dockerfile")
    line = _lint(tmp_path, _dockerfile(absolute), capsys)
    assert line.startswith("targets.app.dockerfile: ") and "not an absolute one" in line


def test_a_dockerfile_outside_the_context_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "images" / "other").mkdir(parents=True)
    (tmp_path / "images" / "other" / "Dockerfile").write_text(DOCKERFILE)
    line = _lint(tmp_path, _dockerfile("../other/Dockerfile"), capsys)
    assert line.startswith("targets.app.dockerfile: '../other/Dockerfile' leads outside")
    assert "images/app" in line


def test_a_dockerfile_linked_outside_the_context_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "Dockerfile").write_text(DOCKERFILE)

    def change(doc: dict[str, Any]) -> None:
        link = tmp_path / "images" / "app" / "Linked"
        link.symlink_to(tmp_path / "elsewhere" / "Dockerfile")
        doc["targets"]["app"]["dockerfile"] = "Linked"

    line = _lint(tmp_path, change, capsys)
    assert line.startswith("targets.app.dockerfile: 'Linked' leads outside")


def test_a_dockerfile_in_a_subfolder_of_the_context_still_loads(tmp_path: Path) -> None:
    lock = make_repo(tmp_path)
    sub = tmp_path / "images" / "app" / "sub"
    sub.mkdir()
    (sub / "Dockerfile").write_text(DOCKERFILE)
    doc = json.loads(lock.read_text())
    doc["targets"]["app"]["dockerfile"] = "sub/../sub/Dockerfile"
    lock.write_text(json.dumps(doc))
    assert load_lock(lock).targets["app"].dockerfile == "sub/../sub/Dockerfile"


@pytest.mark.parametrize("name", ["ABSOLUTE", "../elsewhere/Dockerfile"])
def test_stage_never_writes_outside_its_folder(tmp_path: Path, name: str) -> None:
    context = tmp_path / "images" / "app"
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "elsewhere").mkdir()
    original = tmp_path / "elsewhere" / "Dockerfile"
    original.write_text(DOCKERFILE)
    dockerfile = str(original) if name == "ABSOLUTE" else name
    with pytest.raises(LockError, match="leads outside the build context"):
        stage(context, dockerfile, {"x": "y"}, {}, tmp_path / "staged" / "ctx")
    assert original.read_text() == DOCKERFILE  # no LABEL line written over the user's file


@pytest.mark.parametrize("file", ["/etc/passwd", "../outside.txt", "sub/../../outside.txt"])
def test_a_pip_file_outside_the_checkout_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    root = tmp_path / "co"
    (tmp_path / "outside.txt").write_text("x==1\n")
    root.mkdir()

    def change(doc: dict[str, Any]) -> None:
        doc["pip"] = {"req": {"file": file, "sha256": SHA}}
        doc["targets"]["app"]["pip"] = ["req"]
        doc["targets"]["app"]["build_args"]["VLLM_VERSION"] = "0.29.0"

    line = _lint(root, change, capsys)
    assert line.startswith(f"pip.req.file: {file!r} ")
    assert "not an absolute one" in line or "leads outside the checkout" in line


def test_a_pip_file_under_a_linked_images_folder_still_loads(tmp_path: Path) -> None:
    """A checkout whose images/ is a link to another one's (as tests and second checkouts
    do): the pip file's bytes are pinned by its sha256, so only '..' and absolute paths
    are refused, not links."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "app").mkdir(parents=True)
    (elsewhere / "app" / "Dockerfile").write_text(DOCKERFILE)
    (elsewhere / "app" / "req.txt").write_text("x==1\n")
    root = tmp_path / "co"
    root.mkdir()
    (root / "images").symlink_to(elsewhere)
    document = json.loads(make_repo(tmp_path / "first").read_text())
    document["pip"] = {"req": {"file": "images/app/req.txt", "sha256": SHA}}
    (root / "locks").mkdir()
    (root / "locks" / "digests.json").write_text(json.dumps(document))
    assert load_lock(root / "locks" / "digests.json").pip["req"].file == "images/app/req.txt"


def test_a_payload_file_under_another_listed_file_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def change(doc: dict[str, Any]) -> None:
        pins = {"size": 4, "sha256": SHA}
        doc["payloads"] = {"p": {"repository": "org/repo", "role": "model", "revision": "2" * 40,
                                 "files": {"model.safetensors": pins, "extra": pins,
                                           "extra/b": pins}}}  # fmt: skip

    line = _lint(tmp_path, change, capsys)
    assert line.startswith("payloads.p.files.extra/b: 'extra/b' is under 'extra'")
    assert "remove one of them" in line


@pytest.mark.parametrize(
    ("tag", "why"),
    [
        ("Localhost/RevLoc:1", "is not a valid repository component"),
        ("a:bad tag", "is not a valid tag"),
        ("-t", "is not a valid repository component"),
        ("localhost/app:1@sha256:" + SHA, "holds a digest"),
    ],
)
def test_a_tag_that_is_no_image_reference_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tag: str, why: str
) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["targets"]["app"]["tag"] = tag

    line = _lint(tmp_path, change, capsys)
    assert line.startswith("targets.app.tag: ") and why in line


def _gguf_payload(tmp_path: Path, filename: str) -> Any:
    document = json.loads(make_repo(tmp_path).read_text())
    document["payloads"] = {"m": {"repository": "org/m-GGUF", "role": "model",
                                  "revision": "3" * 40, "filename": filename, "size": 31,
                                  "sha256": SHA, "expect": {"arch": "qwen35",
                                                            "nextn_layers": 1}}}  # fmt: skip
    lock = make_repo(tmp_path, document)
    return load_lock(lock).payloads["m"]


def test_an_upper_case_gguf_suffix_gets_the_gguf_checks(tmp_path: Path) -> None:
    payload = _gguf_payload(tmp_path, "model-MTP.GGUF")
    assert payload.format == "gguf"
    plain = write_gguf(tmp_path / "plain.gguf", "qwen3", 2)
    problems = check_file(payload, plain, plain.stat().st_size).problems
    assert any("general.architecture is 'qwen3', expect.arch wants 'qwen35'" in p for p in problems)
    assert any("nextn_predict_layers" in p for p in problems)


def test_gguf_expect_keys_on_a_payload_of_another_format_do_not_pass(tmp_path: Path) -> None:
    payload = _gguf_payload(tmp_path, "model.bin")
    plain = write_gguf(tmp_path / "plain.gguf", "qwen3", 2)
    problems = check_file(payload, plain, plain.stat().st_size).problems
    assert sorted(p.split(":")[0] for p in problems) == [
        "payloads.m.expect.arch",
        "payloads.m.expect.nextn_layers",
    ]
    assert all("no GGUF header was read" in p for p in problems)


@pytest.mark.parametrize("context", ["images/..", "images/."])
def test_a_context_of_the_images_folder_itself_or_above_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], context: str
) -> None:
    """The schema's images/[a-z0-9._-]+ took '..': the checkout's root as a context."""

    def change(doc: dict[str, Any]) -> None:
        doc["targets"]["app"]["context"] = context

    line = _lint(tmp_path, change, capsys)
    assert line.startswith("targets.app.context: ") and "does not match" in line, line


@pytest.mark.parametrize(
    ("arg", "why"),
    [
        ("{payloads:m}", "'{payloads:m}' is not a placeholder lockpipe fills; write "
         "{payload:NAME} (a file) or {payload-dir:NAME}"),
        ("--model={Payload:m}", "'{Payload:m}' is not a placeholder"),
        ("{payload_dir:m}", "'{payload_dir:m}' is not a placeholder"),
        ("{payload:other}", "{payload:other} names no payload of targets.app; add 'other' to "
         "targets.app.payloads or fix the name"),
    ],
)  # fmt: skip
def test_a_serve_command_placeholder_lockpipe_would_not_fill_is_refused_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arg: str, why: str
) -> None:
    """{payloads:m} passed plan and lint and reached the server as a literal path; preflight
    then said 'model shape unknown … run nox -s payloads -- m', which fixed nothing."""

    def change(doc: dict[str, Any]) -> None:
        doc["payloads"] = {"m": {"repository": "org/m", "revision": "a" * 40, "role": "model",
                                 "format": "gguf", "filename": "m.gguf", "size": 1,
                                 "sha256": SHA}}  # fmt: skip
        doc["targets"]["app"]["payloads"] = ["m"]
        doc["targets"]["app"]["serve"]["command"] = ["llama-server", "-m", arg]

    line = _lint(tmp_path, change, capsys)
    assert line.startswith("targets.app.serve.command: ") and why in line, line


@pytest.mark.parametrize(
    "value", ["__pycache__/Dockerfile", "sub/__pycache__/Dockerfile", "__pycache__/../Dockerfile"]
)
def test_a_dockerfile_the_context_leaves_out_is_refused_naming_the_key(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """context_paths skips __pycache__: such a Dockerfile was neither fingerprinted nor
    staged, and build met a FileNotFoundError traceback in stage()."""
    folder = tmp_path / "images" / "app"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "sub" / "__pycache__").mkdir(parents=True)
    (folder / value).write_text(DOCKERFILE)
    line = _lint(tmp_path, _dockerfile(value), capsys)
    assert line.startswith("targets.app.dockerfile: ") and "__pycache__" in line
    assert "move it out of there" in line


def test_a_dockerfile_beside_a_pycache_folder_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "images" / "app" / "__pycache__").mkdir(parents=True)
    (tmp_path / "images" / "app" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (tmp_path / "images" / "app" / "d").mkdir()
    (tmp_path / "images" / "app" / "d" / "Dockerfile").write_text(DOCKERFILE)
    lock = make_repo(tmp_path)
    document = json.loads(lock.read_text())
    document["targets"]["app"]["dockerfile"] = "d/Dockerfile"
    lock.write_text(json.dumps(document))
    assert main(["lint", "--lock", str(lock)]) == 0, capsys.readouterr().err
