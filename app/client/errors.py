"""What the client raises: the API's error envelope (``statusCode``, ``message``) as one
exception type per status, so a caller can tell "pick another slot" from "get another key"
without parsing text."""

from __future__ import annotations

import re

_PERMISSION = re.compile(r"does not have '(\w+)' permission")


class CalendarApiError(Exception):
    """An error answer from the API."""

    def __init__(self, status_code: int, message: str, *, retry_after: float | None = None):
        super().__init__(f"{status_code} {message}")
        self.status_code = status_code
        self.message = message
        self.retry_after = retry_after


class InvalidRequest(CalendarApiError):
    """400: the request was refused as sent (a field, a time, a reused idempotency key)."""


class SlotUnavailable(InvalidRequest):
    """400: the time cannot be booked: taken by a booking, blocked, in a connected calendar's
    event, or outside the bookable hours. Another slot from ``availability`` may be."""


class AuthenticationFailed(CalendarApiError):
    """401: the key is missing, unknown, inactive, expired or not tied to a sub account."""


class PermissionDenied(CalendarApiError):
    """403: the key lacks the permission the operation needs (``permission``)."""

    @property
    def permission(self) -> str | None:
        found = _PERMISSION.search(self.message)
        return found.group(1) if found else None


class NotFound(CalendarApiError):
    """404: no such booking or event type for this key's calendar."""


class RateLimited(CalendarApiError):
    """429, still refused after the retries the client allows itself."""


class ServiceUnavailable(CalendarApiError):
    """503 (the service's database is away), still refused after the allowed retries."""


class CalendarUnreachable(Exception):
    """No answer at all (connection refused, reset or timed out) after the allowed retries."""


_BY_STATUS: dict[int, type[CalendarApiError]] = {
    401: AuthenticationFailed,
    403: PermissionDenied,
    404: NotFound,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_for(status_code: int, message: str, retry_after: float | None) -> CalendarApiError:
    """The exception for an error answer."""
    if status_code == 400:
        kind = SlotUnavailable if message.startswith("Time slot") else InvalidRequest
    else:
        kind = _BY_STATUS.get(status_code, CalendarApiError)
    return kind(status_code, message, retry_after=retry_after)
