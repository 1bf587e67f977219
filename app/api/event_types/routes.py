"""GET /calendar/event-types: what an agent can book, and what it must ask before booking."""

from __future__ import annotations

from flask.views import MethodView

from app.api import examples
from app.api.auth import current_sub_account
from app.api.event_types.schemas import EventTypeSchema
from app.api.smorest import Blueprint
from app.models import Permission
from app.services.availability.event_types import OfferedEventType, offered_event_types

blp = Blueprint(
    "event_types",
    __name__,
    url_prefix="/calendar/event-types",
    description="The event types agents can book",
)


@blp.route("")
class EventTypeViews(MethodView):
    @blp.requires(Permission.CHECK_AVAILABILITY)
    @blp.response(200, EventTypeSchema(many=True), example=examples.EVENT_TYPES)
    @blp.doc(operationId="listEventTypes")
    def get(self) -> list[OfferedEventType]:
        """List event types

        The event types of this calendar that take bookings now, by name: each with its `id`
        (the `eventTypeId` of availability and bookings), how long it lasts, who it is booked
        with, and its `questions`, the JSON Schema of the `responses` a booking must send.
        Deactivated event types are not listed.
        """
        return offered_event_types(current_sub_account())
