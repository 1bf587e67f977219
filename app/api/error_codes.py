"""The API's error codes with their status and cause: the one table of them, which the OpenAPI
document's overview (``overview``) shows and ``docs/api.md`` repeats word for word (a test holds
the two equal)."""

from __future__ import annotations

from app.services.common.errors import ErrorCode

# In the order a reader meets them: the request, the time, the key, the rest.
ERROR_CODES: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.INVALID_REQUEST: (
        400,
        "Missing or malformed fields, bad JSON, unknown fields, bad query values",
    ),
    ErrorCode.INVALID_RESPONSES: (
        400,
        "`responses` leaves out a required answer, answers malformed, or names no question of"
        " the event type; `errors` names each (`responses.<key>`)",
    ),
    ErrorCode.INVALID_TIME_RANGE: (
        400,
        "`endTime` not after `startTime`, or more than 24 hours after it",
    ),
    ErrorCode.SLOT_TAKEN: (
        400,
        "The time (with the event type's buffers) overlaps an active booking",
    ),
    ErrorCode.SLOT_HELD: (400, "The time overlaps another caller's slot hold"),
    ErrorCode.BLOCKED_TIME: (400, "The time overlaps blocked time set in the dashboard"),
    ErrorCode.EXTERNAL_BUSY: (
        400,
        "The time overlaps an event in a connected calendar (as last read, or as the calendar"
        " answered at the moment of this write)",
    ),
    ErrorCode.HOST_UNAVAILABLE: (
        400,
        "The host named by hostId cannot take the time; suggestedSlots are that host's",
    ),
    ErrorCode.OUTSIDE_HOURS: (
        400,
        "The time is not inside working hours (weekly hours, date overrides)",
    ),
    ErrorCode.MINIMUM_NOTICE: (400, "`startTime` is sooner than the minimum notice allows"),
    ErrorCode.BEYOND_HORIZON: (400, "`startTime` is past the booking horizon"),
    ErrorCode.LIMIT_REACHED: (
        400,
        "The day, week or month of `startTime` already has as many bookings (or minutes of"
        " bookings) as the event type's or the calendar's cap allows; the message names the cap",
    ),
    ErrorCode.SEATS_FULL: (
        400,
        "Every seat of the slot (an event type with `seats`) is taken by bookings and live holds",
    ),
    ErrorCode.IDEMPOTENCY_MISMATCH: (
        400,
        "The `idempotencyKey` was used with a different request",
    ),
    ErrorCode.BOOKING_NOT_ACTIVE: (
        400,
        "The booking is cancelled, completed or no_show, so it cannot be updated or cancelled",
    ),
    ErrorCode.INVALID_API_KEY: (401, "`Invalid or inactive API key`"),
    ErrorCode.API_KEY_EXPIRED: (401, "`API key has expired`"),
    ErrorCode.NO_SUB_ACCOUNT: (401, "`API key not associated with a subaccount`"),
    ErrorCode.PERMISSION_DENIED: (403, "`API key does not have '…' permission`"),
    ErrorCode.NOT_FOUND: (404, "Booking, event type, hold or path not found"),
    ErrorCode.METHOD_NOT_ALLOWED: (405, "The path does not take this method"),
    ErrorCode.PAYLOAD_TOO_LARGE: (413, "Body over 1 MiB"),
    ErrorCode.RATE_LIMITED: (429, "Over 60 requests in a sliding minute (see `Retry-After`)"),
    ErrorCode.SERVICE_UNAVAILABLE: (
        503,
        "The database is not answering; retry after `Retry-After`",
    ),
    ErrorCode.CALENDAR_UNREACHABLE: (
        503,
        "Only where the operator chose `CALENDAR_LIVE_CHECK=strict`: a connected calendar did"
        " not answer about the time in time; retry after `Retry-After`",
    ),
    ErrorCode.INTERNAL_ERROR: (500, "A bug; the log has it under the answer's `X-Request-Id`"),
}


def codes_table() -> str:
    """The codes as a Markdown table: code, status, cause."""
    rows = ["| `code` | Status | Cause |", "|---|---|---|"]
    rows += [f"| `{code}` | {status} | {cause} |" for code, (status, cause) in ERROR_CODES.items()]
    return "\n".join(rows)


def overview(public_url: str) -> str:
    """The OpenAPI document's ``info.description``: what the API is, how to call it, what an
    error looks like and what its codes mean, and where the agents' guide is."""
    base = public_url.rstrip("/")
    return f"""\
Check availability and list, create, reschedule and cancel bookings on one client workspace's
calendar. Every call sends its API key in the `x-calendar-api-key` header; the key's
permissions decide which operations it may use, and it reaches its own workspace alone.

A guide for agents, with the whole flow and its rules, is at [{base}/llms.txt]({base}/llms.txt).

**Errors.** Every error is a JSON object with `statusCode` and `message`, a `code` that names
the cause and will not change (act on it; the message may be reworded), `errors` by field for
validation problems, and `suggestedSlots` when a write was refused for its time:

{codes_table()}
"""
