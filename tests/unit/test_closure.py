"""The static closure check of derived requirements files, on real PyPI facts (no network)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lockpipe.cli import check
from lockpipe.errors import LintError
from lockpipe.lock import closure as cl
from lockpipe.lock import requirements as rq
from lockpipe.lock.model import load_lock
from lockpipe.refresh import pip
from tests.lockfactory import doc, make_repo

REPO = Path(__file__).resolve().parents[2]
FRANK = REPO / "images" / "frank-small"
DATA = REPO / "tests" / "data" / "closure"
REQS = FRANK / "requirements-audio.txt"
FACTS = FRANK / "requirements-audio.closure.json"


def _facts(**changes: Any) -> cl.Closure:
    base = cl.Closure(
        package="app", extra="x", version="1.0", python="3.12",
        platform="manylinux_2_35_x86_64", requirements_sha256="0" * 64,
        core={"app": "1.0", "numpy": "2.3.5", "attrs": "26.1.0"}, core_extras={},
        extended={}, pinned={},
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_old_hand_written_file_misses_narwhals_and_scipy() -> None:
    """The librosa stack frank-small pinned before: scikit-learn 1.9.1 imports narwhals,
    which nothing pinned, and scipy was missing for it, librosa and vllm[audio] alike."""
    old = cl.parse_closure((DATA / "old-requirements-audio.closure.json").read_text(), "old")
    found = cl.unmet(old)
    core = "not pinned, and not in vllm 0.29.0's core closure"
    assert f"scikit-learn 1.9.1 requires narwhals>=2.0.1: {core}" in found
    assert f"scikit-learn 1.9.1 requires scipy>=1.10.0: {core}" in found
    assert f"vllm[audio] 0.29.0 requires av: {core}" in found
    assert f"vllm[audio] 0.29.0 requires scipy: {core}" in found


def test_old_file_fails_lint_on_its_facts() -> None:
    text = (DATA / "old-requirements-audio.txt").read_text()
    facts = (DATA / "old-requirements-audio.closure.json").read_text()
    header = "# derived-for: vllm[audio]==0.29.0\n"
    assert cl.sha256_text(text) == cl.parse_closure(facts, "old").requirements_sha256
    kwargs: dict[str, Any] = dict(
        closure_where="old.closure.json", expected_version="0.29.0", version_from="VLLM_VERSION"
    )
    # As it was: hand-written, so lint cannot check it and says how to fix that.
    (hand_written,) = cl.problems(text, facts, where="old.txt", **kwargs)
    assert "no `# derived-for: PKG[EXTRA]==V` header" in hand_written
    # Given a header and matching facts, the closure check names what is missing.
    facts_doc = json.loads(facts)
    facts_doc["requirements_sha256"] = cl.sha256_text(header + text)
    found = cl.problems(header + text, json.dumps(facts_doc), where="old.txt", **kwargs)
    assert any("scikit-learn 1.9.1 requires narwhals>=2.0.1" in p for p in found)


def test_committed_derived_file_passes() -> None:
    text = REQS.read_text()
    derivation = rq.derived_for(text)
    assert derivation is not None and str(derivation) == "vllm[audio]==0.29.0"
    facts = cl.parse_closure(FACTS.read_text(), "facts")
    assert cl.unmet(facts) == []
    assert set(facts.pinned) == set(rq.parse_pins(text, "reqs")) == {
        "av", "scipy", "soundfile", "soxr"
    }  # fmt: skip
    assert facts.extended["mistral-common"].extras == ("audio", "soundfile", "soxr")
    assert cl.problems(text, FACTS.read_text(), where="r", closure_where="c",
                       expected_version="0.29.0", version_from="VLLM_VERSION") == []  # fmt: skip


def test_markers_are_evaluated_for_the_target() -> None:
    reqs = (
        "numpy<2.8",
        'missing-on-windows; sys_platform == "win32"',
        'missing-before-312; python_version < "3.12"',
        'missing-test-extra; extra == "test"',
        'attrs>=30; extra == "x"',  # only with the extra: x is not asked of it
    )
    pinned = {"lib": cl.Package(version="1.0", requires_dist=reqs)}
    assert cl.unmet(_facts(pinned=pinned)) == []
    asked = {"lib": cl.Package(version="1.0", extras=("x",), requires_dist=reqs)}
    assert cl.unmet(_facts(pinned=asked)) == [
        "lib[x] 1.0 requires attrs>=30: the closure has attrs 26.1.0"
    ]
    py311 = _facts(python="3.11", pinned=pinned)
    assert cl.unmet(py311) == [
        "lib 1.0 requires missing-before-312: not pinned, and not in app 1.0's core closure"
    ]


def test_extras_of_a_requirement_must_be_in_the_facts() -> None:
    pinned = {"lib": cl.Package(version="1.0", requires_dist=("numpy[extra-bits]",))}
    assert cl.unmet(_facts(pinned=pinned)) == [
        "lib 1.0 requires numpy[extra-bits]: the closure has no facts for numpy's extras extra-bits"
    ]
    known = _facts(pinned=pinned, core_extras={"numpy": ("extra-bits",)})
    assert cl.unmet(known) == []


def test_extended_core_packages_are_checked_for_their_new_extras_only() -> None:
    app = cl.Package(version="1.0", extras=("x",),
                     requires_dist=("never-checked-here", 'lib; extra == "x"'))  # fmt: skip
    assert cl.unmet(_facts(extended={"app": app})) == [
        "app[x] 1.0 requires lib: not pinned, and not in app 1.0's core closure"
    ]
    lib = {"lib": cl.Package(version="1.0")}
    assert cl.unmet(_facts(extended={"app": app}, pinned=lib)) == []


def test_reach_walks_extras_and_reports_what_the_graph_lacks() -> None:
    graph = {
        "app": cl.Node("1.0", ('lib[y]; extra == "x"', "base")),
        "lib": cl.Node("2.0", ('tail; extra == "y"', 'gone; extra == "y"')),
        "base": cl.Node("3.0", ('only-on-311; python_version < "3.12"',)),
        "tail": cl.Node("4.0", ()),
    }
    env = cl.marker_env("3.12")
    plain = cl.reach(graph, "app", (), env)
    assert dict(plain.extras) == {"app": frozenset(), "base": frozenset()}
    assert plain.missing == ()
    extra = cl.reach(graph, "App", ("x",), env)
    assert set(extra.extras) == {"app", "base", "lib", "tail"}
    assert extra.extras["lib"] == {"y"} and extra.missing == ("gone",)


def test_requirements_file_roundtrip_and_malformed_lines() -> None:
    d = rq.Derivation(package="vllm", extra="audio", version="0.29.0")
    pins = [rq.Pin(name="soxr", version="1.1.0", sha256="b" * 64),
            rq.Pin(name="av", version="19.0.2", sha256="a" * 64)]  # fmt: skip
    text = rq.render_requirements(d, pins, python="3.12", platform="p")
    assert rq.derived_for(text) == d
    assert list(rq.parse_pins(text, "r")) == ["av", "soxr"]
    with pytest.raises(LintError, match=r"'av==19\.0\.2' is not `name==version --hash"):
        rq.parse_pins("av==19.0.2\n", "r")
    assert rq.version_arg("vllm") == "VLLM_VERSION"
    assert pip.platforms("manylinux_2_28_x86_64")[:2] == [
        "manylinux_2_28_x86_64", "manylinux_2_27_x86_64"
    ]  # fmt: skip


# -- lint and lock on a repository of their own -----------------------------------------------


def _repo(tmp_path: Path, version: str = "0.29.0") -> Path:
    """A lock whose target installs a copy of the committed derived file and its facts."""
    ctx = tmp_path / "images" / "app"
    ctx.mkdir(parents=True)
    shutil.copy(REQS, ctx / REQS.name)
    shutil.copy(FACTS, ctx / FACTS.name)
    document = doc()
    document["pip"] = {"audio": {"file": f"images/app/{REQS.name}", "sha256": "0" * 64}}
    document["targets"]["app"]["pip"] = ["audio"]
    document["targets"]["app"]["build_args"] = {"VLLM_VERSION": version}
    return make_repo(tmp_path, document)


def _lint(path: Path) -> None:
    check.do_lint(argparse.Namespace(lock=path, targets=[], verb="lint"))


def test_lint_passes_a_consistent_copy(tmp_path: Path) -> None:
    _lint(_repo(tmp_path))


def test_lint_rejects_facts_for_another_requirements_file(tmp_path: Path) -> None:
    path = _repo(tmp_path)
    facts = tmp_path / "images" / "app" / FACTS.name
    facts.write_text(facts.read_text().replace(cl.sha256_text(REQS.read_text()), "f" * 64))
    with pytest.raises(LintError) as info:
        _lint(path)
    assert f"images/app/{FACTS.name} records sha256 {'f' * 64} of " in str(info.value)
    assert "regenerate with nox -s lock" in str(info.value)


def test_lint_rejects_a_file_derived_for_another_version(tmp_path: Path) -> None:
    with pytest.raises(LintError) as info:
        _lint(_repo(tmp_path, version="0.30.0"))
    assert (
        f"images/app/{REQS.name} was derived for vllm[audio]==0.29.0, but "
        "targets.app.build_args.VLLM_VERSION is 0.30.0; re-derive with nox -s lock"
    ) in str(info.value)


def test_lint_rejects_a_hand_written_file_on_a_vllm_target(tmp_path: Path) -> None:
    path = _repo(tmp_path)
    shutil.copy(DATA / "old-requirements-audio.txt", tmp_path / "images" / "app" / REQS.name)
    with pytest.raises(LintError, match="no `# derived-for: PKG\\[EXTRA\\]==V` header"):
        _lint(path)


def _lock(path: Path, force: bool = False) -> int:
    return check.do_lock(argparse.Namespace(lock=path, check=False, force=force))


def test_lock_derives_only_what_is_stale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _repo(tmp_path)
    calls: list[pip.Spec] = []
    facts = cl.parse_closure(FACTS.read_text(), "facts")

    def derive(spec: pip.Spec) -> pip.Derived:
        calls.append(spec)
        text = REQS.read_text().replace("0.29.0", spec.version)
        again = dataclasses.replace(
            facts, version=spec.version, requirements_sha256=cl.sha256_text(text)
        )
        return pip.Derived(requirements=text, closure=again)

    monkeypatch.setattr(pip, "derive", derive)
    assert _lock(path) == 0 and calls == []  # current: no derivation, no network
    assert _lock(path, force=True) == 0 and [s.version for s in calls] == ["0.29.0"]
    lock = json.loads(path.read_text())
    lock["targets"]["app"]["build_args"]["VLLM_VERSION"] = "0.30.0"
    path.write_text(json.dumps(lock))
    assert _lock(path) == 0 and [s.version for s in calls] == ["0.29.0", "0.30.0"]
    relocked = load_lock(path)
    origin = relocked.document["pip"]["audio"]["origin"]["source"]
    assert "vllm[audio]==0.30.0 minus vllm==0.30.0" in origin
    assert (
        "# derived-for: vllm[audio]==0.30.0" in (tmp_path / relocked.pip["audio"].file).read_text()
    )
    _lint(path)
