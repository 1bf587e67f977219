"""What a sub account's calendar is read as before the scheduling rules (``app.scheduling``)
are asked anything: its event type (``get_event_type``), the availability profile that gives
the working hours (``profile_for``, ``load_schedule``), its busy time (``load_busy``) and the
slot rules of the event type or the calendar's settings (``slot_rules``).

Both the open time availability answers with (``availability.open_time``) and the time every
booking or hold write claims (``bookings.time_claims``, ``bookings.writes``,
``bookings.holds``) read them here, so both apply one rule to the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import partial
from itertools import chain
from typing import Any

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Float,
    Integer,
    SQLColumnExpression,
    bindparam,
    case,
    cast,
    func,
    literal,
    literal_column,
    null,
    or_,
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
    BookingDayCount,
    BookingHost,
    CalendarSettings,
    DateOverride,
    EventType,
    EventTypeHost,
    Host,
    SlotHold,
    SubAccount,
)
from app.models.types import UTCDateTime, utcnow
from app.scheduling.caps import Cap, Scope, Tally, caps_from, counting_span
from app.scheduling.intervals import Interval, merge
from app.scheduling.round_robin import (
    PRIORITY_DEFAULT,
    WEIGHT_DEFAULT,
    CountedBooking,
    RoundRobinHost,
    Standing,
    standings,
)
from app.scheduling.seats import SeatedSlots, group_slot
from app.scheduling.slots import SlotRules
from app.scheduling.timezones import local_to_utc, zone
from app.scheduling.working_hours import WeeklySchedule
from app.services.common.errors import EventTypeNotFound
from app.services.common.ids import is_storable_id

# The longest window availability answers for, and so the farthest a write's suggestions look.
MAX_WINDOW = timedelta(days=93)


@dataclass(frozen=True)
class BusyTime:
    """Merged busy intervals of one sub account, by kind (so a conflict can say which)."""

    bookings: list[Interval]
    blocked: list[Interval]
    external: list[Interval]
    held: list[Interval] = field(default_factory=list)
    # Expired holds whose rows are still stored in the span: a write over them deletes them.
    expired_holds: bool = False
    # Every hold stored in the span, live or expired, with its expiry and, for a seat of the
    # seated event type asked about, its slot (availability kept for a calendar version applies
    # them at each question: ``app.scheduling.offered``).
    hold_rows: list[tuple[Interval, datetime, Interval | None]] = field(default_factory=list)
    # The seated event type's groups (``app.scheduling.seats``), when one was asked about: its
    # seats' bookings and live holds are counted here, not in ``bookings`` and ``held``.
    seated: SeatedSlots | None = None

    def all(self) -> list[Interval]:
        return merge(chain(self.bookings, self.blocked, self.external, self.held))


def get_event_type(sub_account: SubAccount, event_type_id: int, *, offered_only: bool) -> EventType:
    """The sub account's event type ``event_type_id``, with its availability profile and the
    profile's weekly hours, in one statement; anyone else's, or an id no row can have, is
    ``EventTypeNotFound``.

    ``offered_only``: a deactivated event type is not found either. It is no longer offered
    (availability, new bookings and holds answer 404), but the bookings made with it live on:
    their updates, and the dashboard's editing of event types, pass False."""
    if not is_storable_id(event_type_id):
        raise EventTypeNotFound()
    event_type = (
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
    if event_type is None or (offered_only and not event_type.active):
        raise EventTypeNotFound()
    return event_type


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


@dataclass(frozen=True)
class TeamMember:
    """A host an event type's bookings may be made with, with the profile that gives its
    working hours, and, for round robin, its priority, weight and since when it has been
    eligible."""

    host_id: int
    profile: AvailabilityProfile | None
    priority: int = PRIORITY_DEFAULT
    weight: int = WEIGHT_DEFAULT
    eligible_since: datetime | None = None


def team_of(sub_account: SubAccount, event_type: EventType | None) -> list[TeamMember]:
    """Who the event type's bookings may be made with: a one-host type's host (its working
    hours ``profile_for``'s); a round-robin or collective type's active hosts, each with the
    event type's own profile, else the host's, else the sub account's default (by host id).
    Without an event type, the sub account's first host."""
    if event_type is None or not event_type.is_team:
        host_id = (
            event_type.host_id
            if event_type is not None
            else db.session.scalar(
                select(Host.id).where(Host.sub_account_id == sub_account.id).order_by(Host.id)
            )
        )
        assert host_id is not None  # every sub account has a host (migration 0029)
        return [TeamMember(host_id, profile_for(sub_account, event_type))]
    rows = db.session.execute(
        select(EventTypeHost, Host.availability_profile_id)
        .join(Host, Host.id == EventTypeHost.host_id)
        .where(EventTypeHost.event_type_id == event_type.id, Host.active)
        .order_by(EventTypeHost.host_id)
    ).all()
    profile_ids = {profile_id for _, profile_id in rows if profile_id is not None}
    profiles = {
        profile.id: profile
        for profile in db.session.scalars(
            select(AvailabilityProfile)
            .where(AvailabilityProfile.id.in_(profile_ids))
            .options(joinedload(AvailabilityProfile.weekly_hours))
        ).unique()
    }
    default = event_type.availability_profile or profile_for(sub_account, None)
    return [
        TeamMember(
            listed.host_id,
            event_type.availability_profile or profiles.get(profile_id or 0) or default,
            listed.priority,
            listed.weight,
            listed.eligible_since,
        )
        for listed, profile_id in rows
    ]


def counting_window(sub_account: SubAccount, now: datetime) -> Interval:
    """Round robin's counting window: the calendar month of the sub account's timezone that
    ``now`` falls in."""
    tz = zone(sub_account.settings.timezone)
    today = now.astimezone(tz).date()
    first = today.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return Interval(local_to_utc(first, time(0), tz), local_to_utc(following, time(0), tz))


def load_standings(
    sub_account: SubAccount, event_type: EventType, members: list[TeamMember], now: datetime
) -> list[Standing]:
    """Where each of a round-robin type's hosts stands in the counting window: the event
    type's active bookings made in it, by host (``app.scheduling.round_robin``)."""
    window = counting_window(sub_account, now)
    made = db.session.execute(
        select(Booking.host_id, Booking.created_at).where(
            Booking.event_type_id == event_type.id,
            Booking.status.in_(ACTIVE_STATUSES),
            Booking.created_at >= window.start,
            Booking.created_at < window.end,
        )
    ).all()
    hosts = [
        RoundRobinHost(
            member.host_id,
            member.priority,
            member.weight,
            # Eligible since before the window: nothing to calibrate.
            member.eligible_since
            if member.eligible_since is not None and member.eligible_since > window.start
            else None,
        )
        for member in members
    ]
    return standings(hosts, [CountedBooking(host_id, made_at) for host_id, made_at in made])


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
    seated: tuple[int, int] | None = None,
    hosts: Collection[int] | None = None,
) -> BusyTime:
    """Busy time overlapping ``span`` of the ``hosts`` together (None: every host's), as
    ``load_busy_by_host`` reads it."""
    rows = _busy_rows(sub_account_id, span, exclude_booking_id, exclude_hold_id, hosts)
    return _busy_time(rows, now or utcnow(), seated)


def load_busy_by_host(
    sub_account_id: int,
    span: Interval,
    hosts: Collection[int],
    *,
    now: datetime | None = None,
    exclude_booking_id: int | None = None,
    exclude_hold_id: int | None = None,
) -> dict[int, BusyTime]:
    """Each of ``hosts``' busy time overlapping ``span``, read in one statement: a round-robin
    or collective event type's hosts are asked about at once. Blocked time that is everyone's
    is each host's."""
    rows = _busy_rows(sub_account_id, span, exclude_booking_id, exclude_hold_id, hosts)
    now = now or utcnow()
    by_host: dict[int | None, list[Any]] = {}
    for row in rows:  # one pass: each host's rows, and everyone's (blocked time, host None)
        by_host.setdefault(row[5], []).append(row)
    everyone = by_host.get(None, [])
    return {
        host_id: _busy_time(by_host.get(host_id, []) + everyone, now, None) for host_id in hosts
    }


def _busy_rows(
    sub_account_id: int,
    span: Interval,
    exclude_booking_id: int | None,
    exclude_hold_id: int | None,
    hosts: Collection[int] | None,
) -> list[Any]:
    """Busy time overlapping ``span``: bookings, blocked time and holds, read in one statement
    (a ``UNION ALL`` of one range query per table: one round trip, and, in a write, one less
    thing done while the calendar's lock is held). A hold counts until its expiry (``now``,
    default the current time, decides), whether or not its row is gone yet.

    All are range overlaps (``&&``) on GiST indexes, which find the intervals near the window
    whatever the length of the calendar's history: for bookings the index of the partial
    exclusion constraint ``ex_bookings_no_overlap`` (0002; per host since 0029, led by the sub
    account so it serves this; the status predicate repeats the constraint's, as literals,
    which the planner can match even in the generic plan of a prepared statement), for blocked
    times ``ix_blocked_times_sub_account_range`` (0003), for holds the index of
    ``ex_slot_holds_no_overlap`` (0010, likewise).

    ``seated``: (event type id, seats) of a seated event type whose time is asked about: the
    bookings and holds of its own groups are counted as taken seats (``BusyTime.seated``), and
    only other groups' are busy time.

    ``hosts``: the busy time of those hosts only (None: every host's): their bookings, their
    holds, their connected calendars' events, and the blocked time that is everyone's or
    theirs (``app.models.host``).

    Each row: kind, start, end, a hold's expiry, a seat group, and its host (None: blocked
    time that is everyone's).
    """
    active = Booking.status.in_(
        bindparam(
            "active_statuses",
            [str(s) for s in ACTIVE_STATUSES],
            expanding=True,
            literal_execute=True,
        )
    )
    # Our sessions speak UTC, so psycopg already hands back instants tagged with Python's
    # UTC: read as plain timestamps, the ~3,000 values skip UTCDateTime's processor.
    instant: Callable[[Any], Any] = partial(type_coerce, type_=DateTime(timezone=True))
    # Holds first: the statement's column types are the first query's, and only holds have
    # an expiry (the others' NULL takes its type).
    holds = select(
        _kind(_HOLD),
        instant(SlotHold.occupied_start),
        instant(SlotHold.occupied_end),
        instant(SlotHold.expires_at),
        SlotHold.seat_group,
        SlotHold.host_id,
    ).where(
        SlotHold.sub_account_id == sub_account_id,
        _range_overlaps(SlotHold.occupied_start, SlotHold.occupied_end, span),
    )
    if exclude_hold_id is not None:
        holds = holds.where(SlotHold.id != exclude_hold_id)
    if hosts is not None:
        holds = holds.where(SlotHold.host_id.in_(sorted(hosts)))
    booked = [
        Booking.sub_account_id == sub_account_id,
        active,
        _range_overlaps(Booking.occupied_start, Booking.occupied_end, span),
    ]
    if exclude_booking_id is not None:
        booked.append(Booking.id != exclude_booking_id)
    booking_columns = (
        _kind(_BOOKING),
        Booking.occupied_start,
        Booking.occupied_end,
        null(),
        Booking.seat_group,
    )
    bookings = select(*booking_columns, Booking.host_id).where(*booked)
    parts = [holds, bookings]
    if hosts is not None:
        # A collective booking takes its other hosts' time too (``booking_hosts``).
        co_hosted = (
            select(*booking_columns, BookingHost.host_id)
            .join(BookingHost, BookingHost.booking_id == Booking.id)
            .where(*booked, BookingHost.host_id.in_(sorted(hosts)))
        )
        bookings = bookings.where(Booking.host_id.in_(sorted(hosts)))
        parts = [holds, bookings, co_hosted]
    blocked = select(
        case(
            (BlockedTime.source == BlockedTimeSource.EXTERNAL, _kind(_EXTERNAL)),
            else_=_kind(_BLOCKED),
        ),
        BlockedTime.start_at,
        BlockedTime.end_at,
        null(),
        null(),
        BlockedTime.host_id,
    ).where(
        BlockedTime.sub_account_id == sub_account_id,
        _range_overlaps(BlockedTime.start_at, BlockedTime.end_at, span),
    )
    if hosts is not None:
        blocked = blocked.where(
            or_(BlockedTime.host_id.is_(None), BlockedTime.host_id.in_(sorted(hosts)))
        )
    # Fetched at once (one fetchall, not a fetch per row: a busy month is ~1,500 rows).
    return list(db.session.execute(union_all(*parts, blocked)).all())


def _busy_time(rows: list[Any], now: datetime, seated: tuple[int, int] | None) -> BusyTime:
    """``BusyTime`` from ``_busy_rows``' rows; a hold counts until its expiry (``now``)."""
    by_kind: tuple[list[Interval], ...] = ([], [], [], [])
    expired_holds = False
    hold_rows: list[tuple[Interval, datetime, Interval | None]] = []
    seats = SeatedSlots(seated[1]) if seated else None
    for kind, start, end, expires_at, group, _host in rows:
        seat_slot = group_slot(group, seated[0]) if group and seated else None
        if kind == _HOLD:
            hold_rows.append((Interval(start, end), expires_at, seat_slot))
            if expires_at <= now:
                expired_holds = True
                continue
        if seat_slot is not None and seats is not None:
            seats.add(seat_slot, Interval(start, end), held=kind == _HOLD)
            continue
        by_kind[kind].append(Interval(start, end))
    return BusyTime(
        bookings=merge(by_kind[_BOOKING]),
        blocked=merge(by_kind[_BLOCKED]),
        external=merge(by_kind[_EXTERNAL]),
        held=merge(by_kind[_HOLD]),
        expired_holds=expired_holds,
        hold_rows=hold_rows,
        seated=seats,
    )


def _kind(kind: int) -> ColumnElement[int]:
    """A row kind as a literal in the SQL (not a parameter: the statement stays one text)."""
    return literal_column(str(kind), Integer)


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


def hours_zone(profile: AvailabilityProfile | None, settings: CalendarSettings) -> str:
    """The timezone of working hours, which availability counts its days in unless a timezone
    is asked: the profile's, else the calendar settings'."""
    return profile.timezone if profile is not None else settings.timezone


@dataclass(frozen=True)
class BookingTerms:
    """What an event type's bookings keep where its own fields may leave it to the calendar
    settings: minutes between slot starts, minimum notice in minutes, horizon in days."""

    step_minutes: int
    notice_minutes: int
    horizon_days: int


def booking_terms(settings: CalendarSettings, event_type: EventType) -> BookingTerms:
    """The event type's step (its slot interval, else its duration), notice and horizon (its
    own, else the calendar settings')."""
    return BookingTerms(
        step_minutes=event_type.slot_interval or event_type.duration,
        notice_minutes=_first_set(
            event_type.minimum_notice_minutes, settings.minimum_notice_minutes
        ),
        horizon_days=_first_set(event_type.booking_horizon_days, settings.booking_horizon_days),
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
        terms = booking_terms(settings, event_type)
        step, notice, horizon = terms.step_minutes, terms.notice_minutes, terms.horizon_days
        before, after = event_type.buffer_before, event_type.buffer_after
    return SlotRules(
        duration=timedelta(minutes=minutes),
        step=timedelta(minutes=step),
        buffer_before=timedelta(minutes=before),
        buffer_after=timedelta(minutes=after),
        earliest_start=now + timedelta(minutes=notice),
        latest_start=now + timedelta(days=horizon),
    )


def seated(event_type: EventType | None) -> tuple[int, int] | None:
    """(id, seats) of an event type whose slots take more than one booking, else None: its
    time is read with ``load_busy(seated=...)``."""
    if event_type is None or event_type.seats <= 1:
        return None
    return event_type.id, event_type.seats


def seat_numbers_taken(group: str, *, exclude_booking_id: int | None, now: datetime) -> list[int]:
    """The seat numbers of ``group`` that active bookings and live holds have (the booking
    being moved does not count)."""
    bookings = select(Booking.seat_number).where(
        Booking.seat_group == group, Booking.status.in_(ACTIVE_STATUSES)
    )
    if exclude_booking_id is not None:
        bookings = bookings.where(Booking.id != exclude_booking_id)
    holds = select(SlotHold.seat_number).where(
        SlotHold.seat_group == group, SlotHold.expires_at > now
    )
    return [number for number in db.session.scalars(union_all(bookings, holds)) if number]


def _first_set(value: int | None, default: int) -> int:
    return default if value is None else value


@dataclass(frozen=True)
class BookingCaps:
    """The caps a booking of an event type (or, with none, of the calendar) must keep, and the
    bookings that count against them (``app.scheduling.caps``)."""

    caps: list[Cap]
    timezone: str  # the calendar's: periods are its days, weeks and months
    event_type_id: int | None
    sub_account_id: int

    def tally(self, span: Interval, exclude_booking_id: int | None = None) -> Tally:
        """The active bookings of each local day of the periods ``span`` touches (the booking
        being moved does not count): the counts the database keeps per day (``BookingDayCount``),
        a few dozen rows where a busy month is a thousand bookings."""
        counted = counting_span(span, self.caps, self.timezone) if self.caps else span
        if not self.caps:
            return Tally((), self.event_type_id, self.timezone, counted)
        # The session's connection, not the session: plain rows, without the ORM's row
        # processing; and statements built once.
        connection = db.session.connection()
        tz = zone(self.timezone)
        tally = Tally((), self.event_type_id, self.timezone, counted)
        tally.add_days(
            connection.execute(
                _DAY_COUNTS,
                {
                    "sub_account_id": self.sub_account_id,
                    "first_day": counted.start.astimezone(tz).date(),
                    "end_day": counted.end.astimezone(tz).date(),
                    "own_event_type_id": self.event_type_id or 0,
                },
            ).all()
        )
        if exclude_booking_id:
            moved = connection.execute(_ACTIVE_BOOKING, {"booking_id": exclude_booking_id}).first()
            if moved is not None:
                tally.remove(*moved)
        return tally


# Each local day's counts from ``BookingDayCount`` (its triggers keep them): the calendar's
# bookings and minutes, then the event type's own.
_OWN = BookingDayCount.event_type_id == bindparam("own_event_type_id")
_DAY_COUNTS = (
    select(
        BookingDayCount.day,
        func.sum(BookingDayCount.bookings),
        func.sum(BookingDayCount.minutes),
        func.coalesce(func.sum(case((_OWN, BookingDayCount.bookings))), 0),
        func.coalesce(func.sum(case((_OWN, BookingDayCount.minutes))), 0),
    )
    .where(
        BookingDayCount.sub_account_id == bindparam("sub_account_id"),
        BookingDayCount.day >= bindparam("first_day"),
        BookingDayCount.day < bindparam("end_day"),
    )
    .group_by(BookingDayCount.day)
)
# The booking being moved, as the tally counts it (epoch seconds), if it is active.
_ACTIVE_BOOKING = select(
    cast(func.extract("epoch", Booking.start_at), Float),
    cast(func.extract("epoch", Booking.end_at), Float),
    Booking.event_type_id,
).where(Booking.id == bindparam("booking_id"), Booking.status.in_(ACTIVE_STATUSES))


def booking_caps(sub_account: SubAccount, event_type: EventType | None) -> BookingCaps:
    """The event type's caps and the calendar's (``bookingLimits`` of each)."""
    settings = sub_account.settings
    caps = caps_from(settings.booking_limits, Scope.CALENDAR)
    if event_type is not None:
        caps = caps_from(event_type.booking_limits, Scope.EVENT_TYPE) + caps
    return BookingCaps(
        caps,
        settings.timezone,
        event_type.id if event_type is not None else None,
        sub_account.id,
    )
