"""The version of a sub account's calendar: what availability is computed from.

Every change that can move availability gives the sub account's calendar a new version in the
same transaction: a booking created, moved, cancelled or given another status; a hold taken,
used or removed; blocked time and connected calendars' busy time; calendar settings,
availability profiles, their weekly hours and date overrides; event types. The database does it
(triggers of migration 0016), so no write path can forget it: the API, the dashboard, the
worker, the command line and provisioning all write through the same tables.
``tests/services/test_calendar_versions.py`` holds every such write to it.

A version is a random 63-bit number, not a counter: an answer kept under a version (in Redis,
which outlives a database restored from a backup or emptied by a test) can never be mistaken for
the answer of a later calendar that counted up to the same number. A sub account whose calendar
never changed has no row; its version reads as 0.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model


class CalendarVersion(Model):
    __tablename__ = "calendar_versions"

    # No foreign key: the triggers write here while a sub account's rows are being deleted in
    # cascade, and a leftover row of a deleted sub account is harmless.
    sub_account_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(BigInteger)
