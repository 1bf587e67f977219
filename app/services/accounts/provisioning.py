"""Provisioning: create agencies, owners, sub accounts, their calendars and API keys from one
JSON document, in one transaction. Used by operators and by scripts (tests, the demo)."""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema
from sqlalchemy import func, select

from app.extensions import db
from app.models import (
    Agency,
    BlockedTime,
    BlockedTimeSource,
    CalendarSettings,
    EventType,
    Permission,
    Role,
    SubAccount,
    User,
)
from app.models.limits import EMAIL_MAX, NAME_MAX, PASSWORD_MAX, PASSWORD_MIN, TEAM_HOSTS_MAX
from app.services.accounts.api_keys import issue_api_key
from app.services.accounts.passwords import hash_password
from app.services.availability.blocked_times import BlockedTimeDoc
from app.services.availability.event_types import EventTypeDoc
from app.services.availability.hosts import (
    AssignmentDoc,
    EventTypeHostDoc,
    HostDoc,
    assign_hosts,
    assignment_problems,
    create_hosts,
)
from app.services.availability.profiles import (
    WEEKDAYS,  # noqa: F401 - read here by scripts that write provisioning documents (bench/)
    ProfileDoc,
    build_profile,
)
from app.services.availability.questions import stored_questions
from app.services.availability.settings import SettingsDoc, SubAccountNameDoc
from app.services.common.errors import InvalidRequest
from app.services.integrations.calendars.connections import CalendarConnectionDoc, create_connection
from app.services.integrations.calendars.meetings import Connected, missing_meeting_connection
from app.services.integrations.webhooks.subscriptions import WebhookDoc, create_subscription
from app.validation import (
    Text,
    UTCInstantField,
    describe_errors,
    flatten_errors,
)


class ProvisioningInvalid(InvalidRequest):
    pass


def _unique_names(items: list[dict], field: str = "name") -> dict[int, dict[str, list[str]]]:
    seen: set[str] = set()
    errors: dict[int, dict[str, list[str]]] = {}
    for index, item in enumerate(items):
        if item[field] in seen:
            errors[index] = {field: [f"Duplicate name '{item[field]}'."]}
        seen.add(item[field])
    return errors


class ApiKeyDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    permissions = fields.List(
        fields.String(validate=validate.OneOf([p.value for p in Permission])), required=True
    )
    expiresAt = UTCInstantField(load_default=None, allow_none=True)
    active = fields.Boolean(load_default=True)


class OwnerDoc(Schema):
    email = fields.Email(required=True, validate=validate.Length(max=EMAIL_MAX))
    password = Text(required=True, validate=validate.Length(min=PASSWORD_MIN, max=PASSWORD_MAX))


class ProvisionedConnectionDoc(CalendarConnectionDoc):
    """A connection of a provisioned sub account: ``host`` names the host whose calendar it
    is (default: the first)."""

    FIELDS_OF_EVERY_KIND = CalendarConnectionDoc.FIELDS_OF_EVERY_KIND | {"host"}

    host = Text(load_default=None, allow_none=True)


class ProvisionedEventTypeDoc(EventTypeDoc, AssignmentDoc):
    """An event type of a provisioned sub account: ``host`` names the host its bookings are
    made with (default: the first)."""

    host = Text(load_default=None, allow_none=True)
    # A round-robin or collective type lists its hosts (``EventTypeHostDoc``) and leaves
    # ``host`` out.
    hosts = fields.List(
        fields.Nested(EventTypeHostDoc),
        load_default=list,
        validate=validate.Length(max=TEAM_HOSTS_MAX),
    )


class SubAccountDoc(SubAccountNameDoc):
    """A sub account: its own fields (``SubAccountNameDoc``), and what it starts with, each
    read by the document of the area that owns it."""

    settings = fields.Nested(SettingsDoc, load_default=lambda: SettingsDoc().load({}))
    hosts = fields.List(fields.Nested(HostDoc), load_default=list)
    availabilityProfiles = fields.List(fields.Nested(ProfileDoc), load_default=list)
    blockedTimes = fields.List(fields.Nested(BlockedTimeDoc), load_default=list)
    eventTypes = fields.List(fields.Nested(ProvisionedEventTypeDoc), load_default=list)
    apiKeys = fields.List(fields.Nested(ApiKeyDoc), load_default=list)
    calendarConnections = fields.List(fields.Nested(ProvisionedConnectionDoc), load_default=list)
    webhooks = fields.List(fields.Nested(WebhookDoc), load_default=list)

    @validates_schema
    def references_resolve(self, data: dict, **kwargs: Any) -> None:
        errors: dict[str, Any] = {}
        for field in (
            "hosts",
            "availabilityProfiles",
            "eventTypes",
            "apiKeys",
            "calendarConnections",
            "webhooks",
        ):
            duplicates = _unique_names(data[field])
            if duplicates:
                errors[field] = duplicates
        profiles = {p["name"] for p in data["availabilityProfiles"]}
        unknown = {
            index: {
                "availabilityProfile": [
                    f"Unknown availability profile '{et['availabilityProfile']}'."
                ]
            }
            for index, et in enumerate(data["eventTypes"])
            if et["availabilityProfile"] is not None and et["availabilityProfile"] not in profiles
        }
        if unknown:
            errors.setdefault("eventTypes", {}).update(unknown)
        for field, items, key, names, what in (
            ("hosts", data["hosts"], "availabilityProfile", profiles, "availability profile"),
            (
                "calendarConnections",
                data["calendarConnections"],
                "host",
                {h["name"] for h in data["hosts"]},
                "host",
            ),
            ("eventTypes", data["eventTypes"], "host", {h["name"] for h in data["hosts"]}, "host"),
        ):
            for index, item in enumerate(items):
                if item.get(key) is not None and item[key] not in names:
                    errors.setdefault(field, {}).setdefault(index, {})[key] = [
                        f"Unknown {what} '{item[key]}'."
                    ]
        host_names = {h["name"] for h in data["hosts"]} or {data["name"]}
        for index, et in enumerate(data["eventTypes"]):
            if problems := assignment_problems(et, host_names):
                errors.setdefault("eventTypes", {}).setdefault(index, {}).update(problems)
        # A Google Meet or Teams event type needs a connection of this document that makes it.
        connected = [Connected(c["kind"], c["writeBack"]) for c in data["calendarConnections"]]
        for index, et in enumerate(data["eventTypes"]):
            problem = missing_meeting_connection(et["locationKind"], connected)
            if problem is not None:
                errors.setdefault("eventTypes", {}).setdefault(index, {})["locationKind"] = [
                    problem
                ]
        if sum(1 for p in data["availabilityProfiles"] if p["default"]) > 1:
            errors["availabilityProfiles"] = ["At most one profile may be the default."]
        if errors:
            raise ValidationError(errors)


class AgencyDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=NAME_MAX))
    owner = fields.Nested(OwnerDoc, required=True)
    apiKeys = fields.List(fields.Nested(ApiKeyDoc), load_default=list)
    subAccounts = fields.List(fields.Nested(SubAccountDoc), load_default=list)

    @validates_schema
    def names_unique(self, data: dict, **kwargs: Any) -> None:
        errors: dict[str, Any] = {
            f: d for f in ("apiKeys", "subAccounts") if (d := _unique_names(data[f]))
        }
        # A host that is a dashboard user is one of the agency's: its owner.
        owner = data["owner"]["email"].lower()
        for s_index, sub in enumerate(data["subAccounts"]):
            for h_index, host in enumerate(sub["hosts"]):
                if host["user"] is not None and host["user"].lower() != owner:
                    errors.setdefault("subAccounts", {}).setdefault(s_index, {}).setdefault(
                        "hosts", {}
                    )[h_index] = {"user": [f"No user of the agency has email '{host['user']}'."]}
        if errors:
            raise ValidationError(errors)


class ProvisioningDoc(Schema):
    agencies = fields.List(fields.Nested(AgencyDoc), required=True)

    @validates_schema
    def owner_emails_free(self, data: dict, **kwargs: Any) -> None:
        emails = [a["owner"]["email"].lower() for a in data["agencies"]]
        taken = set(
            db.session.scalars(
                select(func.lower(User.email)).where(func.lower(User.email).in_(emails))
            )
        )
        errors: dict[int, Any] = {}
        for index, email in enumerate(emails):
            if email in taken or emails.index(email) != index:
                errors[index] = {"owner": {"email": [f"A user with email '{email}' exists."]}}
        if errors:
            raise ValidationError({"agencies": errors})


def load_provisioning_document(document: Any) -> dict[str, Any]:
    """Validate a provisioning document; ``ProvisioningInvalid`` names each bad field's path."""
    if not isinstance(document, dict):
        raise ProvisioningInvalid("The document must be a JSON object with an 'agencies' list.")
    try:
        return ProvisioningDoc().load(document)
    except ValidationError as err:
        flat = flatten_errors(err.messages)
        raise ProvisioningInvalid(describe_errors(flat), errors=flat) from None


def _create_sub_account(agency: Agency, doc: dict, users: dict[str, User]) -> dict[str, Any]:
    settings = doc["settings"]
    sub_account = SubAccount(agency=agency, name=doc["name"])
    sub_account.settings = CalendarSettings(
        timezone=doc["timezone"],
        default_duration=settings["defaultDuration"],
        minimum_notice_minutes=settings["minimumNoticeMinutes"],
        booking_horizon_days=settings["bookingHorizonDays"],
        default_location=settings["defaultLocation"],
        notify_on_booking=settings["notifyOnBooking"],
        notification_email=settings["notificationEmail"],
        reminders=settings["reminders"],
        booking_limits=settings["bookingLimits"],
        auto_complete_bookings=settings["autoCompleteBookings"],
        attendee_change_notice_hours=settings["attendeeChangeNoticeHours"],
        attendee_max_reschedules=settings["attendeeMaxReschedules"],
    )
    db.session.add(sub_account)
    db.session.flush()

    has_default = any(p["default"] for p in doc["availabilityProfiles"])
    profiles = {
        p["name"]: build_profile(sub_account, p, p["default"] or (not has_default and i == 0))
        for i, p in enumerate(doc["availabilityProfiles"])
    }
    hosts = create_hosts(sub_account, doc["hosts"], profiles, users)
    for blocked in doc["blockedTimes"]:
        db.session.add(
            BlockedTime(
                sub_account_id=sub_account.id,
                start_at=blocked["start"],
                end_at=blocked["end"],
                reason=blocked["reason"],
                source=BlockedTimeSource.MANUAL,
            )
        )
    event_types = {}
    for et in doc["eventTypes"]:
        profile = profiles.get(et["availabilityProfile"]) if et["availabilityProfile"] else None
        event_types[et["name"]] = EventType(
            sub_account_id=sub_account.id,
            name=et["name"],
            duration=et["duration"],
            buffer_before=et["bufferBefore"],
            buffer_after=et["bufferAfter"],
            slot_interval=et["slotInterval"],
            location=et["location"],
            availability_profile=profile,
            minimum_notice_minutes=et["minimumNoticeMinutes"],
            booking_horizon_days=et["bookingHorizonDays"],
            reminders=et.get("reminders"),
            booking_limits=et.get("bookingLimits"),
            questions=stored_questions(et.get("questions") or []),
            location_kind=et["locationKind"],
            seats=et["seats"],
        )
        if et["host"] is not None:
            event_types[et["name"]].host_id = hosts[et["host"]].id
        team = [(hosts[h["name"]].id, h["priority"], h["weight"]) for h in et["hosts"]]
        assign_hosts(event_types[et["name"]], et, team)
        db.session.add(event_types[et["name"]])
    connections = {}
    for c in doc["calendarConnections"]:
        connections[c["name"]] = create_connection(sub_account, c, by_operator=True)
        if c["host"] is not None:
            connections[c["name"]].host_id = hosts[c["host"]].id
    webhooks = {w["name"]: create_subscription(sub_account, w) for w in doc["webhooks"]}
    db.session.flush()
    return {
        "id": sub_account.id,
        "name": sub_account.name,
        "hosts": {name: host.id for name, host in hosts.items()},
        "eventTypes": {name: et.id for name, et in event_types.items()},
        "availabilityProfiles": {name: p.id for name, p in profiles.items()},
        "apiKeys": {k["name"]: _issue(agency, sub_account, k) for k in doc["apiKeys"]},
        "calendarConnections": {name: c.id for name, c in connections.items()},
        "webhooks": {
            name: {"id": subscription.id, "secret": secret}
            for name, (subscription, secret) in webhooks.items()
        },
    }


def _issue(agency: Agency, sub_account: SubAccount | None, doc: dict) -> str:
    _, plain = issue_api_key(
        agency=agency,
        sub_account=sub_account,
        name=doc["name"],
        permissions=doc["permissions"],
        expires_at=doc["expiresAt"],
        active=doc["active"],
    )
    return plain


def provision(document: Any) -> dict[str, Any]:
    """Create everything ``document`` describes; returns ids and the plain API keys.

    Flushes only: the caller commits, or rolls back so a failure leaves nothing behind.
    """
    data = load_provisioning_document(document)
    created = []
    for doc in data["agencies"]:
        agency = Agency(name=doc["name"])
        owner = User(
            agency=agency,
            email=doc["owner"]["email"].lower(),
            password_hash=hash_password(doc["owner"]["password"]),
            role=Role.AGENCY_OWNER,
        )
        db.session.add_all([agency, owner])
        db.session.flush()
        created.append(
            {
                "id": agency.id,
                "name": agency.name,
                "ownerId": owner.id,
                "apiKeys": {k["name"]: _issue(agency, None, k) for k in doc["apiKeys"]},
                "subAccounts": [
                    _create_sub_account(agency, s, {owner.email: owner}) for s in doc["subAccounts"]
                ],
            }
        )
    return {"agencies": created}


def add_sub_account(agency: Agency, document: dict[str, Any]) -> SubAccount:
    """One sub account of ``agency`` from a sub account document (``name``, ``timezone``,
    the rest defaulted as in provisioning), outside a provisioning run: the dashboard's
    "new sub account". Names are unique within the agency."""
    try:
        doc = SubAccountDoc().load(document)
    except ValidationError as err:
        flat = flatten_errors(err.messages)
        raise ProvisioningInvalid(describe_errors(flat), errors=flat) from None
    taken = db.session.scalar(
        select(SubAccount.id).where(
            SubAccount.agency_id == agency.id, SubAccount.name == doc["name"]
        )
    )
    if taken is not None:
        errors = {"name": [f"A sub account named '{doc['name']}' exists."]}
        raise ProvisioningInvalid(describe_errors(errors), errors=errors)
    users = {
        u.email: u for u in db.session.scalars(select(User).where(User.agency_id == agency.id))
    }
    sub_account = db.session.get(SubAccount, _create_sub_account(agency, doc, users)["id"])
    assert sub_account is not None  # just created, in this transaction
    return sub_account
