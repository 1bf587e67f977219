"""Work that waits for the caller's commit.

A write tells the worker about what it did (an outbox event to deliver, a connection to sync)
only once what it did exists: when the transaction commits. Queued on the session here, run
after its commit in the order queued, dropped with a rollback (a savepoint's rollback keeps the
outer transaction's queue). Each piece runs on its own: one that fails is logged and neither
the request nor the next piece is affected; what it should have started is found by the
worker's sweeps.

The one home of this rule: the outbox's events (``integrations.events.emit``) and the sync
marks (``integrations.calendars.freshness``) both queue through it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction, scoped_session

log = logging.getLogger(__name__)

_QUEUED = "after_commit"


def after_commit(
    session: Session | scoped_session[Any], work: Callable[[], None], what: str
) -> None:
    """Run ``work`` once ``session``'s transaction commits (never if it rolls back); ``what``
    names it in the log if it fails."""
    queued: list[tuple[Callable[[], None], str]] = session.info.setdefault(_QUEUED, [])
    queued.append((work, what))


@event.listens_for(Session, "after_commit")
def _run(session: Session) -> None:
    for work, what in session.info.pop(_QUEUED, []):
        try:
            work()
        except Exception:
            log.exception("%s failed after the commit", what)


@event.listens_for(Session, "after_soft_rollback")
def _drop(session: Session, previous_transaction: SessionTransaction) -> None:
    if not previous_transaction.nested:
        session.info.pop(_QUEUED, None)
