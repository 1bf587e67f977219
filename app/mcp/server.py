"""The MCP server: nine tools, one per API operation (listing event types, the six booking
operations, and holding a slot and releasing the hold), each a call of ``app.client`` with the
caller's own API key. Descriptions are written for a language model; API errors come back as
tool errors saying what to do next: a time that cannot be had lists the open slots the API
suggests instead. Every time an answer gives is also given as the local time of the zone it
names (``with_local_times``): an agent on the phone says "10:00", not "15:00Z".

A client of the API like any other, it imports nothing of the app but ``app.client`` and the
API's published terms (``app.api_terms``): no Flask, no SQLAlchemy, no services (an import
contract and ``tests/conventions/test_imports.py`` hold it so)."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from cachetools import TTLCache
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from app.api_terms import (
    DEFAULT_TTL_SECONDS,
    LIST_LIMIT_DEFAULT,
    MAX_TTL_SECONDS,
    PERMISSION_LABELS,
)
from app.client import (
    AuthenticationFailed,
    CalendarApiError,
    CalendarClient,
    CalendarUnreachable,
    KeptAnswers,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServiceUnavailable,
    SlotUnavailable,
)
from app.client.client import API_KEY_HEADER
from app.client.models import OMITTED, api_name

# The credential ``api_key_of`` gives for an OAuth access token (HTTP ``Authorization``).
BEARER = "Bearer "

INSTRUCTIONS = """\
Books appointments on one calendar (the one the API key belongs to).
A good flow: list_event_types to find the kind of appointment (its eventTypeId) and the
questions it asks; ask the person those questions (the required ones at least);
check_availability for the event type and a window, pick one of the returned slots,
create_booking with exactly that slot's start and end and the answers as responses, keep the
returned booking id.
If you still need to ask the person for their name, email or answers, hold_slot the chosen slot
first (nobody else can take it for a couple of minutes), then create_booking with its holdToken
before expiresAt; release_hold if they decide against it.
A time that cannot be booked or held is an error naming the cause (a code such as slot_taken)
and listing the nearest open slots: offer those instead of checking availability again.
Later: get_booking or list_bookings to look bookings up, update_booking to move or edit one,
cancel_booking to cancel it. Send times in ISO 8601 with an offset, e.g. 2026-03-02T15:00:00Z
or 2026-03-02T10:00:00-05:00. Answers give each time in UTC (startTime, start: with Z) and in
local time (startTimeLocal, startLocal: with the offset) of the zone named beside it
(timezone): say the local time to the person."""

Instant = Annotated[
    str,
    Field(
        description="An ISO 8601 date-time with its UTC offset, e.g. 2026-03-02T15:00:00Z or "
        "2026-03-02T10:00:00-05:00."
    ),
]
EventTypeId = Annotated[
    int,
    Field(
        description="The event type (kind of appointment) as an integer id, as "
        "list_event_types returns it.",
        ge=1,
    ),
]
BookingId = Annotated[
    int, Field(description="The booking's integer id, as create_booking returned it.", ge=1)
]
Status = Literal["pending", "confirmed", "cancelled", "completed", "no_show"]
Timezone = Annotated[
    str | None, Field(description="IANA timezone the booking is shown in, e.g. Europe/Paris.")
]
Title = Annotated[str | None, Field(description="Shown in calendars and emails.")]
Description = Annotated[str | None, Field(description="Notes for the people attending.")]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="Any key-value data to keep with the booking.")
]
Responses = Annotated[
    dict[str, Any] | None,
    Field(
        description="The answers to the event type's questions, by question key: "
        "list_event_types gives each event type's questions as the JSON Schema these answers "
        "must meet (ask the person each question's title; required ones must be answered)."
    ),
]
HoldToken = Annotated[
    str | None,
    Field(
        description="The holdToken hold_slot returned for exactly this time, sent before its "
        "expiresAt: the held time is booked and the hold used up. A token of an expired, used "
        "or released hold is ignored: the time is then booked only if it is still free."
    ),
]

HostId = Annotated[
    int | None,
    Field(
        description="One of the event type's hosts (the people bookings are made with, e.g. a "
        "clinic's dentists), by the id a booking's hosts[].id shows. Only when the person asks "
        "for someone by name: without it a round-robin type chooses a free host fairly, and "
        "the booking's assignmentReason says why.",
        ge=1,
    ),
]


Attendee = Annotated[
    dict[str, str],
    Field(
        description='One attendee: {"email": required, "name", "firstName", '
        '"lastName", "phone"} (all strings).',
        json_schema_extra={
            "properties": {
                "email": {"type": "string", "format": "email"},
                "name": {"type": "string"},
                "firstName": {"type": "string"},
                "lastName": {"type": "string"},
                "phone": {"type": "string"},
            },
            "required": ["email"],
        },
    ),
]


def as_api_json(value: Any) -> Any:
    """A client value (dataclasses, datetimes) in the API's JSON shape: camelCase keys,
    ISO 8601 strings, UTC with Z."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            api_name(f.name): as_api_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (f.metadata.get(OMITTED) and getattr(value, f.name) is None)
        }
    if isinstance(value, list):
        return [as_api_json(item) for item in value]
    if isinstance(value, dict):
        return {key: as_api_json(item) for key, item in value.items()}
    if isinstance(value, datetime):
        return re.sub(r"\+00:00$", "Z", value.isoformat())
    if isinstance(value, date):
        return value.isoformat()
    return value


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def local_time(instant: str, zone_name: str | None) -> str:
    """A UTC instant of an answer (``…Z``) as the local time of ``zone_name``, with its
    offset: what a person is told."""
    moment = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return moment.astimezone(_zone(zone_name)).isoformat()


def with_local_times(
    item: dict[str, Any], keys: tuple[str, ...], zone_name: str | None = None
) -> dict[str, Any]:
    """``item`` (an answer's object) with each of its times ``keys`` also as ``<key>Local``,
    in the zone ``item`` names (``timezone``, a booking's), else ``zone_name``, which it then
    names."""
    zone_name = item.get("timezone") or zone_name or "UTC"
    return {**local_times(item, keys, zone_name), "timezone": zone_name}


def local_times(item: dict[str, Any], keys: tuple[str, ...], zone_name: str) -> dict[str, Any]:
    """``item`` with each of its times ``keys`` also as ``<key>Local`` in ``zone_name``."""
    shown = dict(item)
    for key in keys:
        if isinstance(shown.get(key), str):
            shown[f"{key}Local"] = local_time(shown[key], zone_name)
    return shown


BOOKING_TIMES = ("startTime", "endTime")
HOLD_TIMES = ("startTime", "endTime", "expiresAt")
SLOT_TIMES = ("start", "end")


# Each caller's event types' zones, by the digest of its credential: asked again after a
# minute, so a check_availability or hold_slot without a timezone costs the key one more
# request a minute at most, not one each.
_ZONES: TTLCache[str, dict[int, str]] = TTLCache(maxsize=4096, ttl=60)
_ZONES_LOCK = threading.Lock()


def zone_of(client: CalendarClient, event_type_id: int | None) -> str:
    """The zone an event type's days are counted in (the listed event type's ``timezone``; for
    no event type, the first listed one's), for answers asked without a timezone; UTC when the
    key cannot list event types."""
    with _ZONES_LOCK:
        zones = _ZONES.get(client.credential_digest)
    if zones is None:
        try:
            offered = client.list_event_types()
        except PermissionDenied:
            offered = []
        zones = {event_type.id: event_type.timezone for event_type in offered}
        with _ZONES_LOCK:
            _ZONES[client.credential_digest] = zones
    if event_type_id in zones:
        return zones[event_type_id]
    return next(iter(zones.values()), "UTC")


def days_with_local_times(
    client: CalendarClient, ask: Callable[[str], Any], asked: str | None, event_type_id: int | None
) -> list[dict[str, Any]]:
    """Availability in the zone asked, else the event type's, each day naming it and each
    slot with its local start and end."""
    zone_name = asked or zone_of(client, event_type_id)
    days = as_api_json(ask(zone_name))
    return [
        {
            "date": day["date"],
            "timezone": zone_name,
            "slots": [local_times(slot, SLOT_TIMES, zone_name) for slot in day["slots"]],
        }
        for day in days
    ]


def booking_with_local_times(booking: Any) -> Any:
    """A booking's answer with its start and end also in its own timezone."""
    return with_local_times(as_api_json(booking), BOOKING_TIMES)


def page_with_local_times(page: Any) -> Any:
    """A page of bookings, each with its start and end also in its own timezone."""
    shown = as_api_json(page)
    shown["bookings"] = [with_local_times(b, BOOKING_TIMES) for b in shown["bookings"]]
    return shown


def booking_fields(
    start_time: str | None,
    end_time: str | None,
    attendees: list[dict[str, str]] | None,
    timezone: str | None,
    title: str | None,
    description: str | None,
    metadata: dict[str, Any] | None,
) -> dict[str, Any]:
    """The tools' booking arguments as the client's keyword arguments."""
    return {
        "start_time": start_time,
        "end_time": end_time,
        "attendees": attendees,
        "timezone": timezone,
        "title": title,
        "description": description,
        "metadata": metadata,
    }


# How a refused time is put, per tool (create_booking's is the default).
REFUSED_TIME = {
    "hold_slot": "That time cannot be held",
    "update_booking": "The booking cannot be moved to that time",
}


def _status(error: CalendarApiError) -> str:
    """``400, code slot_taken`` (or just ``400`` from a server that sends no code)."""
    return f"{error.status_code}, code {error.code}" if error.code else str(error.status_code)


def time_refusal(error: SlotUnavailable, tool: str) -> ToolError:
    """A time refused with the API's suggested slots, ready to offer."""
    what = REFUSED_TIME.get(tool, "That time cannot be booked")
    text = f"{what} ({_status(error)}): {error.message}."
    if error.code == "slot_held":
        text += (
            " Another booking of it is being made right now; a hold lasts at most 10 minutes, "
            "and the time is free again if it is not booked by then."
        )
    if error.suggested_slots:
        text += (
            " The nearest open slots of the same length, open now: "
            f"{json.dumps(as_api_json(error.suggested_slots))}. Offer these to the person and "
            f"call {tool} again with one slot's start as startTime and its end as endTime; no "
            "need to call check_availability first."
        )
    else:
        text += (
            " No open slot is near it: call check_availability over a wider window and choose "
            "one of the open slots it returns."
        )
    return ToolError(text)


def tool_error(error: Exception, tool: str) -> ToolError:
    """The API's refusal as text a model can act on."""
    if isinstance(error, PermissionDenied):
        permission = error.permission or "the needed"
        label = PERMISSION_LABELS.get(permission, permission)
        return ToolError(
            f"Permission denied (403): this API key lacks the '{permission}' permission "
            f'("{label}"), which {tool} needs. Ask the calendar\'s owner for a key that has '
            "it; calling again with this key will fail the same way."
        )
    if isinstance(error, AuthenticationFailed):
        return ToolError(
            f"Authentication failed ({_status(error)}): {error.message}. The API key is not "
            "usable; get a valid key from the calendar's owner."
        )
    if isinstance(error, SlotUnavailable):
        return time_refusal(error, tool)
    if isinstance(error, NotFound) and tool == "release_hold":
        return ToolError(
            f"Not found ({_status(error)}): {error.message}. The hold has expired, been used "
            "by a booking or been released already: its time is no longer held, so there is "
            "nothing to release."
        )
    if isinstance(error, NotFound):
        return ToolError(
            f"Not found (404): {error.message}. Check the id: list_bookings finds booking "
            "ids; event type ids come from the calendar's owner."
        )
    if isinstance(error, RateLimited):
        wait = f"{error.retry_after:g} s" if error.retry_after is not None else "a minute"
        return ToolError(
            f"Rate limited (429): {error.message}. Wait {wait} before calling again (60 "
            "requests a minute per key)."
        )
    if isinstance(error, ServiceUnavailable):
        return ToolError(
            "The calendar service is temporarily unavailable (503). Nothing was changed; try "
            "again in a few seconds."
        )
    if isinstance(error, CalendarApiError):
        return ToolError(
            f"The API refused the request ({_status(error)}): {error.message}. Correct the "
            "arguments and call again."
        )
    if tool == "hold_slot":
        return ToolError(
            f"The calendar service could not be reached ({error}). Whether the slot was held "
            "is unknown. Call hold_slot again: if it is refused with code slot_held, the "
            "lost hold probably has the time until it expires; offer one of the suggested "
            "slots instead, or create_booking that time without a holdToken after ttlSeconds."
        )
    return ToolError(
        f"The calendar service could not be reached ({error}). Try again shortly; a "
        "create_booking retried with the same idempotencyKey cannot book twice."
    )


# How a tool reaches the API: ``call(ctx, tool, operation)`` runs ``operation`` (one call of the
# client) for the caller of ``ctx`` and answers its result in the API's JSON shape; ``tool``
# names the tool in the error a refusal becomes.
Call = Callable[[Context, str, Callable[[CalendarClient], Any]], Any]

# Each tool says what a call does to the calendar, so a client can ask before calling.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# A change or a release: the same call again changes nothing more.
CHANGES_OR_ENDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# A booking or a hold: each call makes another (an idempotencyKey makes a create safe).
MAKES_SOMETHING_NEW = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


def build_server(base_url: str, api_key_of: Callable[[Context], str | None]) -> MCPServer:
    """The server for the API at ``base_url`` (ending in ``/v1/api``). ``api_key_of`` finds
    the caller's key for a call; it is used for that call only, never kept.

    The tools are added by group, in the order the tool list shows them: those that only read
    the calendar, those that book, and the slot holds."""
    server = MCPServer("calendar-booking", instructions=INSTRUCTIONS)
    call = api_caller(base_url, api_key_of)
    add_reading_tools(server, call)
    add_booking_tools(server, call)
    add_hold_tools(server, call)
    return server


def api_caller(base_url: str, api_key_of: Callable[[Context], str | None]) -> Call:
    """The one way every tool reaches the API, so that a tool is only its description, its
    arguments and the client operation it calls. Each call gets a ``CalendarClient`` with the
    caller's own key, made for that call and dropped after it (one server serves many keys and
    keeps none), over the connection pool the server keeps for its life; a refusal, or an API
    that cannot be reached, becomes a tool error saying what to do next (``tool_error``)."""
    http = httpx.Client(timeout=15.0)
    # Availability answers kept with their ETags across calls (each key's apart): a repeated
    # check_availability is asked with If-None-Match, and a 304 costs the API no body.
    kept_answers = KeptAnswers()

    def call(ctx: Context, tool: str, operation: Callable[[CalendarClient], Any]) -> Any:
        key = api_key_of(ctx)
        if not key:
            raise ToolError(
                f"No API key: send it in the {API_KEY_HEADER} header (HTTP) or set "
                "CALENDAR_API_KEY (stdio)."
            )
        try:
            client = (
                CalendarClient(base_url, access_token=key[7:], http=http, kept_answers=kept_answers)
                if key.startswith(BEARER)
                else CalendarClient(base_url, key, http=http, kept_answers=kept_answers)
            )
            return as_api_json(operation(client))
        except (CalendarApiError, CalendarUnreachable) as error:
            raise tool_error(error, tool) from None

    return call


def add_reading_tools(server: MCPServer, call: Call) -> None:
    """The tools that only read the calendar: the open slots, and the bookings made. They are
    annotated read-only, so a client may call them without asking the person first; and they
    come first, as the flow does (find a slot before booking it, find a booking before changing
    it)."""

    @server.tool(
        annotations=READ_ONLY,
        description="The kinds of appointment this calendar takes now: call this first. Each "
        "has its id (the eventTypeId of the other tools), name, duration and slotInterval "
        "(minutes), timezone (of its working hours), locationKind and location, seats, "
        "minimumNoticeMinutes, bookingHorizonDays, assignment and hosts (who it is booked "
        "with; a host's id is what hostId takes), and questions: the JSON Schema of the "
        "responses create_booking must send. Ask the person each question (its title), the "
        "required ones at least, and pass the answers by key as responses; a missing or "
        "malformed answer is refused with code invalid_responses naming each. Needs "
        "canCheckAvailability.",
    )
    def list_event_types(ctx: Context) -> list[dict[str, Any]]:
        return call(ctx, "list_event_types", lambda client: client.list_event_types())

    @server.tool(
        annotations=READ_ONLY,
        description="Open slots, day by day, between startDate and endDate. Call this before "
        "create_booking or a move with update_booking, and book exactly one of the returned "
        "slots (start and end). Pass eventTypeId so the slots have that appointment's length "
        "and rules. Returns [{date: YYYY-MM-DD, slots: [{start, end}]}]; a day without open "
        "time has an empty slots list. A class-like event type with seats adds seatsRemaining "
        "to each slot (several people may book the same slot until it is full: seats_full). "
        "An event type with several hosts offers a slot when any host can take it (round "
        "robin) or only when all can (collective); hostId asks one host's slots. "
        "The owner's connected calendars are as fresh as the last push or read (seconds for "
        "Google and Microsoft, a minute for the others), and "
        "booking asks them again, so a slot may still be refused as external_busy. Needs the "
        "key's canCheckAvailability permission.",
    )
    def check_availability(
        ctx: Context,
        startDate: Annotated[
            str,
            Field(
                description="Start of the window: an ISO 8601 date-time "
                "with offset, or a date (YYYY-MM-DD)."
            ),
        ],
        endDate: Annotated[str, Field(description="End of the window, as startDate.")],
        eventTypeId: EventTypeId | None = None,
        duration: Annotated[
            int | None, Field(description="Slot length in minutes, if not the event type's.")
        ] = None,
        timezone: Annotated[
            str | None,
            Field(description="IANA timezone (e.g. America/New_York) that days are grouped in."),
        ] = None,
        hostId: HostId = None,
    ) -> list[dict[str, Any]]:
        return call(
            ctx,
            "check_availability",
            lambda client: days_with_local_times(
                client,
                lambda zone_name: client.availability(
                    startDate,
                    endDate,
                    event_type_id=eventTypeId,
                    duration=duration,
                    timezone=zone_name,
                    host_id=hostId,
                ),
                timezone,
                eventTypeId,
            ),
        )

    @server.tool(
        annotations=READ_ONLY,
        description="Bookings of this calendar, optionally filtered by time window, status, "
        f"event type or attendee email, a page at a time (limit, default {LIST_LIMIT_DEFAULT}; "
        "offset). Returns {bookings, total, limit, offset}. Needs canGetBookings.",
    )
    def list_bookings(
        ctx: Context,
        startDate: Annotated[
            str | None, Field(description="Only bookings starting at or after this time.")
        ] = None,
        endDate: Annotated[
            str | None, Field(description="Only bookings ending at or before this time.")
        ] = None,
        status: Status | None = None,
        eventTypeId: EventTypeId | None = None,
        email: Annotated[str | None, Field(description="Only bookings with this attendee.")] = None,
        limit: Annotated[
            int | None, Field(description=f"Page size (default {LIST_LIMIT_DEFAULT}).", ge=1)
        ] = None,
        offset: Annotated[int | None, Field(description="How many to skip.", ge=0)] = None,
    ) -> dict[str, Any]:
        return call(
            ctx,
            "list_bookings",
            lambda client: page_with_local_times(
                client.list_bookings(
                    start_date=startDate,
                    end_date=endDate,
                    status=status,
                    event_type_id=eventTypeId,
                    email=email,
                    limit=limit,
                    offset=offset,
                )
            ),
        )

    @server.tool(
        annotations=READ_ONLY,
        description="One booking by id, with its status, times, attendees (each with "
        "manageUrl, their own link to cancel or move it) and metadata. Needs canGetBookings.",
    )
    def get_booking(ctx: Context, id: BookingId) -> dict[str, Any]:
        return call(
            ctx, "get_booking", lambda client: booking_with_local_times(client.get_booking(id))
        )


def add_booking_tools(server: MCPServer, call: Call) -> None:
    """The tools that change bookings: book, move or edit, cancel. They share the booking's
    arguments (``booking_fields``) and the way a refused time comes back (the nearest open
    slots to offer, ``time_refusal``), and each is annotated with what it does, so a client can
    ask the person before calling it."""

    @server.tool(
        annotations=MAKES_SOMETHING_NEW,
        description="Book an appointment: startTime and endTime should be one slot that "
        "check_availability returned for the same eventTypeId; at least one attendee with an "
        "email. Returns the booking (status pending, its id and uid); each attendee carries "
        "manageUrl, their own link to cancel or move it: give it to that person. Safe to "
        "retry: pass the "
        "same idempotencyKey (any unique string, e.g. a UUID) on every attempt of the same "
        "booking and at most one booking is made; without one, the tool makes one for this "
        "call and retries lost answers with it. If you held the slot with hold_slot, pass its "
        "holdToken (before expiresAt) to book the held time. A time that cannot be booked is an "
        "error naming the cause (code, e.g. slot_taken) and listing the nearest open slots: "
        "offer one of those and call again with it, or check availability again for other "
        "times. The booking's hosts say who it is with (tell the person); host_unavailable "
        "means the host named by hostId cannot take the time (its nearest slots are listed). "
        "external_busy means the owner's own calendar has an event then, possibly one "
        "added seconds ago (the connected calendars are asked at the moment of booking). "
        "For a Google Meet or Teams appointment the location becomes the join link seconds "
        "after booking: get_booking a little later to read it. "
        "calendar_unreachable (only on servers set to strict) means a connected calendar did "
        "not answer in time: nothing was booked, try again shortly. Needs canBook.",
    )
    def create_booking(
        ctx: Context,
        eventTypeId: EventTypeId,
        startTime: Instant,
        endTime: Instant,
        attendees: Annotated[
            list[Attendee], Field(description="Who attends; at least one.", min_length=1)
        ],
        timezone: Timezone = None,
        title: Title = None,
        description: Description = None,
        metadata: Metadata = None,
        idempotencyKey: Annotated[
            str | None,
            Field(description="Reuse on retries of the same booking; never for another one."),
        ] = None,
        holdToken: HoldToken = None,
        hostId: HostId = None,
        responses: Responses = None,
    ) -> dict[str, Any]:
        return call(
            ctx,
            "create_booking",
            lambda client: booking_with_local_times(
                client.create_booking(
                    eventTypeId,
                    **booking_fields(
                        startTime, endTime, attendees, timezone, title, description, metadata
                    ),
                    idempotency_key=idempotencyKey,
                    hold_token=holdToken,
                    host_id=hostId,
                    responses=responses,
                )
            ),
        )

    @server.tool(
        annotations=CHANGES_OR_ENDS,
        description="Change a booking: move it (startTime and endTime, one slot from "
        "check_availability), or change its title, description, timezone, attendees or "
        "metadata. Only the fields given change. eventTypeId is the event type the booking was "
        "made with. A move keeps the booking's host when free then, else goes to a free one; "
        "hostId moves it to that host. To move it into a time held with hold_slot, pass that "
        "hold's holdToken. A "
        "time that cannot be had is an error naming the cause (code) and listing the nearest "
        "open slots to offer instead. Returns the booking's new times and details. Needs "
        "canBook.",
    )
    def update_booking(
        ctx: Context,
        eventTypeId: EventTypeId,
        id: BookingId,
        startTime: Instant | None = None,
        endTime: Instant | None = None,
        attendees: list[Attendee] | None = None,
        timezone: Timezone = None,
        title: Title = None,
        description: Description = None,
        metadata: Metadata = None,
        holdToken: HoldToken = None,
        hostId: HostId = None,
    ) -> dict[str, Any]:
        return call(
            ctx,
            "update_booking",
            lambda client: booking_with_local_times(
                client.update_booking(
                    eventTypeId,
                    id,
                    **booking_fields(
                        startTime, endTime, attendees, timezone, title, description, metadata
                    ),
                    hold_token=holdToken,
                    host_id=hostId,
                )
            ),
        )

    @server.tool(
        annotations=CHANGES_OR_ENDS,
        description="Cancel a booking, with an optional reason that is kept and returned. "
        "Returns {id, status: cancelled, cancelledAt, cancellationReason}. Cancelling an "
        "already cancelled booking is an error saying so. Needs canCancel.",
    )
    def cancel_booking(
        ctx: Context,
        id: BookingId,
        reason: Annotated[str | None, Field(description="Why; shown to the owner.")] = None,
    ) -> dict[str, Any]:
        return call(ctx, "cancel_booking", lambda client: client.cancel_booking(id, reason=reason))


def add_hold_tools(server: MCPServer, call: Call) -> None:
    """The slot holds: keep a time from others while the person is asked for their details,
    and give it back if they decide against it. Together, because each tool's description is
    half of one flow with create_booking (the holdToken), and a hold is no booking: the
    refusals name the hold's own limits (ttlSeconds, a hold that is gone)."""

    @server.tool(
        annotations=MAKES_SOMETHING_NEW,
        description="Hold a slot for a few minutes, so that nobody else can take it while you "
        "ask the person for their name and email. startTime and endTime should be one slot "
        "that check_availability returned for the same eventTypeId. Returns {id, eventTypeId, "
        "startTime, endTime, expiresAt, holdToken}. Then, before expiresAt, call create_booking "
        "with the same eventTypeId, startTime and endTime and this holdToken: the held slot is "
        "booked and the hold used up (update_booking takes a holdToken the same way, to move a "
        "booking into the held slot). Until expiresAt the slot is missing from "
        "check_availability and every booking of it without the token is refused (code "
        "slot_held). If the person does not want it after all, call release_hold. If the hold "
        "expires first, create_booking with the token still books the slot if it is free. A "
        "time that cannot be held is an error naming the cause (code) and listing the nearest "
        "open slots: offer one and hold that instead. Not safe to retry blindly: a second "
        "hold_slot of the same time is refused by your own first hold. Needs canBook.",
    )
    def hold_slot(
        ctx: Context,
        eventTypeId: EventTypeId,
        startTime: Instant,
        endTime: Instant,
        ttlSeconds: Annotated[
            int | None,
            Field(
                description=f"How long the hold lasts, in seconds (default {DEFAULT_TTL_SECONDS}, "
                f"at most {MAX_TTL_SECONDS}): long enough to collect the details, no longer.",
                ge=1,
                le=MAX_TTL_SECONDS,
            ),
        ] = None,
        timezone: Annotated[
            str | None,
            Field(
                description="IANA timezone (e.g. America/New_York) whose day counts as the "
                "same day when nearby slots are suggested; default the calendar's."
            ),
        ] = None,
    ) -> dict[str, Any]:
        return call(
            ctx,
            "hold_slot",
            lambda client: with_local_times(
                as_api_json(
                    client.hold_slot(
                        eventTypeId, startTime, endTime, timezone=timezone, ttl_seconds=ttlSeconds
                    )
                ),
                HOLD_TIMES,
                timezone or zone_of(client, eventTypeId),
            ),
        )

    @server.tool(
        annotations=CHANGES_OR_ENDS,
        description="Release a hold made with hold_slot when its slot is no longer wanted: the "
        "time is open to others at once. id and eventTypeId are the ones hold_slot returned. "
        "Returns {id, status: released, releasedAt}. A hold that has expired, been used by "
        "create_booking or update_booking, or been released already is an error saying so "
        "(nothing is left to release). Needs canBook.",
    )
    def release_hold(
        ctx: Context,
        eventTypeId: EventTypeId,
        id: Annotated[int, Field(description="The hold's id, as hold_slot returned it.", ge=1)],
    ) -> dict[str, Any]:
        return call(ctx, "release_hold", lambda client: client.release_hold(eventTypeId, id))
