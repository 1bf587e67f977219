"""Failures a use case reports. They carry the HTTP status they mean for the API so the one
error handler can answer them; services themselves know nothing about HTTP requests.

Each failure also carries an ``ErrorCode``: the stable, machine-readable name of its cause
that the API's error envelope sends as ``code``, so an agent can act on a failure without
parsing its ``message`` (which stays exactly as the spec and DESIGN.md word it).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from app.scheduling.intervals import Interval


class ErrorCode(StrEnum):
    """Every ``code`` the API answers with; their statuses and causes are
    ``app.api.error_codes.ERROR_CODES``."""

    INVALID_REQUEST = "invalid_request"
    INVALID_TIME_RANGE = "invalid_time_range"
    INVALID_RESPONSES = "invalid_responses"
    SLOT_TAKEN = "slot_taken"
    LIMIT_REACHED = "limit_reached"
    SEATS_FULL = "seats_full"
    SLOT_HELD = "slot_held"
    BLOCKED_TIME = "blocked_time"
    EXTERNAL_BUSY = "external_busy"
    HOST_UNAVAILABLE = "host_unavailable"
    CALENDAR_UNREACHABLE = "calendar_unreachable"
    OUTSIDE_HOURS = "outside_hours"
    MINIMUM_NOTICE = "minimum_notice"
    BEYOND_HORIZON = "beyond_horizon"
    IDEMPOTENCY_MISMATCH = "idempotency_mismatch"
    BOOKING_NOT_ACTIVE = "booking_not_active"
    INVALID_API_KEY = "invalid_api_key"
    API_KEY_EXPIRED = "api_key_expired"
    NO_SUB_ACCOUNT = "no_sub_account"
    PERMISSION_DENIED = "permission_denied"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    RATE_LIMITED = "rate_limited"
    SERVICE_UNAVAILABLE = "service_unavailable"
    INTERNAL_ERROR = "internal_error"


class ServiceError(Exception):
    status_code = 400
    message = "Invalid request"
    code = ErrorCode.INVALID_REQUEST

    def __init__(
        self,
        message: str | None = None,
        *,
        errors: dict[str, list[str]] | None = None,
        code: ErrorCode | None = None,
    ):
        super().__init__(message or self.message)
        self.message = message or self.message
        self.errors = errors
        if code is not None:
            self.code = code


class InvalidRequest(ServiceError):
    status_code = 400


class TimeUnavailable(InvalidRequest):
    """A write refused for its time (taken, held, blocked, external, outside hours, notice,
    horizon): ``suggested_slots`` are the open slots nearest to the time asked for, checked
    under the same calendar lock as the refusal, so each was open when it was given."""

    def __init__(
        self, message: str, code: ErrorCode, suggested_slots: Sequence[Interval] = ()
    ) -> None:
        super().__init__(message, code=code)
        self.suggested_slots = list(suggested_slots)


class NotFound(ServiceError):
    status_code = 404
    message = "Not found"
    code = ErrorCode.NOT_FOUND


class BookingNotFound(NotFound):
    message = "Booking not found"


class EventTypeNotFound(NotFound):
    message = "Event type not found"


class HostNotFound(NotFound):
    message = "Host not found"


class HoldNotFound(NotFound):
    message = "Hold not found"


class AuthenticationFailed(ServiceError):
    status_code = 401
    message = "Invalid or inactive API key"
    code = ErrorCode.INVALID_API_KEY


class PermissionDenied(ServiceError):
    status_code = 403
    code = ErrorCode.PERMISSION_DENIED
