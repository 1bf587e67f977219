"""``INSERT … ON CONFLICT`` on either backend: PostgreSQL and SQLite both have it, each in its
own SQLAlchemy dialect module, with the same ``on_conflict_do_update``/``do_nothing``."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from app.extensions import db


def upsert_into(table: Any) -> Any:
    """An INSERT into ``table`` (a model or table) that can say what to do on a conflict, for
    the database the session is bound to."""
    dialect = db.session.get_bind().dialect.name
    return (postgresql_insert if dialect == "postgresql" else sqlite_insert)(table)
