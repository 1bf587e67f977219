"""Services do not commit, except the jobs marked as owning their transactions
(``app.services.common.transactions``): read from the source, so a new commit in a use case
fails here before it splits a transaction in two."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "app" / "services"
MARK = "owns_transactions"


def marked(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == MARK)
        or (isinstance(d, ast.Attribute) and d.attr == MARK)
        for d in function.decorator_list
    )


def is_commit(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "commit"
    )


def commits_by_function(source: str) -> tuple[list[tuple[str, bool]], list[str]]:
    """For each commit: (where, whether an enclosing function is marked); and the marked
    functions that never commit."""
    commits: list[tuple[str, bool]] = []
    idle_marks: list[str] = []

    def visit(node: ast.AST, path: tuple[str, ...], under_mark: bool) -> bool:
        found = False
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                is_function = not isinstance(child, ast.ClassDef)
                mark = is_function and marked(child)
                inner = visit(child, (*path, child.name), under_mark or mark)
                if mark and not inner:
                    idle_marks.append(".".join((*path, child.name)))
                found |= inner
            else:
                if is_commit(child):
                    commits.append((".".join(path) or "<module>", under_mark))
                    found = True
                found |= visit(child, path, under_mark)
        return found

    visit(ast.parse(source), (), False)
    return commits, idle_marks


def test_only_jobs_that_own_their_transactions_commit():
    unmarked = [
        f"{path.relative_to(ROOT)}::{where}"
        for path in sorted(SERVICES.rglob("*.py"))
        for where, is_marked in commits_by_function(path.read_text())[0]
        if not is_marked
    ]
    assert unmarked == []


def test_every_job_marked_as_owning_its_transactions_commits():
    idle = [
        f"{path.relative_to(ROOT)}::{name}"
        for path in sorted(SERVICES.rglob("*.py"))
        for name in commits_by_function(path.read_text())[1]
    ]
    assert idle == []


def test_the_checker_finds_an_unmarked_commit_and_accepts_a_marked_one():
    source = """
def use_case(session):
    session.flush()
    session.commit()

@owns_transactions
def job(session):
    def one(item):
        session.commit()
    one(1)

@owns_transactions
def idle():
    pass
"""
    commits, idle_marks = commits_by_function(source)
    assert commits == [("use_case", False), ("job.one", True)]
    assert idle_marks == ["idle"]
