"""``tests/conftest.py``'s ``ONE_DATABASE`` runs some modules on one database: each name must
be a test module (a renamed one would silently run on both again) and name a database and a
reason. That each runs on a database at all is checked at collection (``conftest``: a module
listed whose tests take no database is a usage error)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ONE_DATABASE

TESTS = Path(__file__).resolve().parents[1]


def test_each_module_run_on_one_database_exists() -> None:
    found = {path.name for path in TESTS.rglob("test_*.py")}
    assert sorted(set(ONE_DATABASE) - found) == []


def test_each_names_a_database_and_why() -> None:
    assert {database for database, _ in ONE_DATABASE.values()} <= {"sqlite", "postgresql"}
    assert [name for name, (_, why) in ONE_DATABASE.items() if not why.strip()] == []
