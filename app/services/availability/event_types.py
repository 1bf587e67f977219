"""Event types, the services agents book (``eventTypeId``): created, edited, deactivated and
reactivated by people in the dashboard, under the rules of ``EventTypeDoc`` (which provisioning
reads its event types with too).

Deactivating keeps the row: bookings made with it live on, but it is no longer offered
(availability and new bookings answer 404: ``scheduling_inputs.get_event_type``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marshmallow import Schema, fields, validate
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.extensions import db
from app.models import (
    EventType,
    Host,
    LocationKind,
    SubAccount,
)
from app.models.limits import (
    BUFFER_MAX_MINUTES,
    HORIZON_MAX_DAYS,
    LOCATION_MAX,
    NAME_MAX,
    NOTICE_MAX_MINUTES,
    SEATS_MAX,
    TEAM_HOSTS_MAX,
)
from app.services.availability.hosts import (
    AssignmentDoc,
    HostShareDoc,
    assign_hosts,
    assignment_problems,
    hosts_of,
)
from app.services.availability.profiles import chosen_profile
from app.services.availability.questions import (
    question_list,
    responses_schema,
    stored_questions,
)
from app.services.common.errors import InvalidRequest
from app.services.common.lookups import load_document, load_named, refuse_taken_name
from app.services.integrations.calendars.meetings import require_meeting_connection
from app.services.scheduling_inputs import (
    booking_terms,
    get_event_type,
    hours_zone,
    profile_for,
)
from app.validation import DURATION_MINUTES, Text, booking_limits, describe_errors, reminder_list


class EventTypeDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    duration = fields.Integer(required=True, validate=DURATION_MINUTES, strict=True)
    bufferBefore = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=BUFFER_MAX_MINUTES), strict=True
    )
    bufferAfter = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=BUFFER_MAX_MINUTES), strict=True
    )
    slotInterval = fields.Integer(load_default=None, allow_none=True, validate=DURATION_MINUTES)
    location = Text(load_default=None, allow_none=True, validate=validate.Length(max=LOCATION_MAX))
    # Where its meetings happen (``LocationKind``); Google Meet and Microsoft Teams need a
    # connected calendar that can make the meeting.
    locationKind = fields.Enum(
        LocationKind, by_value=True, load_default=LocationKind.IN_PERSON.value
    )
    # How many bookings one slot takes (``app.scheduling.seats``).
    seats = fields.Integer(
        load_default=1, strict=True, validate=validate.Range(min=1, max=SEATS_MAX)
    )
    availabilityProfile = Text(load_default=None, allow_none=True)
    minimumNoticeMinutes = fields.Integer(
        load_default=None, allow_none=True, validate=validate.Range(min=0, max=NOTICE_MAX_MINUTES)
    )
    bookingHorizonDays = fields.Integer(
        load_default=None, allow_none=True, validate=validate.Range(min=1, max=HORIZON_MAX_DAYS)
    )
    # The reminders of its bookings; absent or null: the sub account's. Absent from a document
    # that replaces the event type: the list stays as it was.
    reminders = reminder_list(allow_none=True)
    # Its caps (``app.scheduling.caps``); absent from a document that replaces the event type:
    # they stay as they were.
    bookingLimits = booking_limits()
    # What its bookings are asked (``app.services.availability.questions``); absent from a
    # document that replaces the event type: they stay as they were.
    questions = question_list()


class TeamHostFields(HostShareDoc):
    """A host of a round-robin or collective event type, by id (the dashboard's)."""

    hostId = fields.Integer(required=True, strict=True)


class EventTypeFields(EventTypeDoc, AssignmentDoc):
    """The provisioning document's event type with its profile and hosts named by id, not by
    name: a person picks among the sub account's profiles and hosts, and an id still names one
    after a rename. Empty profile: the sub account's default profile. ``hostId``: a one-host
    type's host (None: as it was, the first host for a new one); ``hosts``: a round-robin or
    collective type's."""

    availabilityProfileId = fields.Integer(load_default=None, allow_none=True, strict=True)
    hostId = fields.Integer(load_default=None, allow_none=True, strict=True)
    hosts = fields.List(
        fields.Nested(TeamHostFields),
        load_default=list,
        validate=validate.Length(max=TEAM_HOSTS_MAX),
    )

    class Meta:
        exclude = ("availabilityProfile",)


def list_event_types(sub_account: SubAccount) -> list[EventType]:
    """All of the sub account's event types: the offered ones first, each group by name."""
    return list(
        db.session.scalars(
            select(EventType)
            .where(EventType.sub_account_id == sub_account.id)
            .order_by(EventType.active.desc(), EventType.name, EventType.id)
        )
    )


@dataclass(frozen=True)
class OfferedEventType:
    """An offered event type as an agent reads it (``GET /calendar/event-types``): what it
    needs to book it right, settled values and not the settings they fall back to."""

    event_type: EventType
    # Who its bookings may be made with: a one-host type's host, a team type's active hosts.
    hosts: list[Host]
    # Its working hours' timezone: availability counts its days in it unless asked otherwise.
    timezone: str
    # Slot starts are this many minutes apart (the duration when no interval is set).
    slot_interval: int
    minimum_notice_minutes: int
    booking_horizon_days: int
    # The JSON Schema of the create's ``responses`` (``questions.responses_schema``).
    questions: dict[str, Any]


def offered_event_types(sub_account: SubAccount) -> list[OfferedEventType]:
    """The event types agents can book now, by name: active, and for a team type with at
    least one active host (one with none takes no booking). A few statements whatever the
    number of types: the types with their team lists and profiles, the hosts, the default
    profile."""
    settings = sub_account.settings
    hosts = {host.id: host for host in hosts_of(sub_account.id)}
    default = profile_for(sub_account, None)
    offered = []
    for event_type in db.session.scalars(
        select(EventType)
        .where(EventType.sub_account_id == sub_account.id, EventType.active)
        .options(selectinload(EventType.hosts), selectinload(EventType.availability_profile))
        .order_by(EventType.name, EventType.id)
    ):
        if event_type.is_team:
            team = [hosts[listed.host_id] for listed in event_type.hosts]
            with_hosts = [host for host in team if host.active]
            if not with_hosts:
                continue
        else:
            with_hosts = [hosts[event_type.host_id]]
        terms = booking_terms(settings, event_type)
        offered.append(
            OfferedEventType(
                event_type=event_type,
                hosts=with_hosts,
                timezone=hours_zone(event_type.availability_profile or default, settings),
                slot_interval=terms.step_minutes,
                minimum_notice_minutes=terms.notice_minutes,
                booking_horizon_days=terms.horizon_days,
                questions=responses_schema(event_type.questions),
            )
        )
    return offered


def create_event_type(sub_account: SubAccount, document: dict[str, Any]) -> EventType:
    """A new, offered event type from ``EventTypeFields``; its name not yet taken."""
    _, doc = load_named(sub_account.id, EventTypeFields(), document, EventType)
    event_type = EventType(sub_account_id=sub_account.id, active=True)
    _apply(sub_account, event_type, doc)
    db.session.add(event_type)
    db.session.flush()
    return event_type


def update_event_type(
    sub_account: SubAccount, event_type_id: int, document: dict[str, Any]
) -> EventType:
    """Every field replaced by ``document``'s. Bookings already made keep their time and the
    buffers they were made with (``Booking.occupied_*``)."""
    event_type = get_event_type(sub_account, event_type_id, offered_only=False)
    doc = load_document(EventTypeFields(), document)
    refuse_taken_name(EventType, sub_account, doc["name"], except_id=event_type.id)
    _apply(sub_account, event_type, doc)
    db.session.flush()
    return event_type


def set_event_type_offered(sub_account: SubAccount, event_type_id: int, offered: bool) -> EventType:
    """Deactivate (``offered=False``) or reactivate the event type."""
    event_type = get_event_type(sub_account, event_type_id, offered_only=False)
    event_type.active = offered
    db.session.flush()
    return event_type


def _apply(sub_account: SubAccount, event_type: EventType, doc: dict[str, Any]) -> None:
    profile = chosen_profile(sub_account, doc["availabilityProfileId"])
    _assign(sub_account, event_type, doc)
    require_meeting_connection(sub_account.id, doc["locationKind"])
    event_type.name = doc["name"]
    event_type.duration = doc["duration"]
    event_type.buffer_before = doc["bufferBefore"]
    event_type.buffer_after = doc["bufferAfter"]
    event_type.slot_interval = doc["slotInterval"]
    event_type.location = doc["location"]
    event_type.location_kind = doc["locationKind"]
    event_type.seats = doc["seats"]
    event_type.availability_profile = profile
    event_type.minimum_notice_minutes = doc["minimumNoticeMinutes"]
    event_type.booking_horizon_days = doc["bookingHorizonDays"]
    if "reminders" in doc:
        event_type.reminders = doc["reminders"]
    if "bookingLimits" in doc:
        event_type.booking_limits = doc["bookingLimits"]
    if "questions" in doc:
        event_type.questions = stored_questions(doc["questions"])


def _assign(sub_account: SubAccount, event_type: EventType, doc: dict[str, Any]) -> None:
    """Who the event type's bookings are made with (``assign_hosts``), checked against the
    sub account's hosts by id."""
    hosts = {host.id: host for host in hosts_of(sub_account.id)}
    by_name = {host.name: host for host in hosts.values()}
    listed = [hosts.get(item["hostId"]) for item in doc["hosts"]]
    named = {
        **doc,
        "hosts": [
            {"name": host.name if host else f"#{item['hostId']}", **item}
            for host, item in zip(listed, doc["hosts"], strict=True)
        ],
    }
    problems = assignment_problems(named, set(by_name))
    if doc["hostId"] is not None and doc["hostId"] not in hosts:
        problems["hostId"] = ["Unknown host."]
    if problems:
        raise InvalidRequest(describe_errors(problems), errors=problems)
    if doc["hostId"] is not None:
        event_type.host_id = doc["hostId"]
    assign_hosts(
        event_type,
        doc,
        [(item["hostId"], item["priority"], item["weight"]) for item in doc["hosts"]],
    )
