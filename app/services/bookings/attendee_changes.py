"""What an attendee may do from their manage link (``app.services.common.manage_links``): see
the booking, cancel it, or move it to an open slot of the same event type, within the sub
account's rules.

- **How late**: ``attendeeChangeNoticeHours`` (default 0) before the start, changes end; inside
  that window (and once the booking has started) the page says whom to contact instead.
- **How often**: ``attendeeMaxReschedules`` (default no limit) moves by the attendees; the
  business's own moves do not count.
- **The same rules as everyone's**: a move is the API's update (``writes.update_booking``: the
  time rule, the calendar's lock, the live check of connected calendars) and a cancel the API's
  cancel; both are recorded as the attendee's (``Actor.ATTENDEE``), which the dashboard's
  history, the mails and the webhooks say.
- **A hold while choosing**: picking a slot holds it (``holds.place_hold``, for
  ``CHOICE_HOLD_SECONDS``) while the attendee confirms; a slot taken meanwhile is refused with
  the nearest open ones instead. A link holds one choice at a time: a new one replaces it.

Each function is one use case in the caller's transaction; the caller commits. A hold and a
move are planned writes (``app.services.bookings.planned``), applied by the entry point.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlalchemy import true, update

from app.extensions import db
from app.models import ACTIVE_STATUSES, Booking, BookingStatus
from app.scheduling.intervals import Interval
from app.scheduling.timezones import InstantInput
from app.services.availability.open_time import AvailabilityDay, slots_to_move_to
from app.services.bookings.holds import (
    NewHold,
    PlacedHold,
    place_hold,
    release_attendee_choice,
)
from app.services.bookings.planned import PlannedWrite
from app.services.bookings.writes import BookingChanges, cancel_booking, update_booking
from app.services.common.errors import ErrorCode, InvalidRequest
from app.services.common.manage_links import OpenedLink, open_manage_link
from app.services.integrations.events import Actor
from app.services.scheduling_inputs import slot_rules

# How long a chosen slot is held while the attendee confirms the move.
CHOICE_HOLD_SECONDS = 10 * 60
# How many days of open slots the page shows at a time.
DAYS_SHOWN = 7


@dataclass(frozen=True)
class AttendeeBooking:
    """The booking as its attendee's page shows it, and what they may still do."""

    link: OpenedLink
    # Why the attendee can no longer cancel or move it (None: they can), in their words.
    locked_because: str | None
    # Why they can no longer move it, though they may cancel (the moves are used up).
    moves_used_up: str | None
    contact: str  # whom to ask instead: the business's name and address

    @property
    def booking(self) -> Booking:
        return self.link.booking

    @property
    def can_cancel(self) -> bool:
        return self.locked_because is None

    @property
    def can_move(self) -> bool:
        return self.locked_because is None and self.moves_used_up is None


def open_attendee_booking(token: str, now: datetime) -> AttendeeBooking:
    """The booking ``token`` opens, with the rules applied (``ManageLinkUnusable`` if none)."""
    link = open_manage_link(token, now)
    booking, settings = link.booking, link.sub_account.settings
    contact = link.sub_account.name
    if settings.notification_email:
        contact = f"{contact} ({settings.notification_email})"
    locked = None
    if booking.status == BookingStatus.CANCELLED:
        locked = "This booking is cancelled."
    elif booking.status not in ACTIVE_STATUSES or booking.start_at <= now:
        locked = (
            f"This booking has already taken place. For anything about it, contact {contact}."
            if booking.end_at <= now
            else f"This booking has already started. To change it, contact {contact}."
        )
    elif booking.start_at - timedelta(hours=settings.attendee_change_notice_hours) <= now:
        hours = settings.attendee_change_notice_hours
        locked = (
            f"Changes are possible until {hours} hour{'s' if hours != 1 else ''} before the "
            f"start. To change it now, contact {contact}."
        )
    used_up = None
    most = settings.attendee_max_reschedules
    if most is not None and booking.attendee_moves >= most:
        used_up = _moves_used_up(most, contact)
    return AttendeeBooking(link, locked, used_up, contact)


def _moves_used_up(most: int, contact: str) -> str:
    return (
        f"This booking has been moved as often as allowed ({most} "
        f"time{'s' if most != 1 else ''}). To move it again, contact {contact}."
    )


def _require(allowed: bool, why: str | None) -> None:
    if not allowed:
        raise InvalidRequest(why or "Not possible", code=ErrorCode.BOOKING_NOT_ACTIVE)


def cancel_as_attendee(shown: AttendeeBooking, reason: str | None, now: datetime) -> Booking:
    """Cancel the booking its attendee's link opened (``open_attendee_booking``)."""
    _require(shown.can_cancel, shown.locked_because)
    return cancel_booking(
        shown.link.sub_account, shown.booking.id, reason or None, now=now, actor=Actor.ATTENDEE
    )


def open_slots_for_attendee(
    shown: AttendeeBooking, first_day: date, timezone: str, now: datetime
) -> list[AvailabilityDay]:
    """The open slots of ``DAYS_SHOWN`` days from ``first_day`` (in ``timezone``) the booking
    could move to, as long as it is now."""
    return slots_to_move_to(
        shown.link.sub_account, shown.booking, first_day, DAYS_SHOWN, timezone, now
    )


def hold_choice(
    shown: AttendeeBooking, start: datetime, now: datetime
) -> PlannedWrite[PlacedHold | None]:
    """Plan holding the slot the attendee picked while they confirm; refused
    (``TimeUnavailable``, with suggestions) when it was taken meanwhile. None when the slot
    overlaps the booking's own time, which no hold may (the booking keeps that part of it until
    the move): the earlier choice is released all the same."""
    _require(shown.can_move, shown.locked_because or shown.moves_used_up)
    booking = shown.booking
    end = start + (booking.end_at - booking.start_at)
    rules = slot_rules(shown.link.sub_account, booking.event_type, now)
    occupied = rules.occupied_interval(Interval(start, end))
    if occupied.overlaps(Interval(booking.occupied_start, booking.occupied_end)):
        attendee_id = shown.link.attendee.id  # this choice replaces that one too
        return PlannedWrite(None, lambda seen: release_attendee_choice(attendee_id))
    return place_hold(
        shown.link.sub_account,
        booking.event_type_id,
        NewHold(
            start_time=InstantInput(start),
            end_time=InstantInput(end),
            timezone=booking.timezone,
            ttl_seconds=CHOICE_HOLD_SECONDS,
        ),
        now=now,
        attendee_id=shown.link.attendee.id,
    )


def move_as_attendee(
    shown: AttendeeBooking, start: datetime, hold_token: str | None, now: datetime
) -> PlannedWrite[Booking]:
    """Plan moving the booking its attendee's link opened to ``start`` (keeping its length),
    consuming the hold placed while they chose.

    The moves are counted under the calendar's lock that the move took, with one conditional
    update: of two confirmations at once beyond ``attendeeMaxReschedules``, the second finds
    the count already at the limit and is refused (its move rolls back with it). The check
    before the lock only spares a refused attendee the live check."""
    _require(shown.can_move, shown.locked_because or shown.moves_used_up)
    planned = update_booking(
        shown.link.sub_account,
        shown.booking.event_type_id,
        shown.booking.id,
        BookingChanges(
            sent=frozenset({"start_time"}),
            start_time=InstantInput(start),
            hold_token=hold_token,
        ),
        now=now,
        actor=Actor.ATTENDEE,
    )
    most = shown.link.sub_account.settings.attendee_max_reschedules
    return planned.then(lambda booking: _count_move(booking, most, shown.contact))


def _count_move(booking: Booking, most: int | None, contact: str) -> Booking:
    """Count the attendee's move, refused when the moves are used up (under the move's lock:
    ``move_as_attendee``)."""
    counted = db.session.execute(
        update(Booking)
        .where(
            Booking.id == booking.id,
            true() if most is None else Booking.attendee_moves < most,
        )
        .values(attendee_moves=Booking.attendee_moves + 1)
        .returning(Booking.attendee_moves)
    ).scalar()
    if counted is None:
        raise InvalidRequest(_moves_used_up(most or 0, contact), code=ErrorCode.BOOKING_NOT_ACTIVE)
    return booking
