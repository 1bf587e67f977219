"""The OpenAPI document's examples: requests that succeed against the demo workspace and the
answers they get, and every documented error with its exact message.

The demo workspace is what ``flask demo`` (``make run``) provisions on a fresh database: event
type 1, "Consultation" (30 minutes, 10 minutes' buffer after), Monday to Friday 09:00–17:00 in
New York, bookable 60 days ahead. Dates are computed when the server starts: the first Monday
at least a week ahead, so "Try it out" works for weeks after a start. Error messages come from
the constants the code answers with, so an example cannot drift from the answer;
``tests/api/test_openapi_examples.py`` sends the examples to a demo server and compares.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from app.errors import HTTP_MESSAGES
from app.models import Permission
from app.models.types import utcnow
from app.scheduling.timezones import format_utc, local_to_utc, zone
from app.services.accounts.api_keys import (
    EXPIRED_KEY,
    INVALID_KEY,
    NO_SUB_ACCOUNT,
    permission_missing,
)
from app.services.accounts.demo import DEMO_QUESTIONS
from app.services.availability.questions import responses_schema
from app.services.bookings.time_claims import CONFLICT_BOOKING, CONFLICT_EXTERNAL
from app.services.bookings.writes import ALREADY_CANCELLED
from app.services.common.errors import ErrorCode
from app.services.integrations.calendars.live_check import CalendarUnreachable
from app.validation import InstantField, describe_errors

DEMO_ZONE = zone("America/New_York")
DEMO_EVENT_TYPE_ID = 1
DEMO_MINUTES = 30


def first_monday_a_week_ahead(now: datetime) -> date:
    today = now.astimezone(DEMO_ZONE).date()
    return today + timedelta(days=7 + (7 - today.weekday()) % 7)


DAY = first_monday_a_week_ahead(utcnow())


def _at(hour: int, minute: int = 0) -> str:
    return format_utc(local_to_utc(DAY, time(hour, minute), DEMO_ZONE))


def _slot(hour: int, minute: int = 0) -> dict[str, str]:
    end = (datetime.combine(DAY, time(hour, minute)) + timedelta(minutes=DEMO_MINUTES)).time()
    return {"start": _at(hour, minute), "end": _at(end.hour, end.minute)}


START, END = _at(10), _at(10, 30)
MOVED_START, MOVED_END = _at(11), _at(11, 30)
CREATED_AT = format_utc(utcnow().replace(microsecond=0))

# Requests.
CREATE_BOOKING: dict[str, Any] = {
    "startTime": START,
    "endTime": END,
    "attendees": [{"email": "pat.lee@example.com", "name": "Pat Lee", "phone": "+1 212 555 0100"}],
    "metadata": {"source": "phone-agent", "callId": "c-2291"},
    "idempotencyKey": "call-c-2291",
    "responses": {"reason": "Check-up", "newPatient": True},
}
UPDATE_BOOKING = {"startTime": MOVED_START, "endTime": MOVED_END}
CANCEL_BOOKING = {"reason": "Patient called to cancel"}
CREATE_HOLD = {"startTime": START, "endTime": END, "ttlSeconds": 120}

# Answers.
ATTENDEE = {
    "id": 1,
    "email": "pat.lee@example.com",
    "name": "Pat Lee",
    "firstName": None,
    "lastName": None,
    "phone": "+1 212 555 0100",
    "timezone": "America/New_York",
    "isOrganizer": False,
    "createdAt": CREATED_AT,
    "updatedAt": CREATED_AT,
    "manageUrl": "https://calendar.example.com/manage/WzEsMF0.q7Vn0dX2c1mY3b8kFhT5LzR9wPe",
}
BOOKING_HOST = {"id": 1, "name": "Demo Dental", "email": None}
BOOKING = {
    "id": 1,
    "uid": "mR2c8q7LkQ0bN1xXyZ4tVg",
    "startTime": START,
    "endTime": END,
    "status": "pending",
    "title": "Consultation with Pat Lee",
    "description": None,
    "location": None,
    "timezone": "America/New_York",
    "metadata": {"source": "phone-agent", "callId": "c-2291"},
    "attendees": [ATTENDEE],
    "responses": {"reason": "Check-up", "newPatient": True},
    "confirmedAt": None,
    "cancelledAt": None,
    "completedAt": None,
    "hosts": [BOOKING_HOST],
    "assignmentReason": "single",
}
BOOKING_LIST = {"bookings": [BOOKING], "total": 1, "limit": 50, "offset": 0}
AVAILABILITY: list[dict[str, Any]] = [
    {
        "date": DAY.isoformat(),
        "slots": [_slot(hour, minute) for hour in range(9, 17) for minute in (0, 30)],
    }
]
UPDATED: dict[str, Any] = {
    "id": 1,
    "startTime": MOVED_START,
    "endTime": MOVED_END,
    "status": "pending",
    "title": "Consultation with Pat Lee",
    "description": None,
    "timezone": "America/New_York",
    "attendees": [
        {key: ATTENDEE[key] for key in ("id", "email", "name", "createdAt", "updatedAt")}
    ],
}
CANCELLATION = {
    "id": 1,
    "status": "cancelled",
    "cancelledAt": CREATED_AT,
    "cancellationReason": "Patient called to cancel",
}
HOLD = {
    "id": 1,
    "eventTypeId": DEMO_EVENT_TYPE_ID,
    "startTime": START,
    "endTime": END,
    "expiresAt": CREATED_AT,
    "holdToken": "hold_3q2Vw8mJcKpX0aZr9tYbLsEe4uNf",
}
RELEASED_HOLD = {"id": 1, "status": "released", "releasedAt": CREATED_AT}
EVENT_TYPE_HOST = {"id": 1, "name": "Demo Dental"}


def _event_type(**own: Any) -> dict[str, Any]:
    """A demo event type as the listing shows it."""
    return {
        "id": DEMO_EVENT_TYPE_ID,
        "name": "Consultation",
        "duration": DEMO_MINUTES,
        "slotInterval": DEMO_MINUTES,
        "timezone": "America/New_York",
        "locationKind": "in_person",
        "location": None,
        "seats": 1,
        "minimumNoticeMinutes": 0,
        "bookingHorizonDays": 60,
        "assignment": "single",
        "hosts": [EVENT_TYPE_HOST],
        "questions": responses_schema(DEMO_QUESTIONS["Consultation"]),
        **own,
    }


EVENT_TYPE = _event_type()
EVENT_TYPES = [
    _event_type(
        id=DEMO_EVENT_TYPE_ID + 1,
        name="Cleaning",
        duration=60,
        questions=responses_schema(DEMO_QUESTIONS["Cleaning"]),
    ),
    EVENT_TYPE,
]


# Errors.
def error(status: int, message: str, code: ErrorCode, **extra: Any) -> dict[str, Any]:
    return {"statusCode": status, "message": message, "code": str(code), **extra}


def named(summary: str, value: Any) -> dict[str, Any]:
    return {"summary": summary, "value": value}


UNAUTHENTICATED = {
    "invalidKey": named(
        "Missing, unknown or deactivated key", error(401, INVALID_KEY, ErrorCode.INVALID_API_KEY)
    ),
    "expiredKey": named("Expired key", error(401, EXPIRED_KEY, ErrorCode.API_KEY_EXPIRED)),
    "noSubAccount": named(
        "A key without a sub account", error(401, NO_SUB_ACCOUNT, ErrorCode.NO_SUB_ACCOUNT)
    ),
}


def forbidden(permission: Permission) -> dict[str, Any]:
    return {
        "missingPermission": named(
            "The key lacks the permission",
            error(403, permission_missing(permission), ErrorCode.PERMISSION_DENIED),
        )
    }


RATE_LIMITED = {
    "rateLimited": named(
        "Over the key's limit (the headers say when to retry)",
        error(429, "Rate limit exceeded: 60 requests per minute", ErrorCode.RATE_LIMITED),
    )
}
TOO_LARGE = {
    "tooLarge": named(
        "A body over 1 MiB",
        error(413, HTTP_MESSAGES[413], ErrorCode.PAYLOAD_TOO_LARGE),
    )
}


def not_found(message: str) -> dict[str, Any]:
    return not_found_as("notFound", message)


def not_found_as(name: str, message: str) -> dict[str, Any]:
    return {name: named(message, error(404, message, ErrorCode.NOT_FOUND))}


def unparsable(name: str, summary: str, field: str) -> dict[str, Any]:
    """A 400 for an instant ``field`` that does not parse, worded as the envelope words it."""
    invalid = InstantField.default_error_messages["invalid"]
    assert isinstance(invalid, str)  # InstantField's own message, a string
    problems = {field: [invalid]}
    return {
        name: named(
            summary,
            error(400, describe_errors(problems), ErrorCode.INVALID_REQUEST, errors=problems),
        )
    }


INVALID_FIELD = unparsable("invalidField", "A field that does not parse", "startTime")
SLOT_TAKEN = {
    "slotTaken": named(
        "The time is taken: the nearest open slots come with the refusal",
        error(
            400,
            CONFLICT_BOOKING,
            ErrorCode.SLOT_TAKEN,
            # 09:30 and 10:30 would overlap the 10:00 booking's 10 minutes' buffer.
            suggestedSlots=[_slot(9), _slot(11), _slot(11, 30), _slot(12), _slot(12, 30)],
        ),
    )
}
EXTERNAL_BUSY = {
    "externalBusy": named(
        "An event in a connected calendar, as last read or as the calendar answered when asked"
        " at this write",
        error(
            400,
            CONFLICT_EXTERNAL,
            ErrorCode.EXTERNAL_BUSY,
            suggestedSlots=[_slot(9), _slot(11), _slot(11, 30), _slot(12), _slot(12, 30)],
        ),
    )
}
WRITE_REFUSED = {**INVALID_FIELD, **SLOT_TAKEN, **EXTERNAL_BUSY}
CALENDAR_UNREACHABLE = {
    "calendarUnreachable": named(
        "Only where the operator set CALENDAR_LIVE_CHECK=strict: a connected calendar did not"
        " answer about the time in time (nothing was written; retry after Retry-After)",
        error(503, CalendarUnreachable(["Google"]).message, ErrorCode.CALENDAR_UNREACHABLE),
    )
}
INVALID_QUERY = unparsable("invalidParameter", "A parameter that does not parse", "startDate")
CANCEL_REFUSED = {
    "notActive": named(
        "Cancelled already",
        error(400, ALREADY_CANCELLED, ErrorCode.BOOKING_NOT_ACTIVE),
    )
}

# Answers from the HTTP server, before the app (gunicorn's limits; HTML, not the envelope).
SERVER_LIMITS = {
    414: "Request line over 8,190 bytes: answered by the HTTP server (gunicorn) as text/html, "
    "not in the JSON envelope",
    431: "More than 100 header fields, or one over 8,190 bytes: answered by the HTTP server "
    "(gunicorn) as text/html (some versions say 400), not in the JSON envelope",
}


def by_schema() -> dict[str, Any]:
    """An example of every component schema of the document, by name."""
    return {
        "Slot": AVAILABILITY[0]["slots"][0],
        "Error": SLOT_TAKEN["slotTaken"]["value"],
        "AvailabilityDay": AVAILABILITY[0],
        "Attendee": ATTENDEE,
        "Booking": BOOKING,
        "BookingHost": BOOKING_HOST,
        "BookingList": BOOKING_LIST,
        "CancelBooking": CANCEL_BOOKING,
        "Cancellation": CANCELLATION,
        "AttendeeInput": CREATE_BOOKING["attendees"][0],
        "CreateBooking": CREATE_BOOKING,
        "UpdateBooking": UPDATE_BOOKING,
        "AttendeeBrief": UPDATED["attendees"][0],
        "BookingUpdateResult": UPDATED,
        "CreateHold": CREATE_HOLD,
        "Hold": HOLD,
        "ReleasedHold": RELEASED_HOLD,
        "EventType": EVENT_TYPE,
        "EventTypeHost": EVENT_TYPE_HOST,
    }
