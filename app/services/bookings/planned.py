"""A write in three steps: plan, ask, apply.

A create, a reschedule and a hold must ask the connected calendars about their time (the live
check), and must not hold a transaction, a lock or a database connection while another
company's server thinks about it. So each is planned first: the plan reads what the write
needs (the event type, the working hours, the question to ask) in a transaction that ends
when the plan does; then the calendars are asked with nothing held; then the apply takes the
calendar's lock, stores what they answered, claims the time and writes, in the one transaction
the entry point commits (``app.unit_of_work.perform``). Services only plan and apply: none of
them commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.services.common.locking import lock_calendar
from app.services.integrations.calendars.live_check import LiveAnswer, LiveQuestion, record_answers

# Covariant: a planned hold is a planned "hold or nothing" (``attendee_changes.hold_choice``).
Result = TypeVar("Result", covariant=True)
Then = TypeVar("Then")


@dataclass(frozen=True)
class PlannedWrite(Generic[Result]):
    """A planned write: what to ask the connected calendars (``question``; None when nothing
    is asked: the check is off, no calendar answers live, the time is refused anyway or the
    request is a replay), and ``apply``, which does the rest under the calendar's lock given
    what they answered (None when nothing was asked)."""

    question: LiveQuestion | None
    apply: Callable[[LiveAnswer | None], Result]

    def then(self, after: Callable[[Result], Then]) -> PlannedWrite[Then]:
        """The same write, followed in its transaction by ``after`` on its result."""
        apply = self.apply
        return PlannedWrite(self.question, lambda seen: after(apply(seen)))


def begin_apply(sub_account_id: int, seen: LiveAnswer | None) -> None:
    """The first step of every apply: take the calendar's write lock, then store what the
    connected calendars said (when they were asked), so the claim that follows meets it."""
    lock_calendar(sub_account_id)
    if seen is not None:
        record_answers(seen)
