"""Every setting the code reads from the environment is documented for operators, and every
setting the operators' configuration table names is read: ``docs/operations.md`` cannot
promise a variable that does nothing, nor leave one out.

The reads are found in the source (``app/``, ``worker/``, ``gunicorn.conf.py``, ``wsgi.py``, and
the tests' helpers for the tests' own settings):
``os.environ[...]``, ``os.environ.get(...)``, ``env[...]`` and ``env.get(...)`` (``load_config``
names ``os.environ`` ``env``), and the names ``load_config`` reads in a loop over a tuple. A
setting is documented when ``docs/operations.md`` (or, for the tests' own, ``docs/testing.md``)
names it in a code span; the configuration table is the operations page's table rows whose
first cell names settings."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *sorted((ROOT / "app").rglob("*.py")),
    *sorted((ROOT / "worker").rglob("*.py")),
    ROOT / "gunicorn.conf.py",
    ROOT / "wsgi.py",
    *sorted((ROOT / "tests").glob("*.py")),  # the tests' own settings (TEST_POSTGRES_URL …)
]
OPERATIONS = ROOT / "docs" / "operations.md"
TESTING = ROOT / "docs" / "testing.md"  # where the tests' own settings are told

_READ = re.compile(r"\b(?:os\.environ|env)(?:\.get\(\s*|\[)[\"']([A-Z][A-Z0-9_]+)[\"']")
_TABLE_ROW = re.compile(r"^\| ((?:`[A-Z][A-Z0-9_]+`(?:, )?)+) \|", re.MULTILINE)
_NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def names_read(source: str) -> set[str]:
    """The environment variables ``source`` reads."""
    found = set(_READ.findall(source))
    for node in ast.walk(ast.parse(source)):
        reads_env = isinstance(node, ast.For) and "env" in ast.unparse(node.body[0])
        if reads_env and isinstance(node.iter, ast.Tuple):
            found |= {
                element.value
                for element in node.iter.elts
                if isinstance(element, ast.Constant) and isinstance(element.value, str)
            }
    return found


def settings_read() -> set[str]:
    return {name for path in SOURCES if path.exists() for name in names_read(path.read_text())}


def settings_in_the_table(page: str) -> set[str]:
    return {name for cell in _TABLE_ROW.findall(page) for name in _NAME.findall(cell)}


def test_every_setting_the_code_reads_is_documented_for_operators() -> None:
    documented = set(_NAME.findall(OPERATIONS.read_text() + TESTING.read_text()))
    assert sorted(settings_read() - documented) == []


def test_every_setting_the_configuration_table_names_is_read() -> None:
    assert sorted(settings_in_the_table(OPERATIONS.read_text()) - settings_read()) == []


def test_the_checks_find_a_setting_read_but_not_documented_and_one_documented_but_not_read():
    source = (
        'import os\nenv = os.environ\nx = env.get("NEW_SETTING")\n'
        'for name in ("LOOPED_SETTING",):\n    if env.get(name):\n        pass\n'
    )
    assert names_read(source) == {"NEW_SETTING", "LOOPED_SETTING"}
    page = "| `GONE_SETTING`, `OTHER` | 1 | What it did. |\n| `x` | y | z |\n"
    assert settings_in_the_table(page) == {"GONE_SETTING", "OTHER"}
