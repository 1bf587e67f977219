"""Who hears about a booking, and when: the outbox handler for booking events, and the reminders.

- **Booking events** (``booking.created``, ``rescheduled``, ``confirmed``, ``cancelled``, and
  ``booking.updated`` when the location changed: the worker has the link of the booking's
  Google Meet or Teams meeting): with the sub account's ``notifyOnBooking`` on, each attendee
  and the sub account's ``notificationEmail`` get one message. Other events (an edit of the
  title, completion, no-show) send nothing.
- **Reminders** (``booking.reminder`` events, which ``app.services.bookings.reminders`` writes
  when one is due): each attendee gets one when the reminder's channels name
  ``attendeeEmail``, and the sub account's ``notificationEmail`` one when they name
  ``businessEmail``, whatever ``notifyOnBooking`` says (the reminder list is its own choice).

Every message is recorded (``mail_messages``) under a key that says what it is about, and a
message whose key is recorded is never sent again: a retried delivery sends only what it had
not sent. A message is recorded right after the SMTP server took it, in a transaction of its
own; a crash between the two sends it once more (same Message-ID), the documented
at-least-once. With no SMTP server configured, a message is kept (``status = kept``) instead
of sent, for ``flask outbox`` and the dashboard to show.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.config import settings as configured
from app.extensions import db
from app.models import (
    Booking,
    CalendarSettings,
    MailMessage,
    MailStatus,
    OutboxEvent,
    ReminderChannel,
    SubAccount,
)
from app.services.common.manage_links import manage_url
from app.services.integrations.event_schema import booking_from_snapshot
from app.services.integrations.events import Actor, BookingEventKind, reminder_channels
from app.services.integrations.ical import Organizer
from app.services.integrations.notifications.mail_log import keep_regardless, logged
from app.services.integrations.notifications.mailer import MailNotSent, send_mail, smtp_settings
from app.services.integrations.notifications.messages import (
    REMINDER,
    Letterhead,
    Recipient,
    address,
    compose,
    ics_part,
)
from app.services.integrations.outbox import Delivery, DeliveryFailed

log = logging.getLogger(__name__)

HANDLER_NAME = "notifications"
NOTIFIED_KINDS = frozenset(
    {"booking.created", "booking.rescheduled", "booking.confirmed", "booking.cancelled"}
)
# The kinds the handler takes: those mailed, an update (mailed when it changed what the
# attendees see: ``notified``) and a reminder.
KINDS = NOTIFIED_KINDS | {str(BookingEventKind.UPDATED), str(REMINDER)}


@dataclass(frozen=True)
class _Letter:
    dedupe_key: str
    kind: str
    recipient: str
    message: EmailMessage
    sub_account_id: int
    booking_id: int
    event_id: int | None


# A ``booking.updated`` that changed one of these is mailed too (the place to meet, or the link
# to join by; who the booking is with).
NOTIFIED_CHANGES = frozenset({"location", "hosts"})


def notified(kind: str, changed: tuple[str, ...]) -> bool:
    """Whether an event of ``kind`` that changed ``changed`` is mailed."""
    if kind == BookingEventKind.UPDATED:
        return bool(NOTIFIED_CHANGES & set(changed))
    return kind in NOTIFIED_KINDS or kind == REMINDER


def notify_delivery(delivery: Delivery, now: datetime) -> None:
    """Outbox handler: tell the attendees and the calendar's owner about a booking event."""
    if not notified(delivery.kind, delivery.changed):
        return
    with Session(db.engine) as session:
        current = session.get(Booking, delivery.booking_id)
        if current is None:
            return
        # The booking as this event left it: a message that goes out late (a retry, a backlog)
        # tells of that moment, not of a later change that has its own message.
        if delivery.snapshot:
            booking = booking_from_snapshot(delivery.snapshot, delivery.sub_account_id)
            booking.location_kind = current.location_kind  # a booking's kind never changes
        else:
            booking = current
        settings = session.get(CalendarSettings, booking.sub_account_id)
        assert settings is not None  # every sub account has its settings
        if delivery.kind == REMINDER:
            channels = set(reminder_channels(session, delivery.event_id))
            to_attendees = ReminderChannel.ATTENDEE_EMAIL in channels
            to_owner = ReminderChannel.BUSINESS_EMAIL in channels
        else:
            to_attendees = to_owner = settings.notify_on_booking
        recipients = _attendees(booking, current) if to_attendees else []
        if to_owner:
            recipients += _business(settings, current, booking.timezone)
            if "hosts" in delivery.changed:  # a booking moved to another host: tell both
                recipients += _former_hosts(session, delivery, current, booking.timezone)
        letters = _unsent_letters(
            session,
            booking,
            delivery.kind,
            recipients,
            _letterhead(session, booking.sub_account_id, settings),
            now,
            key=lambda email: f"event:{delivery.event_id}:{email}",
            event_id=delivery.event_id,
            by_attendee=delivery.actor == Actor.ATTENDEE,
            changed=delivery.changed,
            questions=current.event_type.questions,
        )
    failures = _send_all(letters, now)
    if failures:
        raise DeliveryFailed("; ".join(failures))


def _business(settings: CalendarSettings, current: Booking, timezone: str) -> list[Recipient]:
    """Who gets the business's mail about a booking: the sub account's notification address,
    and each host the booking is made with who has an email of their own (a dentist hears of
    their own appointments), each address once."""
    found: dict[str, Recipient] = {}
    if settings.notification_email:
        found[settings.notification_email.lower()] = Recipient(
            settings.notification_email, None, timezone, is_owner=True
        )
    for host in current.hosts:
        if host.email and host.email.lower() not in found:
            found[host.email.lower()] = Recipient(
                host.email, host.name, host.timezone or timezone, is_owner=True
            )
    return list(found.values())


def _former_hosts(
    session: Session, delivery: Delivery, current: Booking, timezone: str
) -> list[Recipient]:
    """The hosts the booking was with before this event (its previous event's snapshot, when
    kept) and is no longer, with an email: told it is no longer theirs."""
    before = session.scalar(
        select(OutboxEvent.snapshot)
        .where(OutboxEvent.booking_id == delivery.booking_id, OutboxEvent.id < delivery.event_id)
        .order_by(OutboxEvent.id.desc())
        .limit(1)
    )
    now_with = {host.id for host in current.hosts}
    return [
        Recipient(host["email"], host["name"], timezone, is_owner=True, former_host=True)
        for host in (before or {}).get("booking", {}).get("hosts") or []
        if host["id"] not in now_with and host.get("email")
    ]


def _attendees(shown: Booking, current: Booking) -> list[Recipient]:
    """The attendees of ``shown`` (the booking as the event left it), each with their manage
    link as it is now (``current``: the stored booking), so a late message carries a link that
    still works; an attendee no longer on the booking gets none."""
    links = {a.email: manage_url(a) for a in current.attendees}
    return [
        Recipient(a.email, a.name, a.timezone, manage_url=links.get(a.email))
        for a in shown.attendees
    ]


def _letterhead(session: Session, sub_account_id: int, settings: CalendarSettings) -> Letterhead:
    sender = configured().mail_from
    sub_account = session.get(SubAccount, sub_account_id)
    assert sub_account is not None  # the booking's (a foreign key)
    name = sub_account.name
    organizer_email = settings.notification_email or address(sender).addr_spec
    return Letterhead(
        sender=sender, sub_account_name=name, organizer=Organizer(organizer_email, name)
    )


def _unsent_letters(
    session: Session,
    booking: Booking,
    kind: str,
    recipients: list[Recipient],
    letterhead: Letterhead,
    now: datetime,
    *,
    key: Callable[[str], str],
    event_id: int | None,
    by_attendee: bool = False,
    changed: tuple[str, ...] = (),
    questions: Sequence[Mapping[str, Any]] = (),
) -> list[_Letter]:
    """The messages about ``booking`` for those of ``recipients`` whose message (its key made by
    ``key`` from their address) is not recorded as sent."""
    keys = {r.email: key(r.email) for r in recipients}
    sent = (
        set(
            session.scalars(
                select(MailMessage.dedupe_key).where(
                    MailMessage.dedupe_key.in_(list(keys.values()))
                )
            )
        )
        if keys
        else set()
    )
    return [
        _Letter(
            keys[r.email],
            kind,
            r.email,
            compose(
                booking,
                kind,
                r,
                letterhead,
                now=now,
                dedupe_key=keys[r.email],
                by_attendee=by_attendee,
                changed=changed,
                questions=questions,
            ),
            booking.sub_account_id,
            booking.id,
            event_id,
        )
        for r in recipients
        if keys[r.email] not in sent
    ]


def _send_all(letters: list[_Letter], now: datetime) -> list[str]:
    """Send (or keep) each letter and record it; returns what failed, as messages."""
    settings = smtp_settings(configured().smtp_url)
    failures = []
    for letter in letters:
        try:
            status = send_mail(letter.message, settings)
        except MailNotSent as err:
            log.warning("mail to %s not sent: %s", letter.recipient, err)
            failures.append(f"{letter.recipient}: {err}")
            continue
        _record(letter, status, now)
    return failures


def _record(letter: _Letter, status: MailStatus, now: datetime) -> None:
    """Keep the letter in the mail log, whatever becomes of the handler's transaction."""
    ics = ics_part(letter.message)
    keep_regardless(
        logged(
            letter.message,
            dedupe_key=letter.dedupe_key,
            sub_account_id=letter.sub_account_id,
            booking_id=letter.booking_id,
            event_id=letter.event_id,
            kind=letter.kind,
            recipient=letter.recipient,
            ics=ics.decode() if ics else None,
            status=status,
            created_at=now,
        )
    )
