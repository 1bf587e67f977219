"""Slot holds: an agent holds a slot for a minute or two while it collects a name and an
email, then books it with the hold's token.

A hold is claimed like a booking (``time_claims.plan_claim``, then ``TimeClaim.claim`` under
the calendar's write lock), so it is refused, with suggestions, wherever a booking would be.
Until it expires its occupied interval is busy for every other write and hidden from
availability (``scheduling_inputs.load_busy``); a create or move that sends its hold token
does not count it and consumes it. Expiry needs no job: reads compare ``expires_at`` with now.
The periodic purge (``purge_expired_holds``) only keeps the table small.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, delete, select, update

from app.api_terms import DEFAULT_TTL_SECONDS
from app.api_terms import MAX_TTL_SECONDS as MAX_TTL_SECONDS  # for app.api.holds.schemas
from app.extensions import db
from app.models import Attendee, EventType, SlotHold, SubAccount
from app.scheduling.round_robin import AssignmentReason
from app.scheduling.timezones import InstantInput
from app.services.bookings.assignment import HostClaim, plan_host_claim
from app.services.bookings.planned import PlannedWrite, begin_apply
from app.services.bookings.time_claims import (
    flush_claimed,
    requested_slot,
    take_seat,
)
from app.services.common.errors import HoldNotFound
from app.services.common.locking import lock_calendar
from app.services.common.tokens import token_digest
from app.services.integrations.calendars.live_check import LiveAnswer
from app.services.scheduling_inputs import get_event_type

TOKEN_PREFIX = "hold_"


@dataclass(frozen=True)
class NewHold:
    start_time: InstantInput
    end_time: InstantInput
    timezone: str | None = None
    ttl_seconds: int = DEFAULT_TTL_SECONDS
    # Round robin: hold this host's time (``hostId``), not the one the rule would choose.
    host_id: int | None = None


@dataclass(frozen=True)
class PlacedHold:
    """A new hold and its token: the token is shown once, only its digest is stored."""

    hold: SlotHold
    token: str


@dataclass(frozen=True)
class ReleasedHold:
    id: int
    released_at: datetime


def _expiry(now: datetime, ttl_seconds: int) -> datetime:
    """``now`` + the TTL, rounded up to a whole second: the expiry the API shows (second
    precision) is the one that applies."""
    expires = now + timedelta(seconds=ttl_seconds)
    if expires.microsecond:
        expires = expires.replace(microsecond=0) + timedelta(seconds=1)
    return expires


def place_hold(
    sub_account: SubAccount,
    event_type_id: int,
    new: NewHold,
    *,
    now: datetime,
    api_key_id: int | None = None,
    attendee_id: int | None = None,
) -> PlannedWrite[PlacedHold]:
    """Plan holding ``new``'s time on the event type for ``new.ttl_seconds``
    (``app.services.bookings.planned``). As a create does, it reads the event type, its
    working hours and the question for the connected calendars before the calendar's lock.

    ``attendee_id``: the hold is that attendee's choice from their manage link, and replaces
    the choice they held before (released under the lock, before the new time is claimed, so
    the new time may overlap it). One link thus holds at most one time, however often it
    chooses; a choice refused keeps the earlier one."""
    event_type = get_event_type(sub_account, event_type_id, offered_only=True)
    timezone = new.timezone or sub_account.settings.timezone
    slot = requested_slot(new.start_time, new.end_time, timezone)
    plan = plan_host_claim(
        sub_account, event_type, slot, timezone=timezone, now=now, host_id=new.host_id
    )

    def apply(seen: LiveAnswer | None) -> PlacedHold:
        begin_apply(sub_account.id, seen)
        if attendee_id is not None:
            release_attendee_choice(attendee_id)
        return _insert_hold(
            sub_account, event_type, plan, new, timezone, now, api_key_id, attendee_id
        )

    return PlannedWrite(plan.live_question(), apply)


def _insert_hold(
    sub_account: SubAccount,
    event_type: EventType,
    plan: HostClaim,
    new: NewHold,
    timezone: str,
    now: datetime,
    api_key_id: int | None,
    attendee_id: int | None,
) -> PlacedHold:
    """Claim the planned time and insert the hold (the calendar's lock held)."""
    slot = plan.slot
    claimed = plan.claim()
    occupied = claimed.occupied
    token = TOKEN_PREFIX + secrets.token_urlsafe(24)
    hold = SlotHold(
        sub_account_id=sub_account.id,
        host_id=claimed.host_id,
        assignment_reason=claimed.reason or AssignmentReason.SINGLE,
        event_type_id=event_type.id,
        start_at=slot.start,
        end_at=slot.end,
        occupied_start=occupied.start,
        occupied_end=occupied.end,
        expires_at=_expiry(now, new.ttl_seconds),
        token_digest=token_digest(token),
        timezone=timezone,
        api_key_id=api_key_id,
        created_at=now,
    )
    take_seat(hold, claimed.seat)
    db.session.add(hold)
    flush_claimed()
    if attendee_id is not None:
        db.session.execute(
            update(Attendee).where(Attendee.id == attendee_id).values(choice_hold_id=hold.id)
        )
    return PlacedHold(hold, token)


def release_hold(
    sub_account: SubAccount, event_type_id: int, hold_id: int, *, now: datetime
) -> ReleasedHold:
    """Free a live hold's time now. An expired, consumed or released hold is a 404: there is
    nothing left to release."""
    lock_calendar(sub_account.id)
    released = db.session.execute(
        delete(SlotHold)
        .where(
            SlotHold.id == hold_id,
            SlotHold.sub_account_id == sub_account.id,
            SlotHold.event_type_id == event_type_id,
            SlotHold.expires_at > now,
        )
        .returning(SlotHold.id)
    ).scalar()
    if released is None:
        raise HoldNotFound()
    return ReleasedHold(released, now)


def release_attendee_choice(attendee_id: int) -> None:
    """Free the time an attendee's manage link holds while they choose, if any. Needs no lock:
    freeing time can clash with nothing."""
    chosen = select(Attendee.choice_hold_id).where(Attendee.id == attendee_id).scalar_subquery()
    db.session.execute(delete(SlotHold).where(SlotHold.id == chosen))


@dataclass(frozen=True)
class HoldToConsume:
    """The live hold a write brings the token of: its id, and the host it holds (with the
    reason it has that host), whom the write's time goes to."""

    id: int
    host_id: int
    reason: AssignmentReason


def find_hold_to_consume(
    sub_account: SubAccount, event_type: EventType, token: str | None, now: datetime
) -> HoldToConsume | None:
    """The live hold of this event type that ``token`` names, if any. A token that names
    nothing live (expired, consumed, another event type's, mistyped) holds nothing: the
    write then meets the time rule like any other, so an expired hold's still-free time can
    be booked without a new hold."""
    if not token:
        return None
    row = db.session.execute(
        select(SlotHold.id, SlotHold.host_id, SlotHold.assignment_reason).where(
            SlotHold.token_digest == token_digest(token),
            SlotHold.sub_account_id == sub_account.id,
            SlotHold.event_type_id == event_type.id,
            SlotHold.expires_at > now,
        )
    ).one_or_none()
    return HoldToConsume(*row) if row is not None else None


def purge_expired_holds(now: datetime) -> int:
    """Delete every hold expired before ``now``; returns how many. Tidiness only: expired
    holds count for nothing whether or not they are deleted."""
    deleted = cast(
        CursorResult[Any],  # a DELETE's result, typed as a plain Result
        db.session.execute(delete(SlotHold).where(SlotHold.expires_at <= now)),
    )
    return deleted.rowcount
