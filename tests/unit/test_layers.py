"""The import graph: no module imports one that (directly or not) imports it back."""

from __future__ import annotations

import grimp


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("lockpipe", exclude_type_checking_imports=True)
    cycles = sorted(
        (a, b)
        for a in graph.modules
        for b in graph.find_modules_directly_imported_by(a)
        if graph.chain_exists(importer=b, imported=a)
    )
    assert not cycles, f"import cycles: {cycles}"


def test_plan_and_help_load_no_sdk_or_http() -> None:
    """``lockpipe plan`` and ``--help`` start fast: the heavy packages stay unloaded."""
    import subprocess
    import sys

    code = (
        "import sys; from lockpipe.cli import main, check, options; "
        "print(sorted(m for m in ('requests', 'docker', 'podman', 'jsonschema', "
        "'rich.progress', 'lockpipe.payloads.download', 'lockpipe.engines.docker') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
