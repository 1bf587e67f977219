"""A typed Python client of the Calendar Booking API (``CalendarClient``), built on httpx. Its
modules use nothing of the service but talk to it over HTTP only, as any agent would."""

from app.client.client import CalendarClient, KeptAnswers
from app.client.errors import (
    AuthenticationFailed,
    CalendarApiError,
    CalendarUnreachable,
    InvalidRequest,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServiceUnavailable,
    SlotUnavailable,
)
from app.client.models import (
    Attendee,
    AvailabilityDay,
    Booking,
    BookingPage,
    Cancellation,
    EventType,
    EventTypeHost,
    Hold,
    NewAttendee,
    ReleasedHold,
    Slot,
)

__all__ = [
    "Attendee",
    "AuthenticationFailed",
    "AvailabilityDay",
    "Booking",
    "BookingPage",
    "CalendarApiError",
    "CalendarClient",
    "CalendarUnreachable",
    "Cancellation",
    "EventType",
    "EventTypeHost",
    "Hold",
    "InvalidRequest",
    "KeptAnswers",
    "NewAttendee",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "ReleasedHold",
    "ServiceUnavailable",
    "Slot",
    "SlotUnavailable",
]
