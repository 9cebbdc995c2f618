"""Regenerate old-requirements-audio.closure.json: the closure facts of the hand-written
requirements file frank-small had before the derivation (librosa's stack, not vLLM's audio
extra), with each pinned wheel's real metadata from PyPI.

Run from the repository root: ``python tests/data/closure/make_old_fixture.py`` (network).
Core closure, core extras and vllm[audio]'s own facts are taken from the committed, derived
images/frank-small/requirements-audio.closure.json (vLLM 0.29.0, the same base).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from lockpipe.lock import closure as cl
from lockpipe.lock import requirements as rq
from lockpipe.refresh import pip

HERE = Path(__file__).parent
OLD = HERE / "old-requirements-audio.txt"
DERIVED = Path("images/frank-small/requirements-audio.closure.json")


def main() -> None:
    text = OLD.read_text()
    pins = rq.parse_pins(text, str(OLD))
    spec = pip.Spec(package="vllm", extra="audio", version="0.29.0")
    with tempfile.TemporaryDirectory() as tmp:
        wanted = [f"{p.name}=={p.version}" for p in pins.values()]
        graph, wheels = pip.graph_of(pip.pip_report(["--no-deps", *wanted], spec, Path(tmp)))
    for name, pin in pins.items():  # the very wheels the old file pinned, by sha256
        assert (graph[name].version, wheels[name].sha256) == (pin.version, pin.sha256), name
    derived = cl.parse_closure(DERIVED.read_text(), str(DERIVED))
    facts = cl.Closure(
        package=derived.package, extra=derived.extra, version=derived.version,
        python=derived.python, platform=derived.platform,
        requirements_sha256=cl.sha256_text(text), core=derived.core,
        core_extras=derived.core_extras, extended=derived.extended,
        pinned={
            n: cl.Package(version=graph[n].version, requires_dist=graph[n].requires_dist,
                          sha256=wheels[n].sha256, wheel=wheels[n].filename)
            for n in sorted(pins)
        },
    )  # fmt: skip
    (HERE / "old-requirements-audio.closure.json").write_text(facts.to_json())
    print("\n".join(cl.unmet(facts)))


if __name__ == "__main__":
    main()
