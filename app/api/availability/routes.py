"""GET /calendar/availability, with conditional requests.

The answer comes from the slots kept for the calendar's version
(``app.services.availability.cache``) and carries a weak ``ETag`` naming the version, the
question and what the instant cut; ``If-None-Match`` with that tag answers ``304`` with no body
(it still counts against the rate limit, which ran before). The body is written here from the
cached slots' instants, each slot's JSON rendered once per cached set and process, so a repeated
question does not dump 31 days of slots through marshmallow again; its shape is the documented
``AvailabilityDaySchema``'s, which the tests hold it to.
"""

from __future__ import annotations

from flask import Response, current_app, request
from flask.views import MethodView

from app.api import examples
from app.api.auth import current_sub_account
from app.api.availability.schemas import AvailabilityArgsSchema, AvailabilityDaySchema
from app.api.field_names import ContractNames
from app.api.smorest import Blueprint
from app.models import Permission
from app.models.types import utcnow
from app.scheduling.offered import SlotSet
from app.scheduling.timezones import format_utc, format_utc_seconds
from app.services.availability.cache import CachedAnswer, availability_at
from app.services.availability.open_time import AvailabilityQuery
from app.services.integrations.calendars.freshness import busy_time_as_of

blp = Blueprint(
    "availability",
    __name__,
    url_prefix="/calendar/availability",
    description="Open slots of the calendar",
)

BUSY_TIME_AS_OF = "Busy-Time-As-Of"

# Refusals naming a parameter, in the contract's names (``app.api.field_names``).
QUERY_NAMES = ContractNames(AvailabilityArgsSchema())

# An answer may be kept by the client and must be asked again before each use (revalidated
# with If-None-Match), never by a shared cache: it is one key's calendar.
CACHE_CONTROL = "private, no-cache"
ETAG_HEADER = {
    "ETag": {
        "description": "Weak tag of this answer: the calendar's version, the question and the"
        " slots the current time still offers. Send it back as If-None-Match to be answered"
        " 304 while nothing changed.",
        "schema": {
            "type": "string",
            "maxLength": 128,
            "example": 'W/"5f1c2a9e0b7d3c41.9d3e0b7c41a2f6e8.0.342.0"',
        },
    },
    "Cache-Control": {
        "description": CACHE_CONTROL,
        "schema": {"type": "string", "enum": [CACHE_CONTROL]},
    },
    BUSY_TIME_AS_OF: {
        "description": "Up to when the connected calendars' busy time is known (a calendar"
        " with a live push channel counts as current; otherwise its last successful read);"
        " `unknown` while one has never been read; absent when none is connected. Creates,"
        " reschedules and holds ask the connected calendars again at the moment of writing.",
        "schema": {
            "type": "string",
            "maxLength": 20,
            "pattern": r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|unknown)$",
            "example": "2026-12-07T14:00:05Z",
        },
    },
}


# A path-level parameter (this path has one operation): read from werkzeug's parsed header
# rather than through a second webargs schema, which cost every question a tenth of a ms.
IF_NONE_MATCH = {
    "in": "header",
    "name": "If-None-Match",
    "required": False,
    "description": "The ETag of an earlier answer to the same question: 304 with no body while"
    " it is still the answer.",
    "schema": {
        "type": "string",
        "maxLength": 8192,
        "example": 'W/"5f1c2a9e0b7d3c41.9d3e0b7c41a2f6e8.0.342.0"',
    },
}


@blp.route("", parameters=[IF_NONE_MATCH])
class AvailabilityViews(MethodView):
    @blp.requires(Permission.CHECK_AVAILABILITY)
    @blp.arguments(AvailabilityArgsSchema, location="query", as_kwargs=False)
    @blp.response(
        200,
        AvailabilityDaySchema(many=True),
        example=examples.AVAILABILITY,
        headers=ETAG_HEADER,
    )
    @blp.alt_response(
        304,
        description="Not modified: the If-None-Match tag is still the answer (no body)",
        headers=ETAG_HEADER,
    )
    @blp.error(
        400,
        "A parameter that does not parse or a window that cannot be read",
        examples.INVALID_QUERY,
    )
    @blp.error(404, "Event type not found", examples.not_found("Event type not found"))
    @blp.doc(operationId="checkAvailability")
    def get(self, query: AvailabilityQuery) -> Response:
        """Check availability

        One entry per calendar date of the window in the requested timezone (default: the
        availability profile's), with the open slots starting that day as UTC instants. Time
        held by a live slot hold is not open, whoever holds it.

        Answers carry a weak `ETag`; ask again with `If-None-Match` and an unchanged answer is
        a `304` with no body.
        """
        with QUERY_NAMES.told_in_refusals():
            answer = availability_at(
                current_sub_account(),
                query,
                utcnow().timestamp(),
                current_app.extensions.get("availability_store"),
            )
        headers = {"ETag": f'W/"{answer.tag}"', "Cache-Control": CACHE_CONTROL}
        if answer.connected:  # a read of its own, only for a calendar with connections
            as_of = busy_time_as_of(current_sub_account().id, utcnow()).as_of
            headers[BUSY_TIME_AS_OF] = format_utc(as_of) if as_of is not None else "unknown"
        if request.if_none_match.contains_weak(answer.tag):
            return Response(status=304, headers=headers)
        return Response(_body(answer), mimetype="application/json", headers=headers)


def _body(answer: CachedAnswer) -> str:
    """The answer as ``AvailabilityDaySchema(many=True)`` dumps it, from the cached slots."""
    slot_set, offer = answer.slot_set, answer.offer
    rendered = _rendered_slots(slot_set)

    def slot(i: int) -> str:
        if i not in offer.seats_held:
            return rendered[i]
        # A seat of it is held at this instant: it says how many seats it has left now.
        return _slot_json(slot_set, i, slot_set.seats_remaining(offer, i))

    return (
        "["
        + ",".join(
            f'{{"date":"{day}","slots":[{",".join(slot(i) for i in indexes)}]}}'
            for day, indexes in slot_set.offered_days(offer)
        )
        + "]"
    )


def _rendered_slots(slot_set: SlotSet) -> list[str]:
    """Each slot of the set as JSON (a seated one with the seats its bookings leave), rendered
    once and kept with the set."""
    rendered = slot_set.memo.get("json")
    if rendered is None:
        seated = slot_set.seats > 1
        rendered = [
            _slot_json(slot_set, i, slot_set.seats - slot_set.booked_seats[i] if seated else None)
            for i in range(len(slot_set.starts))
        ]
        slot_set.memo["json"] = rendered
    return rendered


def _slot_json(slot_set: SlotSet, i: int, seats_remaining: int | None) -> str:
    start, end = format_utc_seconds(slot_set.starts[i]), format_utc_seconds(slot_set.ends[i])
    if seats_remaining is None:
        return f'{{"start":"{start}","end":"{end}"}}'
    return f'{{"start":"{start}","end":"{end}","seatsRemaining":{seats_remaining}}}'
