"""When a sub account's calendar can be booked: its open slots over a window, from the inputs
of the scheduling rules as ``app.services.scheduling_inputs`` reads them (the event type, the
working hours, busy time, the slot rules), asked of ``app.scheduling``.

Booking writes read the same inputs through the same module, so both apply one rule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from itertools import chain
from operator import attrgetter
from zoneinfo import ZoneInfo

from app.models import Booking, SubAccount
from app.scheduling.intervals import Interval, merge
from app.scheduling.offered import HeldTime, SlotSet
from app.scheduling.slots import open_slots, slots_by_day
from app.scheduling.timezones import InstantInput, zone
from app.scheduling.working_hours import working_ranges
from app.services.common.errors import InvalidRequest
from app.services.common.instants import resolve_instant
from app.services.scheduling_inputs import (
    MAX_WINDOW,
    booking_caps,
    get_event_type,
    load_busy,
    load_schedule,
    profile_for,
    seated,
    slot_rules,
)


@dataclass(frozen=True)
class AvailabilityQuery:
    start_date: InstantInput
    end_date: InstantInput
    event_type_id: int | None = None
    duration: int | None = None
    timezone: str | None = None
    # Rescheduling: the booking being moved does not make its own time busy.
    exclude_booking_id: int | None = None


@dataclass(frozen=True)
class AvailabilityDay:
    date: date
    slots: list[Interval]


def slots_to_move_to(
    sub_account: SubAccount,
    booking: Booking,
    first_day: date,
    days: int,
    timezone: str,
    now: datetime,
) -> list[AvailabilityDay]:
    """Where ``booking`` could move: the open slots of its event type and length over ``days``
    days from ``first_day`` (in ``timezone``), its own time counting as free. The dashboard's
    reschedule and the attendee's page both offer these."""
    return check_availability(
        sub_account,
        AvailabilityQuery(
            start_date=InstantInput(first_day),
            end_date=InstantInput(first_day + timedelta(days=days - 1)),
            event_type_id=booking.event_type_id,
            duration=int((booking.end_at - booking.start_at).total_seconds() // 60),
            timezone=timezone,
            exclude_booking_id=booking.id,
        ),
        now,
    )


def _wall_clock(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def check_availability(
    sub_account: SubAccount, query: AvailabilityQuery, now: datetime
) -> list[AvailabilityDay]:
    """Open slots per calendar date of the window, in the requested timezone."""
    slot_set = compute_slot_set(sub_account, query)
    offer = slot_set.offer(now.timestamp())
    return [
        AvailabilityDay(
            date.fromisoformat(day),
            [Interval(_instant(slot_set.starts[i]), _instant(slot_set.ends[i])) for i in indexes],
        )
        for day, indexes in slot_set.offered_days(offer)
    ]


def compute_slot_set(sub_account: SubAccount, query: AvailabilityQuery) -> SlotSet:
    """Every slot of the query's window that the calendar as it is now leaves open, whatever
    the instant, with what decides which of them an instant offers (``SlotSet.offer``):
    minimum notice, booking horizon and the stored holds. Raises as the API answers: an unknown
    event type, a window that does not parse, is reversed or is too long."""
    event_type = (
        get_event_type(sub_account, query.event_type_id, offered_only=True)
        if query.event_type_id
        else None
    )
    profile = profile_for(sub_account, event_type)
    tz_name = query.timezone or (profile.timezone if profile else sub_account.settings.timezone)
    tz = zone(tz_name)
    window = Interval(
        resolve_instant("start_date", query.start_date, tz),
        resolve_instant("end_date", query.end_date, tz, date_means="end"),
    )
    first_day = window.start.astimezone(tz).date()
    # A date-only end_date resolves to the next midnight; its own date is the last day.
    last_day = query.end_date.value if query.end_date.is_date else window.end.astimezone(tz).date()
    if window.end < window.start or last_day < first_day:
        raise InvalidRequest("end_date must not be before start_date")
    # Counted on the wall clock, so a window over a DST change is not an hour longer or shorter.
    if _wall_clock(window.end, tz) - _wall_clock(window.start, tz) > MAX_WINDOW:
        raise InvalidRequest("The availability window may span at most 93 days")

    # The rules without an instant: notice and horizon are applied at each question.
    epoch = datetime.fromtimestamp(0, UTC)
    rules = slot_rules(sub_account, event_type, epoch, query.duration)
    # slot_rules sets both.
    assert rules.earliest_start is not None and rules.latest_start is not None
    notice, horizon = rules.earliest_start - epoch, rules.latest_start - epoch
    unbounded = replace(rules, earliest_start=None, latest_start=None)
    schedule = load_schedule(profile, sub_account.settings.timezone, window)
    occupied_span = Interval(window.start - rules.buffer_before, window.end + rules.buffer_after)
    seats = seated(event_type)
    busy = load_busy(
        sub_account.id,
        occupied_span,
        exclude_booking_id=query.exclude_booking_id,
        seated=seats,
        # An event type's host's time; without one, every host's.
        hosts=[event_type.host_id] if event_type is not None else None,
    )
    not_held = merge(chain(busy.bookings, busy.blocked, busy.external))
    slots = open_slots(working_ranges(schedule, *window), not_held, unbounded, window)
    groups = busy.seated.booked_only() if busy.seated is not None else None
    if groups is not None:  # a seated type: its groups' own slots stay open while seats remain
        slots = groups.keep_open(slots, unbounded)
    caps = booking_caps(sub_account, event_type)
    if caps.caps and slots:  # a slot whose day, week or month is full is not offered
        tally = caps.tally(window, exclude_booking_id=query.exclude_booking_id)
        slots = tally.keep_open(slots, caps.caps)

    days: list[tuple[str, int, int]] = []
    index = 0
    for day, day_slots in slots_by_day(slots, tz, first_day, last_day):
        days.append((day.isoformat(), index, index + len(day_slots)))
        index += len(day_slots)
    return SlotSet(
        starts=[int(slot.start.timestamp()) for slot in slots],
        ends=[int(slot.end.timestamp()) for slot in slots],
        days=days,
        holds=sorted(
            (
                HeldTime(
                    int(held.start.timestamp()),
                    int(held.end.timestamp()),
                    expiry.timestamp(),
                    *((int(seat.start.timestamp()), int(seat.end.timestamp())) if seat else ()),
                )
                for held, expiry, seat in busy.hold_rows
            ),
            key=attrgetter("expires_at"),
        ),
        notice_seconds=int(notice.total_seconds()),
        horizon_seconds=int(horizon.total_seconds()),
        buffer_before_seconds=int(rules.buffer_before.total_seconds()),
        buffer_after_seconds=int(rules.buffer_after.total_seconds()),
        seats=seats[1] if seats else 1,
        booked_seats=[groups.booked_in(slot) for slot in slots] if groups is not None else [],
    )


def _instant(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
