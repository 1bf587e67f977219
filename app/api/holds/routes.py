"""Slot holds of an event type: hold a slot for a short while, release it early."""

from __future__ import annotations

from flask.views import MethodView

from app.api import examples
from app.api.auth import current_api_key, current_sub_account
from app.api.field_names import ContractNames
from app.api.holds.schemas import CreateHoldSchema, HoldSchema, ReleasedHoldSchema
from app.api.smorest import Blueprint
from app.extensions import db
from app.models import Permission
from app.models.types import utcnow
from app.services.bookings.holds import NewHold, PlacedHold, ReleasedHold, place_hold, release_hold
from app.unit_of_work import perform

# Refusals naming a field of the body, in the contract's names (``app.api.field_names``).
HOLD_NAMES = ContractNames(CreateHoldSchema())

blp = Blueprint(
    "holds",
    __name__,
    url_prefix="/calendar/event-types",
    description="Holding a slot while a booking's details are collected",
)


@blp.route("/<id:event_type_id>/holds")
class HoldViews(MethodView):
    @blp.requires(Permission.BOOK)
    @blp.arguments(CreateHoldSchema, example=examples.CREATE_HOLD)
    @blp.response(201, HoldSchema, example=examples.HOLD)
    @blp.error(
        400, "A body that does not parse, or a time that cannot be held", examples.WRITE_REFUSED
    )
    @blp.error(404, "Event type not found", examples.not_found("Event type not found"))
    @blp.error(413, "Request body too large", examples.TOO_LARGE)
    @blp.calendars_unreachable()
    @blp.doc(operationId="holdSlot")
    def post(self, new: NewHold, event_type_id: int) -> PlacedHold:
        """Hold a slot

        Until `expiresAt` the time is busy for everybody else: availability hides it and
        other writes get a 400 with `code: slot_held`. Create the booking with `holdToken`
        to take the held time (that consumes the hold). A time that cannot be held is
        refused as a create would be, with `suggestedSlots`.
        """
        with HOLD_NAMES.told_in_refusals():
            placed = perform(
                place_hold(
                    current_sub_account(),
                    event_type_id,
                    new,
                    now=utcnow(),
                    api_key_id=current_api_key().id,
                )
            )
        return placed


@blp.route("/<id:event_type_id>/holds/<id:hold_id>")
class HoldByIdViews(MethodView):
    @blp.requires(Permission.BOOK)
    @blp.response(200, ReleasedHoldSchema, example=examples.RELEASED_HOLD)
    @blp.error(
        404,
        "Hold not found (expired, consumed or released)",
        examples.not_found("Hold not found"),
    )
    @blp.doc(operationId="releaseHold")
    def delete(self, event_type_id: int, hold_id: int) -> ReleasedHold:
        """Release a hold

        The held time is free at once.
        """
        released = release_hold(current_sub_account(), event_type_id, hold_id, now=utcnow())
        db.session.commit()
        return released
