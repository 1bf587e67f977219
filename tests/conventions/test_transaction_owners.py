"""Services never commit: a use case flushes and its entry point commits once
(``app.unit_of_work`` for the writes that ask the connected calendars), and work that must
commit in steps is a job (``app.jobs``). Read from the source, so a new commit in a service
fails here before it splits a transaction in two."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "app" / "services"


def commits_in(source: str) -> list[str]:
    """Where ``source`` calls ``commit`` on anything: the enclosing functions' dotted names."""
    found: list[str] = []

    def visit(node: ast.AST, path: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = path
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = (*path, child.name)
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == "commit"
            ):
                found.append(".".join(path) or "<module>")
            visit(child, inner)

    visit(ast.parse(source), ())
    return found


def test_no_service_commits():
    commits = [
        f"{path.relative_to(ROOT)}::{where}"
        for path in sorted(SERVICES.rglob("*.py"))
        for where in commits_in(path.read_text())
    ]
    assert commits == []


def test_the_checker_finds_a_commit_wherever_it_is():
    source = """
def use_case(session):
    session.flush()
    session.commit()

def job(session):
    def one(item):
        session.commit()
    one(1)

def reads(session):
    session.execute("SELECT 1")
"""
    assert commits_in(source) == ["use_case", "job.one"]


def lint_imports_with(tmp_path: Path, module: str, source: str) -> str:
    """``lint-imports`` on a copy of the tree with ``module`` (a dotted name) added."""
    for tree in ("app", "worker"):
        shutil.copytree(ROOT / tree, tmp_path / tree, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / Path(*module.split("."))).with_suffix(".py").write_text(source)
    ran = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return ran.stdout + ran.stderr


def test_an_import_contract_fails_on_a_service_importing_a_job(tmp_path):
    found = lint_imports_with(
        tmp_path, "app.services.runs_a_job", "from app.jobs.outbox import handle_event\n"
    )
    assert "Layers: entry points over jobs over services" in found
    assert "BROKEN" in found.split("Layers: entry points over jobs over services")[1].split("\n")[0]
    assert "app.services.runs_a_job -> app.jobs.outbox" in found


def test_an_import_contract_fails_on_an_api_view_running_a_job(tmp_path):
    found = lint_imports_with(
        tmp_path, "app.api.runs_a_job", "from app.jobs.outbox import handle_event\n"
    )
    contract = "Jobs run in the worker and the command line, never in a web request"
    assert "BROKEN" in found.split(contract)[1].split("\n")[0]
