"""When a sub account's calendar can be booked: loading the inputs of the scheduling rules
(working hours, busy time, the event type's rules) and asking ``app.scheduling`` for slots.

Booking writes load their inputs through the same loaders (``profile_for``, ``load_schedule``,
``load_busy``, ``slot_rules``), so both apply one rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from functools import partial
from itertools import chain
from operator import attrgetter
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Integer,
    SQLColumnExpression,
    and_,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    null,
    select,
    type_coerce,
    union_all,
)
from sqlalchemy.orm import joinedload
from sqlalchemy.sql.elements import ColumnClause

from app.extensions import db
from app.models import (
    ACTIVE_STATUSES,
    AvailabilityProfile,
    BlockedTime,
    BlockedTimeSource,
    Booking,
    DateOverride,
    EventType,
    SlotHold,
    SubAccount,
)
from app.models.types import UTCDateTime, utcnow
from app.scheduling.intervals import Interval, merge
from app.scheduling.offered import HeldTime, SlotSet
from app.scheduling.slots import SlotRules, open_slots, slots_by_day
from app.scheduling.timezones import InstantInput, zone
from app.scheduling.working_hours import WeeklySchedule, working_ranges
from app.services.common.errors import EventTypeNotFound, InvalidRequest
from app.services.common.instants import resolve_instant

MAX_WINDOW = timedelta(days=93)


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


@dataclass(frozen=True)
class BusyTime:
    """Merged busy intervals of one sub account, by kind (so a conflict can say which)."""

    bookings: list[Interval]
    blocked: list[Interval]
    external: list[Interval]
    held: list[Interval] = field(default_factory=list)
    # Expired holds whose rows are still stored in the span: a write over them deletes them.
    expired_holds: bool = False
    # Every hold stored in the span, live or expired, with its expiry (availability kept for a
    # calendar version applies them at each question: ``app.scheduling.offered``).
    hold_rows: list[tuple[Interval, datetime]] = field(default_factory=list)

    def all(self) -> list[Interval]:
        return merge(chain(self.bookings, self.blocked, self.external, self.held))


def find_event_type(
    sub_account: SubAccount, event_type_id: int, *, offered_only: bool = True
) -> EventType:
    """The sub account's event type ``event_type_id``. A deactivated event type is no longer
    offered (availability and new bookings answer 404), but the bookings made with it live
    on: their updates pass ``offered_only=False``."""
    event_type = load_event_type(sub_account, event_type_id)
    if event_type is None or (offered_only and not event_type.active):
        raise EventTypeNotFound()
    return event_type


def load_event_type(sub_account: SubAccount, event_type_id: int) -> EventType | None:
    """The sub account's event type ``event_type_id``, active or not, with its availability
    profile and the profile's weekly hours, in one statement."""
    return (
        db.session.execute(
            select(EventType)
            .where(EventType.id == event_type_id, EventType.sub_account_id == sub_account.id)
            .options(
                joinedload(EventType.availability_profile).joinedload(
                    AvailabilityProfile.weekly_hours
                )
            )
        )
        .unique()
        .scalar_one_or_none()
    )


def profile_for(
    sub_account: SubAccount, event_type: EventType | None
) -> AvailabilityProfile | None:
    """The event type's profile, else the sub account's default (else its first) profile."""
    if event_type is not None and event_type.availability_profile is not None:
        return event_type.availability_profile
    return db.session.scalars(
        select(AvailabilityProfile)
        .where(AvailabilityProfile.sub_account_id == sub_account.id)
        .order_by(AvailabilityProfile.is_default.desc(), AvailabilityProfile.id)
        .limit(1)
    ).first()


def load_schedule(
    profile: AvailabilityProfile | None, fallback_timezone: str, span: Interval
) -> WeeklySchedule:
    """The profile's weekly hours and the overrides of the dates ``span`` touches."""
    if profile is None:
        return WeeklySchedule(timezone=fallback_timezone)
    tz = zone(profile.timezone)
    first = span.start.astimezone(tz).date() - timedelta(days=1)
    last = span.end.astimezone(tz).date() + timedelta(days=1)
    weekly: dict[int, list[tuple[int, int]]] = {}
    for hours in profile.weekly_hours:
        weekly.setdefault(hours.weekday, []).append((hours.start_minute, hours.end_minute))
    overrides: dict[date, list[tuple[int, int]]] = {}
    rows = db.session.execute(
        select(DateOverride.date, DateOverride.start_minute, DateOverride.end_minute).where(
            DateOverride.profile_id == profile.id, DateOverride.date.between(first, last)
        )
    )
    for day, start_minute, end_minute in rows:
        ranges = overrides.setdefault(day, [])
        if start_minute is not None:
            assert end_minute is not None  # a CHECK constraint: both minutes or neither
            ranges.append((start_minute, end_minute))
    return WeeklySchedule(timezone=profile.timezone, weekly=weekly, overrides=overrides)


# What a busy row is, in ``load_busy``'s one statement.
_HOLD, _BOOKING, _BLOCKED, _EXTERNAL = 0, 1, 2, 3


def load_busy(
    sub_account_id: int,
    span: Interval,
    *,
    now: datetime | None = None,
    exclude_booking_id: int | None = None,
    exclude_hold_id: int | None = None,
) -> BusyTime:
    """Busy time overlapping ``span``: bookings, blocked time and holds, read in one statement
    (a ``UNION ALL`` of one range query per table: one round trip, and, in a write, one less
    thing done while the calendar's lock is held). A hold counts until its expiry (``now``,
    default the current time, decides), whether or not its row is gone yet.

    On PostgreSQL all are range overlaps (``&&``) on GiST indexes, which find the intervals
    near the window whatever the length of the calendar's history: for bookings the index of
    the partial exclusion constraint ``ex_bookings_no_overlap`` (0002; so the status predicate
    repeats the constraint's, as literals, which the planner can match even in the generic plan
    of a prepared statement), for blocked times ``ix_blocked_times_sub_account_range`` (0003),
    for holds the index of ``ex_slot_holds_no_overlap`` (0010). SQLite has B-trees only; theirs
    are led by the interval's end (0003), so the index bounds ``end > span.start`` and reads
    only what ends after the window starts (the near past and the future, which the booking
    horizon keeps short), never the whole history.
    """
    now = now or utcnow()
    if db.session.get_bind().dialect.name == "postgresql":
        active = Booking.status.in_(
            bindparam(
                "active_statuses",
                [str(s) for s in ACTIVE_STATUSES],
                expanding=True,
                literal_execute=True,
            )
        )
        overlaps = _range_overlaps
        # Our sessions speak UTC, so psycopg already hands back instants tagged with Python's
        # UTC: read as plain timestamps, the ~3,000 values skip UTCDateTime's processor.
        instant: Callable[[Any], Any] = partial(type_coerce, type_=DateTime(timezone=True))
    else:
        active = Booking.status.in_(ACTIVE_STATUSES)
        overlaps = _bounds_overlap
        instant = _as_is
    # Holds first: the statement's column types are the first query's, and only holds have
    # an expiry (the others' NULL takes its type).
    holds = select(
        _kind(_HOLD),
        instant(SlotHold.occupied_start),
        instant(SlotHold.occupied_end),
        instant(SlotHold.expires_at),
    ).where(
        SlotHold.sub_account_id == sub_account_id,
        overlaps(SlotHold.occupied_start, SlotHold.occupied_end, span),
    )
    if exclude_hold_id is not None:
        holds = holds.where(SlotHold.id != exclude_hold_id)
    bookings = select(_kind(_BOOKING), Booking.occupied_start, Booking.occupied_end, null()).where(
        Booking.sub_account_id == sub_account_id,
        active,
        overlaps(Booking.occupied_start, Booking.occupied_end, span),
    )
    if exclude_booking_id is not None:
        bookings = bookings.where(Booking.id != exclude_booking_id)
    blocked = select(
        case(
            (BlockedTime.source == BlockedTimeSource.EXTERNAL, _kind(_EXTERNAL)),
            else_=_kind(_BLOCKED),
        ),
        BlockedTime.start_at,
        BlockedTime.end_at,
        null(),
    ).where(
        BlockedTime.sub_account_id == sub_account_id,
        overlaps(BlockedTime.start_at, BlockedTime.end_at, span),
    )
    by_kind: tuple[list[Interval], ...] = ([], [], [], [])
    expired_holds = False
    hold_rows: list[tuple[Interval, datetime]] = []
    # Fetched at once (one fetchall, not a fetch per row: a busy month is ~1,500 rows).
    rows = db.session.execute(union_all(holds, bookings, blocked)).all()
    for kind, start, end, expires_at in rows:
        if kind == _HOLD:
            hold_rows.append((Interval(start, end), expires_at))
            if expires_at <= now:
                expired_holds = True
                continue
        by_kind[kind].append(Interval(start, end))
    return BusyTime(
        bookings=merge(by_kind[_BOOKING]),
        blocked=merge(by_kind[_BLOCKED]),
        external=merge(by_kind[_EXTERNAL]),
        held=merge(by_kind[_HOLD]),
        expired_holds=expired_holds,
        hold_rows=hold_rows,
    )


def _as_is(column: Any) -> Any:
    return column


def _kind(kind: int) -> ColumnElement[int]:
    """A row kind as a literal in the SQL (not a parameter: the statement stays one text)."""
    return literal_column(str(kind), Integer)


def _bounds_overlap(
    start_column: SQLColumnExpression[datetime],
    end_column: SQLColumnExpression[datetime],
    span: Interval,
) -> ColumnElement[bool]:
    return and_(start_column < span.end, end_column > span.start)


def _range_overlaps(
    start_column: SQLColumnExpression[datetime],
    end_column: SQLColumnExpression[datetime],
    span: Interval,
) -> ColumnElement[bool]:
    """``tstzrange(start, end, '[)') && tstzrange(:start, :end, '[)')``: the column side exactly
    as the GiST indexes spell it (the bounds literal, not a parameter, or no plan matches)."""
    half_open: ColumnClause[str] = literal_column("'[)'")
    return func.tstzrange(start_column, end_column, half_open).op("&&", is_comparison=True)(
        func.tstzrange(
            literal(span.start, UTCDateTime()), literal(span.end, UTCDateTime()), half_open
        )
    )


def slot_rules(
    sub_account: SubAccount,
    event_type: EventType | None,
    now: datetime,
    duration_minutes: int | None = None,
) -> SlotRules:
    """Slot length, grid step, buffers, notice and horizon: the event type's, else the
    calendar settings'."""
    settings = sub_account.settings
    if event_type is None:
        minutes = duration_minutes or settings.default_duration
        step, before, after = minutes, 0, 0
        notice, horizon = settings.minimum_notice_minutes, settings.booking_horizon_days
    else:
        minutes = duration_minutes or event_type.duration
        step = event_type.slot_interval or event_type.duration
        before, after = event_type.buffer_before, event_type.buffer_after
        notice = _first_set(event_type.minimum_notice_minutes, settings.minimum_notice_minutes)
        horizon = _first_set(event_type.booking_horizon_days, settings.booking_horizon_days)
    return SlotRules(
        duration=timedelta(minutes=minutes),
        step=timedelta(minutes=step),
        buffer_before=timedelta(minutes=before),
        buffer_after=timedelta(minutes=after),
        earliest_start=now + timedelta(minutes=notice),
        latest_start=now + timedelta(days=horizon),
    )


def _wall_clock(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None)


def _first_set(value: int | None, default: int) -> int:
    return default if value is None else value


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
    event_type = find_event_type(sub_account, query.event_type_id) if query.event_type_id else None
    profile = profile_for(sub_account, event_type)
    tz_name = query.timezone or (profile.timezone if profile else sub_account.settings.timezone)
    tz = zone(tz_name)
    window = Interval(
        resolve_instant("startDate", query.start_date, tz),
        resolve_instant("endDate", query.end_date, tz, date_means="end"),
    )
    first_day = window.start.astimezone(tz).date()
    # A date-only endDate resolves to the next midnight; its own date is the last day.
    last_day = query.end_date.value if query.end_date.is_date else window.end.astimezone(tz).date()
    if window.end < window.start or last_day < first_day:
        raise InvalidRequest("endDate must not be before startDate")
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
    busy = load_busy(sub_account.id, occupied_span, exclude_booking_id=query.exclude_booking_id)
    not_held = merge(chain(busy.bookings, busy.blocked, busy.external))
    slots = open_slots(working_ranges(schedule, *window), not_held, unbounded, window)

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
                HeldTime(int(held.start.timestamp()), int(held.end.timestamp()), expiry.timestamp())
                for held, expiry in busy.hold_rows
            ),
            key=attrgetter("expires_at"),
        ),
        notice_seconds=int(notice.total_seconds()),
        horizon_seconds=int(horizon.total_seconds()),
        buffer_before_seconds=int(rules.buffer_before.total_seconds()),
        buffer_after_seconds=int(rules.buffer_after.total_seconds()),
    )


def _instant(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
