"""``lockpipe doctor`` (issue 19 part 5): each finding with its fix; nothing it finds fails it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lockpipe.cli import doctor
from lockpipe.cli.main import main
from lockpipe.lock.model import load_lock

REPO = Path(__file__).resolve().parents[2]


def test_unreachable_places_are_warnings_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock's docker.io bases are asked of registry-1.docker.io:443; the mirror of its
    own port. A FAKE connect decides what answers (unit tests open no socket)."""
    asked: list[tuple[str, int]] = []

    def fake_reachable(host: str, port: int) -> str | None:
        asked.append((host, port))
        return None if host == "127.0.0.1" else "Name or service not known"

    monkeypatch.setattr(doctor, "reachable", fake_reachable)
    lock = load_lock(REPO / "locks/digests.json")
    found = {f.name: f for f in doctor.network(lock, "https://huggingface.co",
                                               "http://127.0.0.1:8081")}  # fmt: skip
    assert ("registry-1.docker.io", 443) in asked and ("127.0.0.1", 8081) in asked
    assert found["the mirror"].status == "ok" and not found["the mirror"].fix
    hub = found["the Hub"]
    assert hub.status == "warn" and "cannot be reached (Name or service not known)" in hub.detail
    assert "--mirror" in hub.fix


def test_the_store_check_compares_free_space_with_the_lock(tmp_path: Path) -> None:
    lock = load_lock(REPO / "locks/digests.json")
    (finding,) = doctor.store(tmp_path / "not-yet" / "store", lock)
    assert f"free on {tmp_path}" in finding.detail and "the lock's payloads take" in finding.detail


def test_doctor_reports_every_area_as_json_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doctor, "reachable", lambda host, port: "FAKE: no network in unit tests")
    monkeypatch.setattr(
        doctor,
        "engines",
        lambda: iter(
            [
                doctor.Finding(
                    area="engines",
                    name="buildah",
                    status="warn",
                    detail="FAKE",
                    fix="apt-get install x",
                )
            ]
        ),
    )
    code = main(["doctor", "--lock", str(REPO / "locks/digests.json"), "--json", "-"])
    captured = capsys.readouterr()
    assert code == 0
    doc = json.loads(captured.out)  # stdout is the JSON alone; the table went to stderr
    areas = {f["area"] for f in doc["findings"]}
    assert {"lock", "engines", "network", "gpu", "quadlet", "store"} <= areas
    assert all(f["fix"] for f in doc["findings"] if f["status"] != "ok")
    assert "lockpipe doctor" in captured.err


@pytest.mark.parametrize(
    ("option", "url"),
    [("--mirror", "http://u:s3cret-tok@mirror.example:99999/"),
     ("--mirror", "http://u:s3cret-tok@[::1/")],
    ids=["port-out-of-range", "unclosed-bracket"],
)  # fmt: skip
def test_a_mirror_url_that_is_not_one_is_a_finding_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], option: str, url: str
) -> None:
    monkeypatch.setattr(doctor, "reachable", lambda host, port: None)  # FAKE: all answer
    monkeypatch.setattr(doctor, "engines", lambda: iter([]))
    code = main(["doctor", "--lock", str(REPO / "locks/digests.json"), option, url,
                 "--json", "-"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (mirror,) = [f for f in json.loads(captured.out)["findings"] if f["name"] == "the mirror"]
    assert mirror["status"] == "warn" and "is not a URL" in mirror["detail"], mirror
    assert "--mirror" in mirror["fix"]
    assert "s3cret-tok" not in captured.out + captured.err


@pytest.mark.parametrize("under", ["", "store"], ids=["the-file", "a-folder-under-it"])
def test_a_store_that_is_a_file_is_no_ok_store(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    under: str,
) -> None:  # fmt: skip
    """doctor measured the free space under a regular file and called the store ok."""
    monkeypatch.setattr(doctor, "reachable", lambda host, port: "FAKE: no network in unit tests")
    monkeypatch.setattr(doctor, "engines", lambda: iter([]))
    afile = tmp_path / "afile"
    afile.write_text("x")
    store = afile / under if under else afile
    argv = ["doctor", "--lock", str(REPO / "locks/digests.json"), "--store", str(store)]
    assert main([*argv, "--json", "-"]) == 0
    (found,) = [f for f in json.loads(capsys.readouterr().out)["findings"]
                if f["area"] == "store"]  # fmt: skip
    assert found["status"] == "warn"
    assert f"{afile} is a file, not a folder" in found["detail"]
    assert "pass --store DIR (LOCKPIPE_STORE)" in found["fix"]


def test_a_store_under_a_folder_this_user_cannot_write_is_no_ok_store(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("os.access", lambda path, mode: False)  # tests may run as root
    (found,) = doctor.store(tmp_path / "store", None)
    assert found.status == "warn"
    assert f"{tmp_path} is not writable by this user, so {tmp_path}/store" in found.detail


def test_a_path_that_looks_like_markup_is_shown_as_it_is(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The table read each cell as rich markup: --store 'a[/x]' was MarkupError's
    traceback, and engine or registry text in a detail could be too."""
    monkeypatch.setattr(doctor, "reachable", lambda host, port: "FAKE: no network [/x]")
    monkeypatch.setattr(doctor, "engines", lambda: iter([]))
    store = tmp_path / "a[/x]"
    assert main(["doctor", "--lock", str(REPO / "locks/digests.json"), "--store", str(store)]) == 0
    out = capsys.readouterr().out.replace("\n", "")
    assert "a[/x]" in out and "no network [/x]" in out


@pytest.mark.parametrize(
    ("env", "option", "url", "row"),
    [("", "--mirror", "https://user:s3cr#et@mirror.example/", "the mirror"),
     ("", "--mirror", "https://user:s3cr?et@mirror.example/", "the mirror"),
     ("", "--mirror", "https://user:s3cr@", "the mirror"),
     ("HF_ENDPOINT", "", "https://hf:s3cr/et@hub.example", "the Hub"),
     ("HF_ENDPOINT", "", "https://hf:1234/s3cr@hub.example", "the Hub")],
    ids=["hash-in-password", "question-in-password", "no-host", "hub-slash", "hub-digits"],
)  # fmt: skip
def test_a_password_urllib_cannot_read_is_never_shown_even_in_part(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: str,
    option: str,
    url: str,
    row: str,
) -> None:
    """A password typed with '#', '/' or '?' in it, or a URL with no host after its '@':
    the row says the URL (its password ***) is not one, never urllib's words quoting it nor
    the raw URL as a host."""
    monkeypatch.setattr(doctor, "reachable", lambda host, port: "FAKE: no network")
    monkeypatch.setattr(doctor, "engines", lambda: iter([]))
    if env:
        monkeypatch.setenv(env, url)
    else:
        monkeypatch.delenv("HF_ENDPOINT", raising=False)
    extra = [option, url] if option else []
    code = main(["doctor", "--lock", str(REPO / "locks/digests.json"), *extra, "--json", "-"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.out + captured.err
    (found,) = [f for f in json.loads(captured.out)["findings"] if f["name"] == row]
    assert found["status"] == "warn" and "\n" not in found["detail"], found
    assert "s3cr" not in captured.out + captured.err, found
    assert "***@" in found["detail"], found
