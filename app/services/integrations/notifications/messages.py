"""One booking email to one recipient: subject, a plain-text and an HTML part (Jinja templates
``templates/booking.txt`` and ``.html`` beside this module, rendered by an environment of its
own: mail is the service's, not a page of the web's), times in the recipient's timezone, and
the booking as an iCalendar invitation (``REQUEST``, or ``CANCEL`` once cancelled) so mail
clients add, move or remove it. No I/O: sending is ``mailer``'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address, AddressHeader, HeaderRegistry
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from app.models import Booking, BookingStatus
from app.scheduling.timezones import zone
from app.services.common.answers import answer_lines
from app.services.integrations.events import BookingEventKind
from app.services.integrations.ical import Organizer, booking_calendar, join_link

# A reminder's mail tells of its event, ``booking.reminder``.
REMINDER = BookingEventKind.REMINDER

# Every mail's templates (``templates/`` beside this module): HTML parts are escaped,
# plain-text parts are not (as Flask would render them).
MAIL_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).resolve().parent / "templates"),
    autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=False),
)

_LABELS = {
    "booking.created": "Booked",
    "booking.updated": "Updated",
    "booking.rescheduled": "Moved",
    "booking.confirmed": "Confirmed",
    "booking.cancelled": "Cancelled",
    REMINDER: "Reminder",
}
# When the attendee made the change themselves (from their manage link).
_ATTENDEE_HEADLINES = {  # (to an attendee, to the calendar's owner)
    "booking.rescheduled": ("You moved your booking.", "The attendee moved a booking."),
    "booking.cancelled": ("You cancelled your booking.", "The attendee cancelled a booking."),
}
_HEADLINES = {  # (to an attendee, to the calendar's owner)
    "booking.created": ("Your booking is made.", "A new booking was made."),
    "booking.rescheduled": ("Your booking has moved.", "A booking was moved."),
    "booking.confirmed": ("Your booking is confirmed.", "A booking was confirmed."),
    "booking.cancelled": ("Your booking is cancelled.", "A booking was cancelled."),
    REMINDER: ("A reminder of your booking.", "A reminder of a booking."),
}
# ``booking.updated`` is mailed when the location changed: the worker has the meeting's link.
_LOCATION_HEADLINES = {  # (to an attendee, to the calendar's owner), by whether it is a link
    True: ("The link to join your booking is ready.", "The link to join a booking is ready."),
    False: ("Your booking has a new location.", "A booking has a new location."),
}


@dataclass(frozen=True)
class Recipient:
    email: str
    name: str | None
    timezone: str  # the attendee's, else the booking's
    is_owner: bool = False  # the sub account's notification address, or a host's
    # A host the booking was with until this change: the booking is no longer theirs.
    former_host: bool = False
    # The attendee's own link to see, cancel or move the booking (none for the owner, or once
    # the booking is cancelled).
    manage_url: str | None = None


@dataclass(frozen=True)
class Letterhead:
    """Who the mail is from: the service's sender address, and the sub account it speaks for
    (whose notification address organizes the invitation and receives replies)."""

    sender: str  # MAIL_FROM, "Name <address>" or an address
    sub_account_name: str
    organizer: Organizer


def message_id(dedupe_key: str, sender: str) -> str:
    """The same Message-ID for every attempt at one message: a resend after a crash is the
    same message to the receiving server and mail client."""
    domain = address(sender).domain or "localhost"
    return f"<{hashlib.sha256(dedupe_key.encode()).hexdigest()[:40]}@{domain}>"


def compose(
    booking: Booking,
    kind: str,
    recipient: Recipient,
    letterhead: Letterhead,
    *,
    now: datetime,
    dedupe_key: str,
    by_attendee: bool = False,
    changed: tuple[str, ...] = (),
    questions: Sequence[Mapping[str, Any]] = (),
) -> EmailMessage:
    """The email telling ``recipient`` about ``kind`` (an event name, or ``REMINDER``);
    ``by_attendee``: the attendee made the change from their manage link. The business's mail
    lists the booking's answers to ``questions`` (its event type's); an attendee's does not
    repeat them (they may be private, and the attendee gave them)."""
    # For a host it left, the booking is as good as cancelled: its invitation removes it.
    cancelled = booking.status == BookingStatus.CANCELLED or recipient.former_host
    when = describe_time(booking.start_at, booking.end_at, recipient.timezone)
    subject = f"{_LABELS[kind]}: {booking.title} — {when}"
    headlines = _ATTENDEE_HEADLINES if by_attendee and kind in _ATTENDEE_HEADLINES else _HEADLINES
    link = None if cancelled else recipient.manage_url
    # A meeting's link is shown as the way to join (not once cancelled: the meeting is gone).
    to_join = join_link(booking)
    if kind == "booking.updated" and "hosts" in changed:
        headline = _hosts_headline(booking, recipient)
    elif kind == "booking.updated":
        headline = _LOCATION_HEADLINES[to_join is not None][1 if recipient.is_owner else 0]
    else:
        headline = headlines[kind][1 if recipient.is_owner else 0]
    context = {
        "subject": subject,
        "headline": headline,
        "title": booking.title,
        "when": when,
        "location": None if to_join else booking.location,
        "join_url": None if cancelled else to_join,
        "description": booking.description,
        "attendees": ", ".join(a.name or a.email for a in booking.attendees),
        "reason": booking.cancellation_reason if cancelled else None,
        "uid": booking.uid,
        "has_ics": True,
        "ics_name": "invite.ics",
        "ics_hint": "removes it from your calendar" if cancelled else "adds it to your calendar",
        "sender_name": letterhead.sub_account_name,
        "manage_url": link,
        "answers": answer_lines(questions, booking.responses or {}) if recipient.is_owner else [],
    }
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = _from_header(letterhead)
    message["To"] = str(Address(display_name=recipient.name or "", addr_spec=recipient.email))
    message["Reply-To"] = letterhead.organizer.email
    message["Date"] = format_datetime(now)
    message["Message-ID"] = message_id(dedupe_key, letterhead.sender)
    message.set_content(MAIL_TEMPLATES.get_template("booking.txt").render(**context))
    html = MAIL_TEMPLATES.get_template("booking.html").render(**context)
    message.add_alternative(html, subtype="html")
    method = "CANCEL" if cancelled else "REQUEST"
    ics = booking_calendar(
        booking,
        now=now,
        method=method,
        organizer=letterhead.organizer,
        manage_url=link,
    )
    message.add_attachment(
        ics,
        maintype="text",
        subtype="calendar",
        filename="invite.ics",
        params={"method": method},
    )
    return message


def _hosts_headline(booking: Booking, recipient: Recipient) -> str:
    """What a booking moved to another host says, to whom."""
    names = ", ".join(host.name for host in (booking.host, *booking.co_hosts) if host)
    if recipient.former_host:
        return f"This booking is now with {names}: it is no longer yours."
    if recipient.is_owner:
        return f"This booking is now with {names}."
    return f"Your booking is now with {names}."


def describe_time(start: datetime, end: datetime, timezone: str) -> str:
    """``Monday 7 December 2026, 10:00–10:30 (America/New_York)``, in ``timezone``."""
    tz = zone(timezone)
    local_start, local_end = start.astimezone(tz), end.astimezone(tz)
    first = f"{local_start:%A} {local_start.day} {local_start:%B %Y}, {local_start:%H:%M}"
    if local_end.date() == local_start.date():
        return f"{first}–{local_end:%H:%M} ({timezone})"
    last = f"{local_end:%A} {local_end.day} {local_end:%B %Y}, {local_end:%H:%M}"
    return f"{first} – {last} ({timezone})"


def address(text: str) -> Address:
    """The address in ``text`` (``Name <user@host>`` or ``user@host``)."""
    header = HeaderRegistry()("From", text)
    assert isinstance(header, AddressHeader)  # the registry's class for From
    return header.addresses[0]


def _from_header(letterhead: Letterhead) -> str:
    sender = address(letterhead.sender)
    return str(Address(display_name=letterhead.sub_account_name, addr_spec=sender.addr_spec))


def ics_part(message: EmailMessage) -> bytes | None:
    """The invitation attached to ``message`` (to keep with the message)."""
    for part in message.iter_attachments():
        if part.get_content_type() == "text/calendar":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)  # a single part's payload, decoded
            return payload
    return None
