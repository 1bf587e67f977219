"""Column types shared by the models."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import DateTime, Enum
from sqlalchemy.types import TypeDecorator

# Id columns are PostgreSQL ``integer``: the largest id a row can have, and so the largest a
# request may name (the API documents and checks it, lookups refuse larger ones as not found).
MAX_ID = 2**31 - 1


class UTCDateTime(TypeDecorator[datetime]):
    """An instant, stored in UTC and always handed back timezone-aware.

    PostgreSQL keeps it as ``timestamptz``. Naive input is refused: a naive datetime reaching
    the database is a bug, not a value.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given for a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None or value.tzinfo is UTC:  # psycopg's, in our UTC sessions
            return value
        return value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def stored_enum(members: type[StrEnum], name: str, length: int) -> Enum:
    """A status column: the members' values (``"pending"``) stored in a VARCHAR(``length``)
    whose CHECK the Enum makes (``ck_<table>_<name>``), not a native PostgreSQL enum type (so
    adding a member migrates no type); loaded as members."""
    return Enum(
        members,
        name=name,
        native_enum=False,
        create_constraint=True,
        validate_strings=True,
        length=length,
        values_callable=lambda enum: [member.value for member in enum],
    )
