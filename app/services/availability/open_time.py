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

from app.models import Booking, EventType, SubAccount
from app.models.event_type import HostAssignment
from app.models.types import utcnow
from app.scheduling.host_slots import any_host_open, every_host_open
from app.scheduling.intervals import Interval, merge
from app.scheduling.offered import HeldTime, SlotSet
from app.scheduling.round_robin import offered as too_far_ahead_hidden
from app.scheduling.slots import SlotRules, open_slots, slots_by_day
from app.scheduling.timezones import InstantInput, zone
from app.scheduling.working_hours import working_ranges
from app.services.common.errors import InvalidRequest
from app.services.common.instants import resolve_instant
from app.services.scheduling_inputs import (
    MAX_WINDOW,
    TeamMember,
    booking_caps,
    get_event_type,
    hours_zone,
    load_busy,
    load_busy_by_host,
    load_schedule,
    load_standings,
    profile_for,
    seated,
    slot_rules,
    team_of,
)

COLLECTIVE = HostAssignment.COLLECTIVE
NOT_A_HOST = "hostId is not a host of this event type"

# A hold as a slot set keeps it: its time, expiry, seated slot and host (a team's).
HoldRow = tuple[Interval, datetime, Interval | None, int | None]


@dataclass(frozen=True)
class AvailabilityQuery:
    start_date: InstantInput
    end_date: InstantInput
    event_type_id: int | None = None
    duration: int | None = None
    timezone: str | None = None
    # Rescheduling: the booking being moved does not make its own time busy.
    exclude_booking_id: int | None = None
    # One host's slots (``hostId``): that host of the event type alone.
    host_id: int | None = None


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
    tz_name = query.timezone or hours_zone(profile, sub_account.settings)
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
    occupied_span = Interval(window.start - rules.buffer_before, window.end + rules.buffer_after)
    seats = seated(event_type)
    team = event_type is not None and event_type.is_team
    # A one-host question reads its host off the event type; its hosts are looked up only to
    # check a named one.
    members = (
        only_host(team_of(sub_account, event_type), query.host_id)
        if team or query.host_id is not None
        else []
    )
    slot_hosts: list[list[int]] = []
    hold_rows: list[HoldRow]
    if team:
        assert event_type is not None
        slots, slot_hosts, hold_rows = _team_slots(
            sub_account, event_type, members, window, occupied_span, unbounded, query
        )
        groups = None
    else:
        busy = load_busy(
            sub_account.id,
            occupied_span,
            exclude_booking_id=query.exclude_booking_id,
            seated=seats,
            # An event type's host's time; without one, every host's.
            hosts=[event_type.host_id] if event_type is not None else None,
        )
        schedule = load_schedule(profile, sub_account.settings.timezone, window)
        not_held = merge(chain(busy.bookings, busy.blocked, busy.external))
        slots = open_slots(working_ranges(schedule, *window), not_held, unbounded, window)
        groups = busy.seated.booked_only() if busy.seated is not None else None
        if groups is not None:  # a seated type: its groups' own slots stay open while seats last
            slots = groups.keep_open(slots, unbounded)
        hold_rows = [(held, expiry, seat, None) for held, expiry, seat in busy.hold_rows]
    caps = booking_caps(sub_account, event_type)
    if caps.caps and slots:  # a slot whose day, week or month is full is not offered
        tally = caps.tally(window, exclude_booking_id=query.exclude_booking_id)
        kept = tally.keep_open(slots, caps.caps)
        if slot_hosts:
            hosts_at = dict(zip(slots, slot_hosts, strict=True))
            slot_hosts = [hosts_at[slot] for slot in kept]
        slots = kept

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
                    int(seat.start.timestamp()) if seat else None,
                    int(seat.end.timestamp()) if seat else None,
                    host_id,
                )
                for held, expiry, seat, host_id in hold_rows
            ),
            key=attrgetter("expires_at"),
        ),
        notice_seconds=int(notice.total_seconds()),
        horizon_seconds=int(horizon.total_seconds()),
        buffer_before_seconds=int(rules.buffer_before.total_seconds()),
        buffer_after_seconds=int(rules.buffer_after.total_seconds()),
        seats=seats[1] if seats else 1,
        booked_seats=[groups.booked_in(slot) for slot in slots] if groups is not None else [],
        slot_hosts=slot_hosts,
        collective=team and event_type is not None and event_type.assignment is COLLECTIVE,
    )


def only_host(members: list[TeamMember], host_id: int | None) -> list[TeamMember]:
    """The event type's hosts (``team_of``) a question is about: all of them, or the one
    ``hostId`` names (a host of another event type, or none, is refused)."""
    if host_id is None:
        return members
    asked = [member for member in members if member.host_id == host_id]
    if not asked:
        raise InvalidRequest(NOT_A_HOST, errors={"hostId": [NOT_A_HOST]})
    return asked


def _team_slots(
    sub_account: SubAccount,
    event_type: EventType,
    members: list[TeamMember],
    window: Interval,
    occupied_span: Interval,
    rules: SlotRules,
    query: AvailabilityQuery,
) -> tuple[list[Interval], list[list[int]], list[HoldRow]]:
    """A round-robin or collective type's open slots: each host's, from its own working hours
    and busy time (read for all of them in one statement), joined (round robin: a slot any
    offered host can take; collective: one every host can take), with the hosts free for each
    and every host's holds."""
    busy_by_host = load_busy_by_host(
        sub_account.id,
        occupied_span,
        [member.host_id for member in members],
        exclude_booking_id=query.exclude_booking_id,
    )
    open_by_host: dict[int, list[Interval]] = {}
    # Hosts often share a profile: its hours are loaded and laid out once.
    hours: dict[int | None, list[Interval]] = {}
    for member in members:
        key = member.profile.id if member.profile is not None else None
        if key not in hours:
            schedule = load_schedule(member.profile, sub_account.settings.timezone, window)
            hours[key] = working_ranges(schedule, *window)
        busy = busy_by_host[member.host_id]
        not_held = merge(chain(busy.bookings, busy.blocked, busy.external))
        open_by_host[member.host_id] = open_slots(hours[key], not_held, rules, window)
    if event_type.assignment is COLLECTIVE:
        slots = every_host_open(open_by_host)
    else:
        offered = None
        if event_type.max_ahead is not None and query.host_id is None:
            standing = load_standings(sub_account, event_type, members, utcnow())
            offered = {s.host.host_id for s in too_far_ahead_hidden(standing, event_type.max_ahead)}
        slots = any_host_open(open_by_host, offered)
        open_by_host = {h: o for h, o in open_by_host.items() if offered is None or h in offered}
    free_at: dict[Interval, list[int]] = {slot: [] for slot in slots}
    for host_id, host_slots in open_by_host.items():
        for slot in host_slots:
            if slot in free_at:
                free_at[slot].append(host_id)
    hold_rows: list[HoldRow] = [
        (held, expiry, seat, host_id)
        for host_id, busy in busy_by_host.items()
        for held, expiry, seat in busy.hold_rows
    ]
    return slots, [free_at[slot] for slot in slots], hold_rows


def _instant(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
