"""Serializing writes to one calendar.

Check-then-insert is only safe when no other writer of the same calendar runs in between: a
transaction-scoped advisory lock per sub account serializes them (other calendars proceed in
parallel; the lock is released by commit or rollback).
"""

from __future__ import annotations

from sqlalchemy import text

from app.extensions import db

# First key of the two-key advisory lock: the lock namespace of calendar writes.
CALENDAR_WRITE_LOCK = 0x0CA1


def lock_calendar(sub_account_id: int) -> None:
    """Hold the calendar of ``sub_account_id`` for writing until the transaction ends."""
    db.session.execute(
        text("SELECT pg_advisory_xact_lock(:space, :id)"),
        {"space": CALENDAR_WRITE_LOCK, "id": sub_account_id},
    )
