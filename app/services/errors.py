"""Failures a use case reports. They carry the HTTP status they mean for the API so the one
error handler can answer them; services themselves know nothing about HTTP requests."""

from __future__ import annotations


class ServiceError(Exception):
    status_code = 400
    message = "Invalid request"

    def __init__(self, message: str | None = None, *, errors: dict[str, list[str]] | None = None):
        super().__init__(message or self.message)
        self.message = message or self.message
        self.errors = errors


class InvalidRequest(ServiceError):
    status_code = 400


class NotFound(ServiceError):
    status_code = 404
    message = "Not found"


class BookingNotFound(NotFound):
    message = "Booking not found"


class EventTypeNotFound(NotFound):
    message = "Event type not found"


class AuthenticationFailed(ServiceError):
    status_code = 401
    message = "Invalid or inactive API key"


class PermissionDenied(ServiceError):
    status_code = 403
