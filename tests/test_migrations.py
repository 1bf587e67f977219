"""Migrations as an operator runs them: upgrade on every start (``make run``, the Procfile's
``release``), downgrade and upgrade again, and adopting SQLite databases whose revision an
earlier release never recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic.script import ScriptDirectory
from flask_migrate import downgrade, stamp, upgrade
from sqlalchemy import create_engine, inspect, text

from app import MIGRATIONS_DIR, create_app
from app.extensions import db
from app.services.demo import DEMO_EMAIL, ensure_demo

HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_database_url(request, tmp_path) -> str:
    """An empty database of its own (no tables), per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    return request.getfixturevalue("postgres_database")()


def run(url: str, command: Callable[..., None], *args: str) -> None:
    """One Flask-Migrate command in an app of its own, as ``flask db …`` would run it."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test"})
    with app.app_context():
        command(*args)
        db.engine.dispose()


def recorded_revisions(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return []
            return list(connection.scalars(text("SELECT version_num FROM alembic_version")))
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_records_the_head_revision(fresh_database_url):
    run(fresh_database_url, upgrade)
    assert recorded_revisions(fresh_database_url) == [HEAD]


def test_upgrading_twice_is_a_no_op(fresh_database_url):
    run(fresh_database_url, upgrade)
    run(fresh_database_url, upgrade)
    assert recorded_revisions(fresh_database_url) == [HEAD]


def test_downgrade_to_base_then_upgrade_again(fresh_database_url):
    run(fresh_database_url, upgrade)
    run(fresh_database_url, downgrade, None, "base")
    assert recorded_revisions(fresh_database_url) == []
    assert table_names(fresh_database_url) <= {"alembic_version"}
    run(fresh_database_url, upgrade)
    assert recorded_revisions(fresh_database_url) == [HEAD]
    assert "bookings" in table_names(fresh_database_url)


def test_stamp_writes_the_revision(fresh_database_url):
    run(fresh_database_url, stamp)
    assert recorded_revisions(fresh_database_url) == [HEAD]


def test_unversioned_sqlite_database_is_adopted_with_its_data(tmp_path):
    """What the releases before this fix left behind: every table, an empty version table."""
    url = f"sqlite:///{tmp_path / 'legacy.sqlite3'}"
    run(url, upgrade, None, "0002")
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test"})
    with app.app_context():
        ensure_demo()
        db.session.execute(text("DELETE FROM alembic_version"))
        db.session.commit()
        db.engine.dispose()
    assert recorded_revisions(url) == []

    run(url, upgrade)

    assert recorded_revisions(url) == [HEAD]
    engine = create_engine(url)
    with engine.connect() as connection:
        owners = connection.scalars(text("SELECT email FROM users")).all()
    engine.dispose()
    assert owners == [DEMO_EMAIL]
