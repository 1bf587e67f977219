"""Every setting is read in one place and documented for operators: ``app.config.Settings``
names each environment variable the service reads, and ``docs/operations.md``'s configuration
table is held equal to it, so the page can neither promise a variable that does nothing nor
leave one out.

Reads of the environment elsewhere are found in the source (``app/``, ``worker/``,
``gunicorn.conf.py``, ``wsgi.py``): ``os.environ[...]``, ``os.environ.get(...)``,
``os.getenv(...)``. Only ``ELSEWHERE`` may read it, each for the reason given; the tests' own
settings (``TEST_REDIS_URL`` …, read in ``tests/*.py``) are documented in
``docs/testing.md``."""

from __future__ import annotations

import re
from pathlib import Path

from app.config import SETTING_NAMES, Settings

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *sorted((ROOT / "app").rglob("*.py")),
    *sorted((ROOT / "worker").rglob("*.py")),
    ROOT / "gunicorn.conf.py",
    ROOT / "wsgi.py",
]
TEST_HELPERS = sorted((ROOT / "tests").glob("*.py"))
OPERATIONS = ROOT / "docs" / "operations.md"
TESTING = ROOT / "docs" / "testing.md"

# Variables read outside ``Settings``, and why.
ELSEWHERE = {
    # prometheus_client's own variable: gunicorn.conf.py and the worker set it at run time, for
    # the library; app.metrics asks whether this process counts in a shared folder.
    "PROMETHEUS_MULTIPROC_DIR": {"app/metrics.py", "worker/metrics.py", "gunicorn.conf.py"},
    # The MCP server is a client of the API, a program of its own (docs/api.md), not the service.
    "CALENDAR_API_URL": {"app/mcp/__main__.py"},
    "CALENDAR_API_KEY": {"app/mcp/__main__.py"},
}

_READ = re.compile(
    r"\bos\.(?:environ(?:\.get\(\s*|\.setdefault\(\s*|\[)|getenv\(\s*)[\"']([A-Z][A-Z0-9_]+)[\"']"
)
_TABLE_ROW = re.compile(r"^\| ((?:`[A-Z][A-Z0-9_]+`(?:, )?)+) \|", re.MULTILINE)
_NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def names_read(source: str) -> set[str]:
    """The environment variables ``source`` reads by name."""
    return set(_READ.findall(source))


def reads_outside_settings() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in SOURCES:
        if path.exists() and path != ROOT / "app" / "config.py":
            for name in names_read(path.read_text()):
                found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def settings_in_the_table(page: str) -> set[str]:
    return {name for cell in _TABLE_ROW.findall(page) for name in _NAME.findall(cell)}


def test_the_environment_is_read_in_the_settings_module_alone() -> None:
    unexpected = {
        name: sorted(paths - ELSEWHERE.get(name, set()))
        for name, paths in reads_outside_settings().items()
        if paths - ELSEWHERE.get(name, set())
    }
    assert unexpected == {}


def test_every_setting_is_in_the_operators_configuration_table() -> None:
    assert sorted(SETTING_NAMES - settings_in_the_table(OPERATIONS.read_text())) == []


def test_every_name_in_the_configuration_table_is_a_setting() -> None:
    tests_own = {name for path in TEST_HELPERS for name in names_read(path.read_text())}
    table = settings_in_the_table(OPERATIONS.read_text())
    assert sorted(table - SETTING_NAMES - set(ELSEWHERE) - tests_own) == []


def test_the_tests_own_settings_are_documented_for_contributors() -> None:
    tests_own = {name for path in TEST_HELPERS for name in names_read(path.read_text())}
    documented = set(_NAME.findall(OPERATIONS.read_text() + TESTING.read_text()))
    assert sorted(tests_own - SETTING_NAMES - documented) == []


def test_every_setting_says_what_it_does() -> None:
    assert [name for name, field in Settings.model_fields.items() if not field.description] == []


def test_the_checks_find_a_read_elsewhere_and_a_table_row_that_names_no_setting() -> None:
    source = 'import os\nx = os.environ.get("NEW_SETTING")\ny = os.getenv("OTHER")\n'
    assert names_read(source) == {"NEW_SETTING", "OTHER"}
    page = "| `GONE_SETTING`, `OTHER` | 1 | What it did. |\n| `x` | y | z |\n"
    assert settings_in_the_table(page) == {"GONE_SETTING", "OTHER"}
