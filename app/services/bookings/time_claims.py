"""Claiming time on a calendar for a write (a booking, a move, a hold): the time rule, and the
open slots to offer when the time asked for cannot be had.

A write plans its claim (``plan_claim``: the rules and the working hours of the whole local day
the time falls on, in the timezone the client asked in, and the question for the connected
calendars, ``TimeClaim.live_question``), is asked about (``app.services.bookings.planned``),
takes the calendar's write lock, stores what the calendars said, and claims
(``TimeClaim.claim``):
it loads the day's busy time, checks the time with the
availability engine's rule (``app.scheduling.slots``), and, when the time is refused for a
reason of time (taken, held, blocked, external, outside hours, notice, horizon), raises
``TimeUnavailable`` carrying the nearest open slots of the same event type and length: the same
day's from the data already loaded, then the following days' (and, if still short, the
preceding days') loaded in the same transaction. Busy time is only read under the lock, so
each suggestion is open when it is given; working hours are configuration, read before it so
the lock is held for fewer statements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, time, timedelta

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from app.counters import BOOKING_CONFLICTS
from app.extensions import db
from app.models import AvailabilityProfile, Booking, EventType, SlotHold, SubAccount
from app.scheduling.intervals import Interval
from app.scheduling.round_robin import AssignmentReason
from app.scheduling.seats import Seat, SeatProblem, first_free_seat, seat_group
from app.scheduling.slots import (
    MAX_BOOKING_LENGTH,
    SlotRules,
    TimeProblem,
    conflicting,
    open_slots,
    time_problem,
)
from app.scheduling.suggestions import SUGGESTION_COUNT, nearest_slots
from app.scheduling.timezones import InstantInput, local_to_utc, zone
from app.scheduling.working_hours import WeeklySchedule, working_intervals, working_ranges
from app.services.common.errors import ErrorCode, InvalidRequest, TimeUnavailable
from app.services.common.instants import resolve_instant
from app.services.integrations.calendars.live_check import LiveQuestion, plan_live_check
from app.services.scheduling_inputs import (
    MAX_WINDOW,
    BookingCaps,
    BusyTime,
    TeamMember,
    booking_caps,
    load_busy,
    load_schedule,
    profile_for,
    seat_numbers_taken,
    seated,
    slot_rules,
)

CONFLICT_BOOKING = "Time slot conflicts with an existing booking"
CONFLICT_HELD = "Time slot is held for another booking"
CONFLICT_BLOCKED = "Time slot conflicts with blocked time"
CONFLICT_EXTERNAL = "Time slot conflicts with an event in a connected calendar"
# A seated slot with no seat left: the code, and the metric's cause.
SEATS_FULL = (ErrorCode.SEATS_FULL, "seats_full")


def seats_full(seats: int) -> str:
    return f"All {seats} seats of this slot are taken"


# Codes of the time rule's refusals; the others (the interval itself is wrong) get no
# suggestions.
PROBLEM_CODES = {
    TimeProblem.TOO_SOON: ErrorCode.MINIMUM_NOTICE,
    TimeProblem.TOO_FAR: ErrorCode.BEYOND_HORIZON,
    TimeProblem.OUTSIDE_HOURS: ErrorCode.OUTSIDE_HOURS,
}

# How far suggestions are looked for: the following days in two steps (a week, then up to
# the horizon but at most the availability window's 93 days), then a week back.
SEARCH_AHEAD = (timedelta(days=7), MAX_WINDOW)
SEARCH_BACK = timedelta(days=7)


class BookingConflict(TimeUnavailable):
    """The time is taken: by a booking, a hold, blocked time or an external event
    (``cause``, the metric's label)."""

    def __init__(
        self, message: str, code: ErrorCode, cause: str, suggested_slots: list[Interval]
    ) -> None:
        super().__init__(message, code, suggested_slots)
        self.cause = cause
        BOOKING_CONFLICTS.labels(cause).inc()


@dataclass(frozen=True)
class _Calendar:
    """What one claim reads, so the check and the suggestions use the same inputs."""

    sub_account: SubAccount
    profile: AvailabilityProfile | None
    rules: SlotRules
    now: datetime
    exclude_booking_id: int | None
    exclude_hold_id: int | None
    caps: BookingCaps
    seated: tuple[int, int] | None
    host_id: int

    def schedule(self, span: Interval) -> WeeklySchedule:
        return load_schedule(self.profile, self.sub_account.settings.timezone, span)

    def busy(self, span: Interval) -> BusyTime:
        return load_busy(
            self.sub_account.id,
            Interval(span.start - self.rules.buffer_before, span.end + self.rules.buffer_after),
            now=self.now,
            exclude_booking_id=self.exclude_booking_id,
            exclude_hold_id=self.exclude_hold_id,
            seated=self.seated,
            hosts=[self.host_id],  # the event type's host's time: another host's is theirs
        )

    def open_in(self, window: Interval, schedule: WeeklySchedule, busy: BusyTime) -> list[Interval]:
        slots = open_slots(working_ranges(schedule, *window), busy.all(), self.rules, window)
        if busy.seated is not None:  # a seated type: its groups' slots with seats left
            slots = busy.seated.keep_open(slots, self.rules)
        if self.caps.caps and slots:  # none whose day, week or month is full
            tally = self.caps.tally(window, self.exclude_booking_id)
            slots = tally.keep_open(slots, self.caps.caps)
        return slots

    def load_open_in(self, window: Interval) -> list[Interval]:
        return self.open_in(window, self.schedule(window), self.busy(window))


def local_day(instant: datetime, tz_name: str) -> Interval:
    """The calendar date ``instant`` falls on in ``tz_name``, from midnight to midnight."""
    tz = zone(tz_name)
    day = instant.astimezone(tz).date()
    return Interval(
        local_to_utc(day, time(0), tz), local_to_utc(day + timedelta(days=1), time(0), tz)
    )


def requested_slot(start: InstantInput, end: InstantInput, timezone: str) -> Interval:
    """The interval a write asks for; naive times are read in ``timezone``."""
    tz = zone(timezone)
    return Interval(resolve_instant("start_time", start, tz), resolve_instant("end_time", end, tz))


@dataclass(frozen=True)
class ClaimedTime:
    """What a claim gives the write: the occupied interval it stores, and, for a seated event
    type, the seat it takes."""

    occupied: Interval
    seat: Seat | None = None
    # The host whose time it is, and why (round robin's choice, a named host, the only one).
    host_id: int = 0
    # None: the host it already had keeps it (a reschedule's, a hold's), and its reason.
    reason: AssignmentReason | None = AssignmentReason.SINGLE
    # A collective write's other hosts, whose time it takes too.
    co_hosts: tuple[int, ...] = ()


@dataclass(frozen=True)
class TimeClaim:
    """A write's time with what the calendar's lock does not guard already loaded: the rules,
    the profile and the working hours of the day. ``claim`` does the rest under the lock."""

    sub_account: SubAccount
    profile: AvailabilityProfile | None
    rules: SlotRules
    slot: Interval
    day: Interval
    schedule: WeeklySchedule
    now: datetime
    caps: BookingCaps
    seated: tuple[int, int] | None
    host_id: int  # the event type's host: whose time the write claims

    def live_question(self) -> LiveQuestion | None:
        """What the write asks the connected calendars about its time (buffers included), so
        an event added there since the last sync is stored busy time when ``claim`` looks
        (``integrations.calendars.live_check``); None when nothing is asked (a time the rule
        refuses anyway is not asked about). Reads, in the plan's transaction."""
        if time_problem(self.slot, working_intervals(self.schedule, *self.slot), self.rules):
            return None
        return plan_live_check(
            self.sub_account.id, self.rules.occupied_interval(self.slot), [self.host_id]
        )

    def time_refused(self) -> bool:
        """Whether the rule refuses the time whatever the calendar holds (outside the host's
        hours, too soon, too far): nothing to ask a calendar about."""
        return (
            time_problem(self.slot, working_intervals(self.schedule, *self.slot), self.rules)
            is not None
        )

    def _calendar(self, exclude_booking_id: int | None, consumed_hold_id: int | None) -> _Calendar:
        return _Calendar(
            self.sub_account,
            self.profile,
            # Suggestions are as long as the time asked for, on the event type's grid.
            replace(self.rules, duration=self.slot.end - self.slot.start),
            self.now,
            exclude_booking_id,
            consumed_hold_id,
            self.caps,
            self.seated,
            self.host_id,
        )

    def open_in(self, window: Interval, *, exclude_booking_id: int | None = None) -> list[Interval]:
        """This host's open slots in ``window`` of the claim's length, as a refusal offers them."""
        return self._calendar(exclude_booking_id, None).load_open_in(window)

    def suggestions(
        self, *, exclude_booking_id: int | None = None, consumed_hold_id: int | None = None
    ) -> list[Interval]:
        """The nearest open slots of this host (as a refusal carries them)."""
        calendar = self._calendar(exclude_booking_id, consumed_hold_id)
        day = self.day
        busy = calendar.busy(Interval(min(day.start, self.slot.start), max(day.end, self.slot.end)))
        return _suggestions(calendar, self.slot, day, calendar.open_in(day, self.schedule, busy))

    def claim(
        self,
        *,
        exclude_booking_id: int | None = None,
        consumed_hold_id: int | None = None,
        suggest: bool = True,
    ) -> ClaimedTime:
        """Check the time against busy time and clear the expired holds under it; returns its
        occupied interval and, for a seated event type, the seat it takes (the lowest free).
        Call with the calendar's write lock held. ``exclude_booking_id``
        (the booking being moved) and ``consumed_hold_id`` (the hold the write brings the token
        of) do not count as busy; the consumed hold is deleted once the time is claimed, before
        the write inserts (PostgreSQL's hold trigger would refuse it otherwise). ``suggest``
        False: a refusal carries no suggestions (round robin asks each host, then suggests
        for all of them at once)."""
        slot, rules, day = self.slot, self.rules, self.day
        calendar = self._calendar(exclude_booking_id, consumed_hold_id)
        busy = calendar.busy(Interval(min(day.start, slot.start), max(day.end, slot.end)))

        def refuse(error_type: Callable[..., TimeUnavailable], *args: object) -> TimeUnavailable:
            if not suggest:
                return error_type(*args, [])
            same_day = calendar.open_in(day, self.schedule, busy)
            return error_type(*args, _suggestions(calendar, slot, day, same_day))

        problem = time_problem(slot, working_intervals(self.schedule, *slot), rules)
        if problem is not None:
            if problem not in PROBLEM_CODES:
                raise InvalidRequest(problem.value, code=ErrorCode.INVALID_TIME_RANGE)
            raise refuse(TimeUnavailable, problem.value, PROBLEM_CODES[problem])
        for taken_by, message, code, cause in (
            (busy.bookings, CONFLICT_BOOKING, ErrorCode.SLOT_TAKEN, "booking"),
            (busy.held, CONFLICT_HELD, ErrorCode.SLOT_HELD, "hold"),
            (busy.blocked, CONFLICT_BLOCKED, ErrorCode.BLOCKED_TIME, "blocked_time"),
            (busy.external, CONFLICT_EXTERNAL, ErrorCode.EXTERNAL_BUSY, "external_event"),
        ):
            if conflicting(slot, taken_by, rules) is not None:
                raise refuse(BookingConflict, message, code, cause)
        if busy.seated is not None:
            seat_problem = busy.seated.problem(slot, rules)
            if seat_problem is SeatProblem.OVERLAPS:  # another slot's seats
                raise refuse(BookingConflict, CONFLICT_BOOKING, ErrorCode.SLOT_TAKEN, "booking")
            if seat_problem is SeatProblem.FULL:
                raise refuse(BookingConflict, seats_full(busy.seated.seats), *SEATS_FULL)
        if self.caps.caps:
            cap = self.caps.tally(slot, exclude_booking_id).broken_by(slot, self.caps.caps)
            if cap is not None:
                raise refuse(TimeUnavailable, cap.describe(), ErrorCode.LIMIT_REACHED)
        occupied = rules.occupied_interval(slot)
        if busy.expired_holds:
            _clear_expired_holds(self.sub_account.id, occupied, self.now)
        if consumed_hold_id is not None:
            db.session.execute(delete(SlotHold).where(SlotHold.id == consumed_hold_id))
        seat = None
        if self.seated is not None:
            event_type_id, seats = self.seated
            group = seat_group(event_type_id, slot)
            taken = seat_numbers_taken(group, exclude_booking_id=exclude_booking_id, now=self.now)
            seat = first_free_seat(group, seats, taken)
            if seat is None:  # counted above as free: a row the count missed
                raise refuse(BookingConflict, seats_full(seats), *SEATS_FULL)
        return ClaimedTime(occupied, seat, self.host_id)


def take_seat(row: Booking | SlotHold, seat: Seat | None) -> None:
    """Give a booking or hold the seat its claim found (or none: unseated)."""
    row.seat_group = seat.group if seat else None
    row.seat_number = seat.number if seat else None
    row.seat_count = seat.count if seat else None


def plan_claim(
    sub_account: SubAccount,
    event_type: EventType,
    slot: Interval,
    *,
    timezone: str,
    now: datetime,
    member: TeamMember | None = None,
) -> TimeClaim:
    """Everything of a claim that may be read before the calendar's lock (no busy time).

    ``timezone`` is the one the client asked in: its day is "the same day" of the
    suggestions. ``member``: the host of a round-robin or collective type whose time is
    claimed, with its working hours (default: a one-host type's host). An interval that is
    wrong in itself is refused here.
    """
    if slot.end <= slot.start:
        raise InvalidRequest(TimeProblem.NOT_AFTER_START, code=ErrorCode.INVALID_TIME_RANGE)
    if slot.end - slot.start > MAX_BOOKING_LENGTH:
        raise InvalidRequest(TimeProblem.TOO_LONG, code=ErrorCode.INVALID_TIME_RANGE)
    profile = member.profile if member is not None else profile_for(sub_account, event_type)
    day = local_day(slot.start, timezone)
    span = Interval(min(day.start, slot.start), max(day.end, slot.end))
    return TimeClaim(
        sub_account,
        profile,
        slot_rules(sub_account, event_type, now),
        slot,
        day,
        load_schedule(profile, sub_account.settings.timezone, span),
        now,
        booking_caps(sub_account, event_type),
        seated(event_type),
        member.host_id if member is not None else event_type.host_id,
    )


def _suggestions(
    calendar: _Calendar, slot: Interval, day: Interval, same_day: list[Interval]
) -> list[Interval]:
    """The nearest open slots: the wanted day's, then (while fewer than five) the following
    days' up to the horizon, then the preceding days'."""
    found = list(same_day)
    rules = calendar.rules
    horizon_end = rules.latest_start + rules.duration if rules.latest_start else day.end
    searched_to = day.end
    for reach in SEARCH_AHEAD:
        if len(nearest_slots(found, slot.start, day)) >= SUGGESTION_COUNT:
            break
        until = min(day.end + reach, horizon_end)
        if until > searched_to:
            found += calendar.load_open_in(Interval(searched_to, until))
            searched_to = until
    if len(nearest_slots(found, slot.start, day)) < SUGGESTION_COUNT:
        back_end = min(day.start, horizon_end)
        back_start = back_end - SEARCH_BACK
        if rules.earliest_start is not None:
            back_start = max(back_start, rules.earliest_start)
        if back_start < back_end:
            found += calendar.load_open_in(Interval(back_start, back_end))
    return nearest_slots(found, slot.start, day)


def _clear_expired_holds(sub_account_id: int, occupied: Interval, now: datetime) -> None:
    """Delete the expired holds under ``occupied``: they no longer count, and the database's
    hold/booking checks (migration 0010) compare rows, not clocks."""
    db.session.execute(
        delete(SlotHold).where(
            SlotHold.sub_account_id == sub_account_id,
            SlotHold.expires_at <= now,
            SlotHold.occupied_start < occupied.end,
            SlotHold.occupied_end > occupied.start,
        )
    )


# The database's own refusals (migrations 0002 and 0010) and what they mean.
_CONSTRAINT_CONFLICTS = {
    "ex_bookings_no_overlap": (CONFLICT_BOOKING, ErrorCode.SLOT_TAKEN, "booking"),
    "ex_slot_holds_no_booking_overlap": (CONFLICT_BOOKING, ErrorCode.SLOT_TAKEN, "booking"),
    "ex_bookings_no_hold_overlap": (CONFLICT_HELD, ErrorCode.SLOT_HELD, "hold"),
    "ex_slot_holds_no_overlap": (CONFLICT_HELD, ErrorCode.SLOT_HELD, "hold"),
}
# The unique indexes that give each seat of a group one row (migration 0023).
_SEAT_INDEXES = ("uq_bookings_seat", "uq_slot_holds_seat")


def flush_claimed() -> None:
    """Flush a write that claimed time. PostgreSQL's last lines of defence against an overlap
    the lock somehow missed (the bookings' exclusion constraint, the holds' constraint and
    triggers) become the same 400 as a detected conflict."""
    try:
        db.session.flush()
    except IntegrityError as err:
        if (conflict := refused_by_database(err)) is not None:
            raise conflict from None
        raise


def refused_by_database(err: IntegrityError) -> BookingConflict | None:
    """The conflict a database refusal stands for (the last line of defence behind the lock,
    so it comes without suggestions): an exclusion violation, or a seat taken twice (a unique
    index); None for any other error."""
    if _seat_taken_twice(err):
        return BookingConflict("This seat was taken meanwhile", *SEATS_FULL, [])
    if getattr(err.orig, "sqlstate", None) != "23P01":  # exclusion_violation
        return None
    constraint = getattr(getattr(err.orig, "diag", None), "constraint_name", None)
    message, code, cause = _CONSTRAINT_CONFLICTS.get(
        constraint or "", _CONSTRAINT_CONFLICTS["ex_bookings_no_overlap"]
    )
    return BookingConflict(message, code, cause, [])


def _seat_taken_twice(err: IntegrityError) -> bool:
    if getattr(err.orig, "sqlstate", None) != "23505":  # unique_violation
        return False
    constraint = getattr(getattr(err.orig, "diag", None), "constraint_name", None)
    return constraint in _SEAT_INDEXES
