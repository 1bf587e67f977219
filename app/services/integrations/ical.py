"""A booking as an iCalendar object (``icalendar``): what write-back stores in a connected
calendar, and what a notification attaches (an iTIP ``REQUEST`` or ``CANCEL``).

The UID is the booking's ``uid`` in every copy, so a calendar replaces its copy rather than
adding a second, and the inbound sync recognises the service's own events. SEQUENCE is the
booking's ``sequence``, raised by each change a calendar shows. Times are written in the
booking's timezone (``DTSTART;TZID=…`` with its VTIMEZONE), so a calendar shows the time the
booking was made in (UTC for a local time a fall-back repeats, which iCalendar cannot tell
apart); the instants are the booking's, to the second.

A booking held online (Google Meet, Microsoft Teams, a fixed link) whose location is a web
address (``join_link``: a Meet or Teams booking's, once the worker has the meeting's link) has
that link as LOCATION, as URL (the manage link, otherwise URL, stays in the description) and as
an RFC 7986 ``CONFERENCE;VALUE=URI;FEATURE=VIDEO;LABEL=…`` property, which calendar clients
that know it show as a "join" button.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import icalendar

from app.models import Booking, BookingStatus, LocationKind
from app.scheduling.timezones import zone

PRODID = "-//Calendar Booking API//Bookings//EN"
MANAGE_LINE = "Reschedule or cancel"
# The location kinds held online, and what their join link is called (CONFERENCE's LABEL).
ONLINE_KINDS = {
    LocationKind.GOOGLE_MEET: "Google Meet",
    LocationKind.MICROSOFT_TEAMS: "Microsoft Teams",
    LocationKind.LINK: "Online meeting",
}


@dataclass(frozen=True)
class Organizer:
    """Who sends a booking's iTIP messages: the sub account (its notification address, else the
    service's sender address)."""

    email: str
    name: str


_STATUS = {
    BookingStatus.PENDING: "TENTATIVE",
    BookingStatus.CONFIRMED: "CONFIRMED",
    BookingStatus.COMPLETED: "CONFIRMED",
    BookingStatus.NO_SHOW: "CONFIRMED",
    BookingStatus.CANCELLED: "CANCELLED",
}


def booking_vevent(
    booking: Booking,
    *,
    now: datetime,
    organizer: Organizer | None = None,
    manage_url: str | None = None,
) -> icalendar.Event:
    """The booking's VEVENT. Without an ``organizer`` it is the copy kept in a calendar
    collection (CalDAV write-back), whose attendees carry ``SCHEDULE-AGENT=CLIENT`` so a
    scheduling server (RFC 6638) does not mail invitations of its own: the service tells
    attendees itself. With one, it is an iTIP message's (RFC 5546), which needs its ORGANIZER.
    The hosts with an email come first among the attendees, as ``ROLE=CHAIR``."""
    tz = zone(booking.timezone)
    event = icalendar.Event()
    event.add("uid", booking.uid)
    event.add("dtstamp", now)
    event.add("created", booking.created_at)
    event.add("last-modified", booking.updated_at)
    event.add("sequence", booking.sequence)
    event.add("dtstart", _written_time(booking.start_at, tz))
    event.add("dtend", _written_time(booking.end_at, tz))
    event.add("summary", booking.title)
    description = booking.description or ""
    link = join_link(booking)
    if link or manage_url:
        event.add("url", link or manage_url)
    if manage_url:
        line = f"{MANAGE_LINE}: {manage_url}"
        description = f"{description}\n\n{line}" if description else line
    if description:
        event.add("description", description)
    if booking.location:
        event.add("location", booking.location)
    if link:
        label = ONLINE_KINDS[LocationKind(booking.location_kind)]
        event.conferences = [icalendar.Conference(link, feature="VIDEO", label=label)]
    event.add("status", _STATUS[BookingStatus(booking.status)])
    event.add("transp", "OPAQUE")
    if organizer is not None:
        address = icalendar.vCalAddress(f"mailto:{organizer.email}")
        address.params["CN"] = organizer.name
        event.add("organizer", address)
    organizer_email = organizer.email.lower() if organizer is not None else None
    for host in (booking.host, *booking.co_hosts):
        # The people the booking is made with, as its chairs (the organizer is the business).
        if host is None or not host.email or host.email.lower() == organizer_email:
            continue
        address = icalendar.vCalAddress(f"mailto:{host.email}")
        address.params["CN"] = host.name
        address.params["ROLE"] = "CHAIR"
        address.params["PARTSTAT"] = "ACCEPTED"
        if organizer is None:
            address.params["SCHEDULE-AGENT"] = "CLIENT"
        event.add("attendee", address)
    for attendee in booking.attendees:
        address = icalendar.vCalAddress(f"mailto:{attendee.email}")
        address.params["CN"] = attendee.name
        address.params["ROLE"] = "REQ-PARTICIPANT"
        address.params["PARTSTAT"] = "ACCEPTED"  # they booked the time themselves
        if organizer is None:
            address.params["SCHEDULE-AGENT"] = "CLIENT"
        event.add("attendee", address)
    return event


def join_link(booking: Booking) -> str | None:
    """The link attendees join the booking by: its location, when the booking is held online
    (``ONLINE_KINDS``) and the location is an http(s) address. None otherwise, and for a Meet
    or Teams booking whose link the worker does not have yet (its location is still the event
    type's text, if any)."""
    if booking.location_kind not in ONLINE_KINDS:
        return None
    location = (booking.location or "").strip()
    parts = urlsplit(location)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or " " in location:
        return None
    return location


def _written_time(instant: datetime, tz: ZoneInfo) -> datetime:
    """``instant`` in the booking's zone, or in UTC where that local time is ambiguous: iCalendar
    has no fold, and reads a repeated local time (the hour after a fall-back) as its first
    occurrence (RFC 5545 3.3.5), which would be an hour off."""
    local = instant.astimezone(tz)
    if local.replace(fold=0).astimezone(UTC) != instant.astimezone(UTC):
        return instant.astimezone(UTC)
    return local


def booking_calendar(
    booking: Booking,
    *,
    now: datetime,
    method: str | None = None,
    organizer: Organizer | None = None,
    manage_url: str | None = None,
) -> bytes:
    """A VCALENDAR holding the booking's VEVENT and the VTIMEZONE it needs (for the years the
    booking spans, not tzdata's whole history). ``method``: an iTIP message's (``REQUEST`` to
    add or move the event in a mail client, ``CANCEL`` to remove it), sent by ``organizer``;
    None: the copy stored in a calendar."""
    calendar = icalendar.Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    if method is not None:
        calendar.add("method", method)
    calendar.add_component(
        booking_vevent(booking, now=now, organizer=organizer, manage_url=manage_url)
    )
    calendar.add_missing_timezones(
        first_date=booking.start_at.date() - timedelta(days=366),
        last_date=booking.end_at.date() + timedelta(days=366),
    )
    return calendar.to_ical()
