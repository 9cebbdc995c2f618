"""Pure parts of payloads as OCI artifacts: the ModelPack manifest, reading another client's,
and deploying from artifacts (the .artifact unit, the version gate, the checks)."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import requests

from lockpipe.deploy import artifact as art
from lockpipe.deploy.store import missing_payloads
from lockpipe.errors import RegistryError
from lockpipe.http import Retries
from lockpipe.http.transport import Policy, Transport
from lockpipe.lock.model import load_lock
from lockpipe.payloads.errors import HTTPFatal
from lockpipe.payloads.http import open_range
from lockpipe.payloads.sources import Candidate, candidate
from lockpipe.payloads.store import file_path
from lockpipe.registry import modelpack as mp
from tests.lockfactory import DOC, make_repo

REV = "0123456789abcdef0123456789abcdef01234567"
SHA = "ab" * 32


def _lock(tmp: Path, files: dict[str, Any] | None = None) -> Any:
    doc = copy.deepcopy(DOC)
    one = {
        "repository": "google/gemma-3-270m",
        "revision": REV,
        "role": "model",
        "format": "gguf",
        "filename": "g.gguf",
        "size": 10,
        "sha256": SHA,
    }
    snap = {
        "repository": "org/snap",
        "revision": REV,
        "role": "mtp-assistant",
        "format": "safetensors",
        "files": files
        or {
            "config.json": {"size": 3, "git_sha1": "cd" * 20},
            "model.safetensors": {"size": 5, "sha256": "ef" * 32},
        },
    }
    doc["payloads"] = {"gemma": one, "snap": snap}
    app = doc["targets"]["app"]
    app["payloads"] = ["gemma", "snap"]
    app["serve"]["command"] = ["llama-server", "-m", "{payload:gemma}", "--x", "{payload-dir:snap}"]
    return load_lock(make_repo(tmp, doc))


def _layers(lock: Any) -> tuple[mp.Layer, ...]:
    return tuple(
        mp.Layer(path=f.path, digest=f"sha256:{f.sha256 or 'cd' * 32}", size=f.size)
        for f in lock.payloads["snap"].files
    )


def test_the_manifest_is_modelpack_and_the_same_bytes_every_time(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    p = lock.payloads["snap"]
    a = mp.artifact("models", p, _layers(lock), "https://huggingface.co/org/snap")
    assert a == mp.artifact("models", p, _layers(lock), "https://huggingface.co/org/snap")
    assert (a.repository, a.tag) == ("models/snap", f"rev-{REV}")
    doc = json.loads(a.manifest)
    assert doc["artifactType"] == "application/vnd.cncf.model.manifest.v1+json"
    assert doc["config"]["digest"] == "sha256:" + hashlib.sha256(a.config).hexdigest()
    kinds = {x["annotations"]["org.cncf.model.filepath"]: x["mediaType"] for x in doc["layers"]}
    assert kinds == {
        "config.json": "application/vnd.cncf.model.weight.config.v1.raw",
        "model.safetensors": "application/vnd.cncf.model.weight.v1.raw",
    }
    config = json.loads(a.config)
    assert set(config) == {"descriptor", "modelfs", "config"}  # the schema allows no other keys
    assert config["descriptor"]["revision"] == REV


def test_another_clients_manifest_is_read_by_title_and_tar_layers_are_skipped() -> None:
    body = json.dumps(
        {
            "layers": [
                {
                    "mediaType": mp.WEIGHT_RAW,
                    "digest": "sha256:" + SHA,
                    "size": 4,
                    "annotations": {"org.opencontainers.image.title": "w.gguf"},
                },
                {
                    "mediaType": "application/vnd.cncf.model.weight.v1.tar",
                    "digest": "sha256:" + "11" * 32,
                    "size": 9,
                    "annotations": {"org.cncf.model.filepath": "packed"},
                },
            ]
        }
    ).encode()
    assert set(mp.file_layers("r", body)) == {"w.gguf"}
    with pytest.raises(RegistryError, match="r: the manifest is not JSON"):
        mp.file_layers("r", b"<html>")


def _layer(digest: str, **notes: str) -> dict[str, Any]:
    return {"mediaType": mp.WEIGHT_RAW, "digest": digest, "size": 4, "annotations": notes}


@pytest.mark.parametrize(
    ("layers", "words"),
    [
        ([_layer("sha256:" + SHA, **{mp.FILEPATH: "model.safetensors", mp.TITLE: "unused.bin"}),
          _layer("sha256:" + "ee" * 32, **{mp.TITLE: "model.safetensors"})],
         "layers[0] names the file 'model.safetensors' in org.cncf.model.filepath but "
         "'unused.bin' in org.opencontainers.image.title"),
        ([_layer("sha256:" + SHA, **{mp.TITLE: "w.gguf"}),
          _layer("sha256:" + "ee" * 32, **{mp.TITLE: "w.gguf"})],
         "two layers name the file 'w.gguf'"),
    ],
)  # fmt: skip
def test_a_manifest_that_names_a_file_two_ways_is_refused(
    layers: list[dict[str, Any]], words: str
) -> None:
    """podman mounts a layer as the file its title names: a checked layer (filepath) beside
    an unchecked one (title) of the same name passed deploy --artifacts, and the unchecked
    bytes were mounted (issue 18)."""
    with pytest.raises(RegistryError, match=re.escape(f"r: {words}")):
        mp.file_layers("r", json.dumps({"layers": layers}).encode())


def test_podman_before_5_7_keeps_the_store_and_says_why(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    why = art.why_not((4, 3), lock, lock.target("app"))
    assert why is not None and "podman 4.3 has no .artifact quadlet units (5.7+" in why
    assert art.why_not((5, 7), lock, lock.target("app")) is None


def test_artifact_mounts_give_the_unit_and_the_command_paths(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    refs = {
        "gemma": "r:5000/models/gemma@sha256:" + "12" * 32,
        "snap": "r:5000/models/snap@sha256:" + "34" * 32,
    }
    mounts = art.plan_mounts(lock.target("app"), lock, refs)
    # podman 5.8.6 mounts a one-blob artifact as a file at the destination, a many-blob one
    # as a folder of files named by title (tools/trixie-probe.sh artifact-mount)
    assert [m.entry() for m in mounts] == [
        ("Mount", "type=artifact,source=app-gemma.artifact,destination=/artifacts/gemma/g.gguf"),
        ("Mount", "type=artifact,source=app-snap.artifact,destination=/artifacts/snap"),
    ]
    assert art.artifact_command(lock.target("app"), lock, mounts) == (
        "llama-server",
        "-m",
        "/artifacts/gemma/g.gguf",
        "--x",
        "/artifacts/snap",
    )
    text = mounts[1].render().render()
    assert "[Artifact]\nArtifact=r:5000/models/snap@sha256:" in text and "experimental" in text


def test_an_artifact_missing_or_changing_a_file_is_named(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    layers = {x.path: x for x in _layers(lock)}
    assert art.artifact_lacks(lock.payloads["snap"], layers) == []
    del layers["config.json"]
    layers["model.safetensors"] = mp.Layer(
        path="model.safetensors", digest="sha256:" + "00" * 32, size=5
    )
    assert art.artifact_lacks(lock.payloads["snap"], layers) == [
        "config.json: not in the artifact",
        f"model.safetensors: sha256:{'00' * 32} in the artifact, the lock pins sha256:{'ef' * 32}",
    ]


def test_a_file_the_lock_pins_by_nothing_is_a_lack_of_the_artifact(tmp_path: Path) -> None:
    """Only its presence was checked: any bytes passed deploy --artifacts, where the store
    refuses such a file (store.blob_id: no sha256 or git_sha1 pinned) (issue 18)."""
    lock = _lock(tmp_path, {"config.json": {"size": 3}, "w.bin": {"size": 5, "sha256": SHA}})
    layers = {
        "config.json": mp.Layer(path="config.json", digest="sha256:" + "00" * 32, size=3),
        "w.bin": mp.Layer(path="w.bin", digest=f"sha256:{SHA}", size=5),
    }
    (lack,) = art.artifact_lacks(lock.payloads["snap"], layers)
    assert lack.startswith("config.json: the lock pins no sha256 or git_sha1 for it")


def test_a_file_pinned_by_its_git_id_is_checked_by_its_bytes(tmp_path: Path) -> None:
    """A git-pinned file's layer was checked by its size alone: other bytes of that size
    passed (issue 18)."""
    good, bad = b"{}\n", b"[]\n"
    git_id = hashlib.sha1(b"blob 3\0" + good, usedforsecurity=False).hexdigest()
    lock = _lock(tmp_path, {"config.json": {"size": 3, "git_sha1": git_id}})
    payload = lock.payloads["snap"]
    (f,) = payload.files

    def layer(data: bytes) -> mp.Layer:
        return mp.Layer(path="config.json", size=3,
                        digest="sha256:" + hashlib.sha256(data).hexdigest())  # fmt: skip

    ((got, _),) = art.by_git_id(payload, {"config.json": layer(bad)})
    assert got == f
    assert art.git_lacks(f, layer(good), good) is None
    bad_id = hashlib.sha1(b"blob 3\0" + bad, usedforsecurity=False).hexdigest()
    assert art.git_lacks(f, layer(bad), bad) == (
        f"config.json: git blob {bad_id} in the artifact, the lock pins {git_id}"
    )
    said = art.git_lacks(f, layer(good), bad)  # the registry's bytes are not its digest's
    assert said is not None and "the registry answered the blob sha256:" in said


def test_the_store_check_counts_every_file_of_a_snapshot(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    store = tmp_path / "store"
    for name in ("gemma", "snap"):
        for f in lock.payloads[name].files:
            link = file_path(store, lock.payloads[name], f)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.write_bytes(b"x")
    assert missing_payloads(lock, "app", store) == ()
    file_path(store, lock.payloads["snap"], lock.payloads["snap"].files[0]).unlink()
    assert missing_payloads(lock, "app", store) == ("snap",)  # the folder alone is not enough


def test_a_registries_conf_table_for_the_hub_names_the_payload_mirror() -> None:
    from lockpipe.publish.ocimirror import conf_mirrors
    from lockpipe.registry.names import parse_registries_conf

    text = """
[[registry]]
prefix = "huggingface.co"
location = "huggingface.co"
[[registry.mirror]]
location = "127.0.0.1:5000/models"
[[registry]]
prefix = "*.co"
location = ""
[[registry.mirror]]
location = "elsewhere:5000/images"
"""
    confs = parse_registries_conf(text, "registries.conf")
    assert conf_mirrors(confs) == ["127.0.0.1:5000/models"]
    assert conf_mirrors([c for c in confs if c.prefix != "huggingface.co"]) == []


class _Answers401(requests.Session):
    """A session whose every request is answered 401, as a registry or mirror would."""

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kw: Any) -> Any:
        resp = requests.Response()
        resp.status_code, resp.url, resp._content = 401, str(url), b""
        resp.raw = io.BytesIO()  # closed, as a connection would be released
        return resp


def _refusal(cand: Candidate) -> str:
    transport = Transport(Policy(retries=Retries(attempts=0), timeout=1.0))
    transport.session = _Answers401()
    with pytest.raises(HTTPFatal) as err:
        open_range(transport, cand, 0, None)
    return str(err.value)


def test_a_401_names_where_each_kind_of_mirror_takes_its_credentials() -> None:
    from lockpipe.publish.ocimirror import OciCandidate
    from lockpipe.registry.creds import Credential
    from lockpipe.registry.transport import Registry

    blob = "http://127.0.0.1:5000/v2/models/m/blobs/sha256:" + "0" * 64
    anonymous = Registry("127.0.0.1:5000", scheme="http", credential=None)
    msg = _refusal(OciCandidate(url=blob, kind="mirror", registry=anonymous, repository="models/m"))
    assert "USER:TOKEN" not in msg and "--mirror" not in msg
    assert "asks for credentials to read models/m: log in with podman login 127.0.0.1:5000" in msg
    cred = Credential(username="ci", secret="s3cret", source="/run/auth.json")
    logged = Registry("127.0.0.1:5000", scheme="http", credential=cred)
    logged._basic = True  # the host asked for Basic before: credentials go with the GET
    msg = _refusal(OciCandidate(url=blob, kind="mirror", registry=logged, repository="models/m"))
    assert "refused the credentials of ci (from /run/auth.json)" in msg and "s3cret" not in msg
    plain = candidate("http://u:p@127.0.0.1:8080/huggingface.co/org/m/resolve/x/m.bin", "mirror")
    assert "give them in --mirror (http://USER:TOKEN@HOST/…)" not in _refusal(plain)
    assert "refused the user and password in --mirror" in _refusal(plain)
