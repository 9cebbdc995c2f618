"""House rules the linters do not know: checked over the whole package."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lockpipe"


def _dataclasses() -> list[tuple[str, ast.ClassDef, ast.expr]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Name) and target.id == "dataclass":
                    out.append((str(path.relative_to(PACKAGE.parent)), node, dec))
    return out


def test_dataclasses_with_more_than_three_fields_are_built_by_keyword() -> None:
    positional = []
    for where, node, dec in _dataclasses():
        fields = [s for s in node.body if isinstance(s, ast.AnnAssign)]
        kw_only = isinstance(dec, ast.Call) and any(
            k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in dec.keywords
        )
        if len(fields) > 3 and not kw_only:
            positional.append(f"{where}: {node.name} ({len(fields)} fields)")
    assert not positional, f"add kw_only=True: {positional}"


def _fixture_scope(node: ast.FunctionDef) -> str | None:
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call):
            for k in dec.keywords:
                if k.arg == "scope" and isinstance(k.value, ast.Constant):
                    return str(k.value.value)
    return None


def test_module_fixtures_remove_their_folders_at_teardown() -> None:
    """A module-scoped fixture set up again each time a shuffled order comes back to its
    module must not leave a folder each time (``tests.policy.scratch``): seed 689863 filled
    the disk at 80 % of the run. A session-scoped fixture is set up once and may keep one."""
    tests = PACKAGE.parent / "tests"
    kept = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or _fixture_scope(node) in (None, "session"):
                continue
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("mktemp", "getbasetemp")):  # fmt: skip
                    kept.append(f"{path.relative_to(tests.parent)}:{call.lineno} {node.name}")
    assert not kept, f"use `with scratch(tmp_path_factory, name)` instead: {kept}"
