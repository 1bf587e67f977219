"""One error envelope for everything the app can answer: ``{"statusCode", "message", "code"}``
plus, for validation failures, ``errors`` keyed by field path, and for a write refused for its
time, ``suggestedSlots``. ``code`` is the stable name of the cause (``ErrorCode``). Handlers
never send exception text to the client; unexpected failures are logged with their traceback
and answered with a generic 500."""

from __future__ import annotations

from typing import Any

import psycopg
from flask import Flask, current_app, g, jsonify
from flask.typing import ResponseReturnValue
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException, InternalServerError

from app.representations import SlotSchema
from app.services.common.errors import ErrorCode, ServiceError, TimeUnavailable
from app.validation import describe_errors, flatten_errors

# Short, stable messages instead of werkzeug's HTML-minded descriptions.
HTTP_MESSAGES = {
    400: "Invalid request",
    401: "Authentication failed",
    403: "Permission denied",
    404: "Not found",
    405: "Method not allowed",
    413: "Request body too large (limit: 1 MiB)",
    415: "Unsupported media type: send application/json",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service temporarily unavailable: the database is not answering; retry shortly",
}

# The code of an answer that did not come from a service's own failure.
HTTP_CODES = {
    400: ErrorCode.INVALID_REQUEST,
    401: ErrorCode.INVALID_API_KEY,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    429: ErrorCode.RATE_LIMITED,
    500: ErrorCode.INTERNAL_ERROR,
    503: ErrorCode.SERVICE_UNAVAILABLE,
}


def code_for_status(status: int) -> ErrorCode:
    """The code of a status without a cause of its own; any other 4xx is an invalid request,
    any other 5xx an internal error."""
    if status in HTTP_CODES:
        return HTTP_CODES[status]
    return ErrorCode.INTERNAL_ERROR if status >= 500 else ErrorCode.INVALID_REQUEST


# Seconds a client should wait before retrying a 503: the service reconnects by itself within
# a second of the database coming back.
DATABASE_RETRY_AFTER = "1"

# Response headers worth keeping from a werkzeug exception.
_PASSED_HEADERS = ("Allow", "Retry-After")


def envelope(
    status: int,
    message: str,
    errors: dict[str, list[str]] | None = None,
    headers: dict[str, str] | None = None,
    *,
    code: ErrorCode | None = None,
    extra: dict[str, Any] | None = None,
) -> ResponseReturnValue:
    body: dict[str, Any] = {
        "statusCode": status,
        "message": message,
        "code": str(code or code_for_status(status)),
    }
    if errors:
        body["errors"] = errors
    if extra:
        body.update(extra)
    return jsonify(body), status, headers or {}


def handle_http_exception(error: HTTPException) -> ResponseReturnValue:
    status = error.code or 500
    if isinstance(error, InternalServerError):
        # The traceback was already logged by Flask; the client learns nothing about it.
        return envelope(500, HTTP_MESSAGES[500])
    headers = {k: v for k, v in error.get_headers() if k in _PASSED_HEADERS}
    data = getattr(error, "data", None) or {}
    headers.update(data.get("headers") or {})
    messages = data.get("errors") or data.get("messages")
    if messages:
        flat = flatten_errors(_drop_location(messages))
        return envelope(status, describe_errors(flat), flat, headers)
    message = data.get("message") or HTTP_MESSAGES.get(status) or error.name
    return envelope(status, message, None, headers)


def handle_service_error(error: ServiceError) -> ResponseReturnValue:
    extra = None
    if isinstance(error, TimeUnavailable):
        extra = {"suggestedSlots": SlotSchema(many=True).dump(error.suggested_slots)}
    headers = None
    retry_after = getattr(error, "retry_after", None)
    if retry_after is not None:  # a 503 worth retrying (a calendar that did not answer)
        g.retry_after = str(retry_after)
        headers = {"Retry-After": g.retry_after}
    if error.status_code == 401 and (challenge := g.get("bearer_challenge")):
        headers = {"WWW-Authenticate": challenge}  # RFC 6750: a refused bearer token
    return envelope(
        error.status_code, error.message, error.errors, headers, code=error.code, extra=extra
    )


def handle_database_unavailable(error: Exception) -> ResponseReturnValue:
    """The database did not answer in time, or went away: nothing was committed, so the
    client may retry (with its Idempotency-Key for a create, to be safe either way)."""
    current_app.logger.warning("Database unavailable: %s", type(error).__name__)
    g.retry_after = DATABASE_RETRY_AFTER
    return envelope(503, HTTP_MESSAGES[503], headers={"Retry-After": DATABASE_RETRY_AFTER})


def handle_unexpected(error: Exception) -> ResponseReturnValue:
    current_app.logger.exception("Unhandled exception", exc_info=error)
    return envelope(500, HTTP_MESSAGES[500])


def _drop_location(messages: Any) -> Any:
    """webargs files errors under the request location (``json``, ``query``); the client
    knows where it sent a field, so the envelope names only the field."""
    if isinstance(messages, dict) and set(messages) <= {"json", "query", "path", "headers"}:
        merged: dict[str, Any] = {}
        for value in messages.values():
            if isinstance(value, dict):
                merged.update(value)
            else:
                merged.setdefault("_body", []).extend(value if isinstance(value, list) else [value])
        return merged
    return messages


def register_error_handlers(app: Flask) -> None:
    app.register_error_handler(HTTPException, handle_http_exception)
    app.register_error_handler(ServiceError, handle_service_error)
    # psycopg's own errors too: a raw connection (the claim on the in-memory rate-limit
    # counts, app.api.memory_counts) is not wrapped by SQLAlchemy.
    for database_unavailable in (
        OperationalError,
        InterfaceError,
        PoolTimeout,
        psycopg.OperationalError,
        psycopg.InterfaceError,
    ):
        app.register_error_handler(database_unavailable, handle_database_unavailable)
    app.register_error_handler(Exception, handle_unexpected)
