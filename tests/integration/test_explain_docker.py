"""docker's reproducibility, by the version probed: proved where BuildKit can, reported where not.

dockerd >= 26 (Debian 13 has 26.1) embeds BuildKit >= 0.13, whose exporter has
``rewrite-timestamp=true``; the engine asks for it there, but does not claim it
works, because dockerd's graphdriver image store is reported to ignore it
(moby/buildkit#4986). So on every version two no-cache builds are measured:
they agree, or the explainer names timestamps as the cause. An older dockerd
(20.10 on Debian 12) cannot clamp at all, and must not agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockpipe.engines import get_engine
from lockpipe.engines.docker import (
    REWRITE_TIMESTAMP_SINCE,
    SOURCE_DATE_EPOCH_SINCE,
    dockerd_major,
    rewrite_params,
)
from lockpipe.errors import EngineMissing
from lockpipe.imagebuild.run import Settings
from lockpipe.lock.model import load_lock
from lockpipe.verify import causes
from lockpipe.verify.reproduce import reproduce_and_explain
from tests.lockfactory import doc, make_repo
from tests.policy import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.docker]

DOCKERFILE = """\
ARG BASE
FROM ${BASE}
RUN mkdir -p /app && echo fixed > /app/greeting
"""


def test_docker_reproducibility_follows_the_probed_version(
    busybox_base: tuple[str, str], tmp_path: Path
) -> None:
    try:
        engine = get_engine("docker")
    except EngineMissing as exc:
        unavailable(f"docker is not usable: {exc}")
    version = engine.version()
    capable = dockerd_major(version) >= REWRITE_TIMESTAMP_SINCE
    repro = engine.reproducibility()
    # The branch: the build asks for rewrite-timestamp exactly where BuildKit has it.
    assert ("outputs" in rewrite_params(version)) is capable
    assert repro.reproducible is False, repro.how  # never claimed unmeasured
    assert repro.how.startswith(f"dockerd {version}:")

    document = doc()
    document["bases"]["busybox"] = {"ref": busybox_base[0], "digest": busybox_base[1]}
    document["targets"]["app"]["tag"] = "localhost/lockpipe-test/explain-docker:1"
    lock = load_lock(make_repo(tmp_path, document, DOCKERFILE))
    result = reproduce_and_explain(
        lock, "app", engine, Settings(state=tmp_path / "s", cache=tmp_path / "c")
    )

    assert "SOURCE_DATE_EPOCH" in repro.how
    if result.same:
        # Measured reproducible: only possible where BuildKit clamped the layer times.
        assert capable, f"dockerd {version} gave the same image twice; update the engine's claim"
        print(f"dockerd {version}: two no-cache builds agree (rewrite-timestamp honoured)")
        return
    explanation = result.explanation
    assert explanation is not None
    names = {c.name for c in explanation.causes}
    assert "timestamps" in names, explanation.text()
    if dockerd_major(version) < SOURCE_DATE_EPOCH_SINCE:  # BuildKit < 0.11 stamps the build time
        assert any(d.field == "created" for d in explanation.config), explanation.text()
    assert causes.MOVED_BASE not in explanation.causes
