"""GET /calendar/availability."""

from __future__ import annotations

from flask.views import MethodView

from app.api import examples
from app.api.auth import current_sub_account
from app.api.availability.schemas import AvailabilityArgsSchema, AvailabilityDaySchema
from app.api.smorest import Blueprint
from app.models import Permission
from app.models.types import utcnow
from app.services.availability.open_time import (
    AvailabilityDay,
    AvailabilityQuery,
    check_availability,
)

blp = Blueprint(
    "availability",
    __name__,
    url_prefix="/calendar/availability",
    description="Open slots of the calendar",
)


@blp.route("")
class AvailabilityViews(MethodView):
    @blp.requires(Permission.CHECK_AVAILABILITY)
    @blp.arguments(AvailabilityArgsSchema, location="query", as_kwargs=False)
    @blp.response(200, AvailabilityDaySchema(many=True), example=examples.AVAILABILITY)
    @blp.error(
        400,
        "A parameter that does not parse or a window that cannot be read",
        examples.INVALID_QUERY,
    )
    @blp.error(404, "Event type not found", examples.not_found("Event type not found"))
    @blp.doc(operationId="checkAvailability")
    def get(self, query: AvailabilityQuery) -> list[AvailabilityDay]:
        """Check availability

        One entry per calendar date of the window in the requested timezone (default: the
        availability profile's), with the open slots starting that day as UTC instants. Time
        held by a live slot hold is not open, whoever holds it.
        """
        return check_availability(current_sub_account(), query, utcnow())
