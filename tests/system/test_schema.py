"""The schema comes from migrations, and only from them."""

from __future__ import annotations

from collections.abc import Callable

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from flask_migrate import upgrade
from sqlalchemy import create_engine, inspect

from app import create_app
from app.celery_app import BROKER_TABLES, schema_owns
from app.extensions import db


def test_migrations_match_the_models(app):
    with db.engine.connect() as conn:
        options = {"compare_type": True, "include_name": schema_owns}
        context = MigrationContext.configure(conn, opts=options)
        assert compare_metadata(context, db.metadata) == []


def test_app_start_creates_no_tables(postgres_database: Callable[[], str]):
    url = postgres_database()
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "x"})
    app.test_client().get("/v1/api/calendar/bookings", headers={"x-calendar-api-key": "k"})
    engine = create_engine(url)
    assert inspect(engine).get_table_names() == []
    engine.dispose()


def test_upgrade_builds_every_table_on_an_empty_database(postgres_database: Callable[[], str]):
    url = postgres_database()
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "x"})
    with app.app_context():
        upgrade()
        tables = set(inspect(db.engine).get_table_names())
        db.engine.dispose()
    assert set(db.metadata.tables) | {"alembic_version", *BROKER_TABLES} == tables
