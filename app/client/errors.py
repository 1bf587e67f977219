"""What the client raises: the API's error envelope (``statusCode``, ``message``, ``code``) as
one exception type per status, so a caller can tell "pick another slot" from "get another key"
without parsing text. ``code`` is the envelope's stable name of the cause (``slot_taken``,
``api_key_expired``, …; ``None`` from a server that sends none); a write refused for its time
also carries the open slots the server suggests instead (``SlotUnavailable.suggested_slots``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from app.client.models import Slot

_PERMISSION = re.compile(r"does not have '(\w+)' permission")

# The codes of a create, move or hold refused for its time: these come with suggestedSlots.
TIME_UNAVAILABLE_CODES = frozenset(
    {
        "slot_taken",
        "slot_held",
        "blocked_time",
        "external_busy",
        "outside_hours",
        "minimum_notice",
        "beyond_horizon",
        "limit_reached",
        "seats_full",
    }
)


class CalendarApiError(Exception):
    """An error answer from the API: ``status_code``, ``message`` and ``code`` (the stable
    cause, e.g. ``invalid_time_range``; ``None`` when the answer has none)."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        retry_after: float | None = None,
        code: str | None = None,
    ):
        super().__init__(f"{status_code} {message}" + (f" ({code})" if code else ""))
        self.status_code = status_code
        self.message = message
        self.retry_after = retry_after
        self.code = code


class InvalidRequest(CalendarApiError):
    """400: the request was refused as sent (a field, a time, a reused idempotency key)."""


class SlotUnavailable(InvalidRequest):
    """400: the time cannot be booked or held: taken by a booking (``code`` ``slot_taken``),
    held for another booking (``slot_held``), blocked (``blocked_time``), in a connected
    calendar's event (``external_busy``), outside the bookable hours (``outside_hours``),
    within the minimum notice (``minimum_notice``), beyond the horizon (``beyond_horizon``), or
    on a day, week or month already at a cap (``limit_reached``), or in a slot whose seats are
    all taken (``seats_full``).

    ``suggested_slots``: up to five open slots of the same event type and length nearest to
    the time asked for (the same day first), open when the answer was given; empty when none
    is, or when the server sends none."""

    def __init__(self, *args: Any, suggested_slots: Sequence[Slot] = (), **kwargs: Any):
        # The other arguments are ``CalendarApiError``'s.
        super().__init__(*args, **kwargs)
        self.suggested_slots = list(suggested_slots)


class AuthenticationFailed(CalendarApiError):
    """401: the key is missing, unknown, inactive (``code`` ``invalid_api_key``), expired
    (``api_key_expired``) or not tied to a sub account (``no_sub_account``)."""


class PermissionDenied(CalendarApiError):
    """403: the key lacks the permission the operation needs (``permission``)."""

    @property
    def permission(self) -> str | None:
        found = _PERMISSION.search(self.message)
        return found.group(1) if found else None


class NotFound(CalendarApiError):
    """404: no such booking, event type or live hold for this key's calendar."""


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


def error_for(
    status_code: int,
    message: str,
    retry_after: float | None,
    *,
    code: str | None = None,
    suggested_slots: Sequence[Slot] = (),
) -> CalendarApiError:
    """The exception for an error answer. A 400 is a ``SlotUnavailable`` by its ``code``; from
    a server that sends no code, by its message (the conflicts' "Time slot …")."""
    if status_code == 400:
        if code is not None:
            unavailable = code in TIME_UNAVAILABLE_CODES
        else:
            unavailable = message.startswith("Time slot")
        if unavailable:
            return SlotUnavailable(
                status_code,
                message,
                retry_after=retry_after,
                code=code,
                suggested_slots=suggested_slots,
            )
        kind: type[CalendarApiError] = InvalidRequest
    else:
        kind = _BY_STATUS.get(status_code, CalendarApiError)
    return kind(status_code, message, retry_after=retry_after, code=code)
