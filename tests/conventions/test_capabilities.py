"""What a provider can do is asked of the capability table (``providers/__init__.py``), never
read off its kind: the live check and the push channels name no kind and branch on none, so a
new kind of calendar is one row of the table and one adapter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CALENDARS = ROOT / "app" / "services" / "integrations" / "calendars"
BY_CAPABILITY = [CALENDARS / "live_check.py", CALENDARS / "push.py"]


def kind_branches(source: str) -> list[int]:
    """The lines where ``source`` names ``ConnectionKind`` or tests a ``kind`` in an ``if``,
    a conditional expression or a ``match``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name | ast.Attribute) and "ConnectionKind" in ast.unparse(node):
            lines.append(node.lineno)
        tests = (
            [node.test]
            if isinstance(node, ast.If | ast.IfExp | ast.While)
            else [node.subject]
            if isinstance(node, ast.Match)
            else []
        )
        for test in tests:
            if any(
                isinstance(inner, ast.Attribute) and inner.attr == "kind"
                for inner in ast.walk(test)
            ):
                lines.append(test.lineno)
    return sorted(set(lines))


@pytest.mark.parametrize("module", BY_CAPABILITY, ids=lambda path: path.name)
def test_the_module_has_no_branch_on_the_providers_kind(module: Path) -> None:
    assert kind_branches(module.read_text()) == []


def test_the_checker_finds_a_branch_on_a_kind() -> None:
    source = """
if plan.kind == "google":
    pass
watch = provider.watch if connection.kind in PUSH_KINDS else None
kinds = (ConnectionKind.GOOGLE,)
match channel.kind:
    case _:
        pass
answerer = live_answerer(question.kind)
"""
    assert kind_branches(source) == [2, 4, 5, 6]
