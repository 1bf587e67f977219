"""Serializing writes to one calendar.

Check-then-insert is only safe when no other writer of the same calendar runs in between.
PostgreSQL: a transaction-scoped advisory lock per sub account (other calendars proceed in
parallel; the lock is released by commit or rollback). SQLite: the database has a single
writer anyway; a write as the transaction's first statement takes that write lock up front, so
concurrent writers wait (``busy_timeout``) instead of failing on a lock upgrade.
"""

from __future__ import annotations

from sqlalchemy import text

from app.extensions import db

# First key of the two-key advisory lock: the lock namespace of calendar writes.
CALENDAR_WRITE_LOCK = 0x0CA1


def lock_calendar(sub_account_id: int) -> None:
    """Hold the calendar of ``sub_account_id`` for writing until the transaction ends."""
    if db.session.get_bind().dialect.name == "postgresql":
        db.session.execute(
            text("SELECT pg_advisory_xact_lock(:space, :id)"),
            {"space": CALENDAR_WRITE_LOCK, "id": sub_account_id},
        )
    else:
        db.session.execute(
            text(
                "UPDATE calendar_settings SET sub_account_id = sub_account_id"
                " WHERE sub_account_id = :id"
            ),
            {"id": sub_account_id},
        )
