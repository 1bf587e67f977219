"""Calendar connections managed by operators (``flask connections …``): add, list, remove.
Syncing is ``app.services.calendars.sync``. Passwords are stored encrypted and never shown."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.extensions import db
from app.models import CalendarConnection
from app.scheduling.timezones import format_utc
from app.services.errors import NotFound
from app.services.provisioning import CalendarConnectionDoc, create_connection
from app.services.sub_account_documents import load_named


class ConnectionNotFound(NotFound):
    message = "Calendar connection not found"


def _stamp(value: Any) -> str | None:
    return None if value is None else format_utc(value)


def describe(connection: CalendarConnection) -> dict[str, Any]:
    """What an operator may see of a connection: everything but the password."""
    return {
        "id": connection.id,
        "subAccountId": connection.sub_account_id,
        "name": connection.name,
        "url": connection.url,
        "username": connection.username,
        "calendar": connection.calendar,
        "writeBack": connection.write_back,
        "active": connection.active,
        "lastAttemptAt": _stamp(connection.last_attempt_at),
        "lastSuccessAt": _stamp(connection.last_success_at),
        "lastError": connection.last_error,
        "lastErrorAt": _stamp(connection.last_error_at),
        "busyCount": connection.busy_count,
        "consecutiveFailures": connection.consecutive_failures,
        "lastWriteAt": _stamp(connection.last_write_at),
        "lastWriteError": connection.last_write_error,
        "lastWriteErrorAt": _stamp(connection.last_write_error_at),
    }


def list_connections(sub_account_id: int | None = None) -> list[CalendarConnection]:
    stmt = select(CalendarConnection).order_by(CalendarConnection.id)
    if sub_account_id is not None:
        stmt = stmt.where(CalendarConnection.sub_account_id == sub_account_id)
    return list(db.session.scalars(stmt))


def get_connection(connection_id: int) -> CalendarConnection:
    connection = db.session.get(CalendarConnection, connection_id)
    if connection is None:
        raise ConnectionNotFound()
    return connection


def add_connection(sub_account_id: int, document: dict[str, Any]) -> CalendarConnection:
    """A connection from the provisioning document's fields (``name``, ``url``, ``username``,
    ``password``, ``calendar``, ``writeBack``); every problem named by field."""
    sub_account, doc = load_named(
        sub_account_id, CalendarConnectionDoc(), document, CalendarConnection
    )
    connection = create_connection(sub_account, doc)
    db.session.flush()
    return connection


def remove_connection(connection_id: int) -> None:
    """Delete the connection and the busy time it brought (its external blocked times)."""
    db.session.delete(get_connection(connection_id))
    db.session.flush()
