"""The booking events' own schema: what an outbox event stores of its booking, and the
``data.booking`` of a webhook payload.

It is defined here, field by field, and not borrowed from the API's ``BookingSchema``
(``app.representations``): stored events and webhook receivers must not change shape when the
API does. Version 1 has exactly the fields the API's Booking had when events got their own
schema, so nothing a receiver sees changed then. Version 2 adds each attendee's ``manageUrl``
(their own link to see, cancel or move the booking, ``app.services.common.manage_links``).
Version 3 adds who the booking is with: ``hosts`` (each ``id``, ``name``, ``email``) and
``assignmentReason``, as the API's Booking shows them. Version 4 adds ``responses``: the
answers to the event type's questions, by question key (``{}`` when none).
The rule: a published version never changes; a change (a field added, removed, renamed or
re-typed) is a new version, written by new events and read beside the old ones. Documented in
docs/operations.md ("The event schema").

**The stored snapshot** (``outbox_events.snapshot``, JSON)::

    {"schemaVersion": 4, "booking": {...version 4...}, "sequence": 3,
     "cancellationReason": null, "createdAt": "…Z", "updatedAt": "…Z"}

``sequence``, ``cancellationReason``, ``createdAt`` and ``updatedAt`` are for the messages
about the booking (mail, iCalendar), not for webhooks.

**Events stored before the version existed** (rows written by the code that dumped the API's
``BookingSchema``) have no ``schemaVersion``: they are version 1, since version 1 is that very
field set. They are read as they are; nothing is migrated. A snapshot of a version this code
does not know (written by a newer deployment) is refused with ``UnknownEventSchema`` rather
than guessed at: the outbox retries the handler, and a worker of the new code takes it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.models import Attendee, Booking, Host
from app.scheduling.timezones import format_utc
from app.services.common.manage_links import manage_url

EVENT_SCHEMA_VERSION = 4
VERSION_KEY = "schemaVersion"
READABLE_VERSIONS = frozenset({1, 2, 3, 4})


class UnknownEventSchema(ValueError):
    """A stored snapshot of a schema version this code cannot read."""


def booking_data(booking: Booking) -> dict[str, Any]:
    """``booking`` in the event schema's current version (4): every field always present,
    absent values as ``null``, instants as UTC ``YYYY-MM-DDTHH:MM:SSZ``."""
    return {
        "id": _optional(int, booking.id),
        "uid": _optional(str, booking.uid),
        "startTime": _instant(booking.start_at),
        "endTime": _instant(booking.end_at),
        "status": _optional(str, booking.status),
        "title": _optional(str, booking.title),
        "description": _optional(str, booking.description),
        "location": _optional(str, booking.location),
        "timezone": _optional(str, booking.timezone),
        "metadata": None if booking.meta is None else {str(k): v for k, v in booking.meta.items()},
        "attendees": (
            None if booking.attendees is None else [_attendee(a) for a in booking.attendees]
        ),
        "confirmedAt": _instant(booking.confirmed_at),
        "cancelledAt": _instant(booking.cancelled_at),
        "completedAt": _instant(booking.completed_at),
        "hosts": [
            {"id": host.id, "name": host.name, "email": host.email} for host in booking.hosts
        ],
        "assignmentReason": _optional(str, booking.assignment_reason),
        "responses": dict(booking.responses or {}),
    }


def _attendee(attendee: Attendee) -> dict[str, Any]:
    return {
        "id": _optional(int, attendee.id),
        "email": _optional(str, attendee.email),
        "name": _optional(str, attendee.name),
        "firstName": _optional(str, attendee.first_name),
        "lastName": _optional(str, attendee.last_name),
        "phone": _optional(str, attendee.phone),
        "timezone": _optional(str, attendee.timezone),
        "isOrganizer": _optional(bool, attendee.is_organizer),
        "createdAt": _instant(attendee.created_at),
        "updatedAt": _instant(attendee.updated_at),
        "manageUrl": manage_url(attendee),
    }


def _optional(convert: Any, value: Any) -> Any:
    return None if value is None else convert(value)


def _instant(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)


def booking_snapshot(booking: Booking) -> dict[str, Any]:
    """What an event stores of its booking: the booking in the current version, and what the
    messages about it need besides (its iCalendar sequence, the cancellation reason, when it
    was made and last changed)."""
    return {
        VERSION_KEY: EVENT_SCHEMA_VERSION,
        "booking": booking_data(booking),
        "sequence": booking.sequence,
        "cancellationReason": booking.cancellation_reason,
        "createdAt": format_utc(booking.created_at),
        "updatedAt": format_utc(booking.updated_at),
    }


def snapshot_version(snapshot: dict[str, Any]) -> int:
    """The schema version of a stored snapshot; absent means 1 (written before versions were
    recorded, with version 1's fields). Raises ``UnknownEventSchema`` for a version this code
    cannot read."""
    version = snapshot.get(VERSION_KEY, 1)
    if version not in READABLE_VERSIONS:
        raise UnknownEventSchema(f"event schema version {version!r} is not readable here")
    return version


def snapshot_booking(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The booking of a stored snapshot as webhooks carry it (``data.booking``): as it was
    stored, never re-rendered, so a resend a month later sends the same bytes."""
    snapshot_version(snapshot)
    return snapshot["booking"]


def booking_from_snapshot(snapshot: dict[str, Any], sub_account_id: int) -> Booking:
    """A detached ``Booking`` (never added to a session) of sub account ``sub_account_id`` as
    ``snapshot`` recorded it, for building the messages about that moment
    (``app.services.integrations.ical``, the emails)."""
    snapshot_version(snapshot)
    shown = snapshot["booking"]
    booking = Booking(
        id=shown["id"],
        sub_account_id=sub_account_id,
        uid=shown["uid"],
        status=shown["status"],
        sequence=snapshot["sequence"],
        title=shown["title"],
        description=shown["description"],
        location=shown["location"],
        timezone=shown["timezone"],
        meta=shown["metadata"],
        responses=shown.get("responses") or {},  # version 4
        start_at=_parse_instant(shown["startTime"]),
        end_at=_parse_instant(shown["endTime"]),
        cancellation_reason=snapshot["cancellationReason"],
        created_at=_parse_instant(snapshot["createdAt"]),
        updated_at=_parse_instant(snapshot["updatedAt"]),
    )
    booking.attendees = [
        Attendee(
            email=a["email"],
            name=a["name"],
            first_name=a["firstName"],
            last_name=a["lastName"],
            phone=a["phone"],
            timezone=a["timezone"],
            is_organizer=a["isOrganizer"],
        )
        for a in shown["attendees"]
    ]
    # Version 3 names its hosts (never added to a session, as the booking is not); earlier
    # versions were made with a sub account's one calendar, its first host.
    hosts = shown.get("hosts") or []
    if hosts:
        booking.host = Host(
            id=hosts[0]["id"],
            sub_account_id=sub_account_id,
            name=hosts[0]["name"],
            email=hosts[0]["email"],
        )
        booking.host_id = hosts[0]["id"]
    return booking


def _parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text)
