"""Where a planned write is run and committed: once, by the entry point.

A create, a reschedule, a hold or an attendee's move is planned by a service
(``app.services.bookings.planned``); the entry point (an API view, the dashboard, the
attendee's page) runs it here:

1. the plan's transaction ends (it only read; a plan that wrote is a bug, refused);
2. the connected calendars are asked (``live_check.ask``) with no transaction, no lock and no
   pooled connection held: the slowest part of a write costs the database nothing;
3. the apply runs in one transaction: the calendar's lock, what the calendars said stored as
   busy time, the claim, the writes, the domain events; then one commit.

A write refused in step 3 (the time was just taken, an event came up at the provider) is
rolled back whole, and what the calendars said is then stored in a transaction of its own, so
availability stops offering an event the write has just met, as a sync would have.

Services never import this module (an import contract): only entry points commit.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from app.extensions import db
from app.services.bookings.planned import PlannedWrite
from app.services.integrations.calendars.live_check import LiveAnswer, ask, record_answers

log = logging.getLogger(__name__)

Result = TypeVar("Result")


def perform(write: PlannedWrite[Result]) -> Result:
    """Ask what ``write`` asks, apply it and commit; on any failure roll it back (keeping
    what the calendars said) and raise."""
    seen: LiveAnswer | None = None
    if write.question is not None:
        if db.session.new or db.session.dirty or db.session.deleted:
            raise RuntimeError("a write's plan only reads: nothing may be pending before it asks")
        db.session.commit()  # ends the plan's reads and gives its connection back to the pool
        seen = ask(write.question)
    try:
        result = write.apply(seen)
        db.session.commit()
    except BaseException as error:
        db.session.rollback()
        if seen is not None and isinstance(error, Exception):  # not while the process stops
            _keep(seen)
        raise
    return result


def _keep(seen: LiveAnswer) -> None:
    """Store what the calendars said of a write that was refused (its own transaction); a
    failure here only loses what the next sync reads again."""
    try:
        record_answers(seen)
        db.session.commit()
    except Exception:
        db.session.rollback()
        log.exception(
            "what the live check of sub account %s saw was not kept", seen.question.sub_account_id
        )
