"""Provisioning: create agencies, owners, sub accounts, their calendars and API keys from one
JSON document, in one transaction. Used by operators and by scripts (tests, the demo)."""

from __future__ import annotations

import re
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema
from sqlalchemy import func, select

from app.extensions import db
from app.models import (
    Agency,
    AvailabilityProfile,
    BlockedTime,
    BlockedTimeSource,
    CalendarSettings,
    DateOverride,
    EventType,
    Permission,
    Role,
    SubAccount,
    User,
    WeeklyHours,
)
from app.services.accounts.api_keys import issue_api_key
from app.services.accounts.passwords import hash_password
from app.services.common.errors import InvalidRequest
from app.services.integrations.calendars.connections import CalendarConnectionDoc, create_connection
from app.services.integrations.webhooks.subscriptions import WebhookDoc, create_subscription
from app.validation import (
    Text,
    TimezoneField,
    UTCInstantField,
    describe_errors,
    flatten_errors,
)

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_CLOCK = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$|^24:00$")
_MINUTES = validate.Range(min=5, max=1440)


class ProvisioningInvalid(InvalidRequest):
    pass


class HoursRange(fields.Field):
    """``["09:00", "17:00"]`` → ``(540, 1020)``, minutes after local midnight."""

    default_error_messages = {
        "invalid": 'Expected ["HH:MM", "HH:MM"] with the start before the end.',
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple:
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise self.make_error("invalid")
        minutes = [clock_minutes(clock) for clock in value]
        if None in minutes or minutes[0] >= minutes[1]:
            raise self.make_error("invalid")
        return tuple(minutes)


def clock_minutes(clock: Any) -> int | None:
    """``"09:30"`` → 570, minutes after local midnight (``"24:00"``, the day's end, is 1440);
    None for anything that is not such a clock. Shared with the dashboard's hours forms, which
    check each end of a range on its own so a message can stand next to the wrong one."""
    if not isinstance(clock, str) or not _CLOCK.match(clock):
        return None
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def _unique_names(items: list[dict], field: str = "name") -> dict[int, dict[str, list[str]]]:
    seen: set[str] = set()
    errors: dict[int, dict[str, list[str]]] = {}
    for index, item in enumerate(items):
        if item[field] in seen:
            errors[index] = {field: [f"Duplicate name '{item[field]}'."]}
        seen.add(item[field])
    return errors


class ApiKeyDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=255))
    permissions = fields.List(
        fields.String(validate=validate.OneOf([p.value for p in Permission])), required=True
    )
    expiresAt = UTCInstantField(load_default=None, allow_none=True)
    active = fields.Boolean(load_default=True)


class OwnerDoc(Schema):
    email = fields.Email(required=True, validate=validate.Length(max=254))
    password = Text(required=True, validate=validate.Length(min=8, max=1024))


class SettingsDoc(Schema):
    defaultDuration = fields.Integer(load_default=30, validate=_MINUTES, strict=True)
    minimumNoticeMinutes = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=525600), strict=True
    )
    bookingHorizonDays = fields.Integer(
        load_default=60, validate=validate.Range(min=1, max=3650), strict=True
    )
    defaultLocation = Text(load_default=None, allow_none=True, validate=validate.Length(max=500))
    notifyOnBooking = fields.Boolean(load_default=True)
    notificationEmail = fields.Email(
        load_default=None, allow_none=True, validate=validate.Length(max=254)
    )
    reminderMinutesBefore = fields.Integer(
        load_default=None, allow_none=True, validate=validate.Range(min=1, max=10080)
    )
    autoCompleteBookings = fields.Boolean(load_default=False)


class DateOverrideDoc(Schema):
    date = fields.Date(required=True)
    hours = fields.List(HoursRange(), required=True)


class ProfileDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=255))
    timezone = TimezoneField(load_default=None)
    default = fields.Boolean(load_default=False)
    weeklyHours = fields.Dict(
        keys=fields.String(validate=validate.OneOf(WEEKDAYS)),
        values=fields.List(HoursRange()),
        load_default=dict,
    )
    dateOverrides = fields.List(fields.Nested(DateOverrideDoc), load_default=list)


class BlockedTimeDoc(Schema):
    start = UTCInstantField(required=True)
    end = UTCInstantField(required=True)
    reason = Text(load_default=None, allow_none=True, validate=validate.Length(max=500))

    @validates_schema
    def end_after_start(self, data: dict, **kwargs: Any) -> None:
        if data["end"] <= data["start"]:
            raise ValidationError("Must be after start.", "end")


class EventTypeDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=255))
    duration = fields.Integer(required=True, validate=_MINUTES, strict=True)
    bufferBefore = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=1440), strict=True
    )
    bufferAfter = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=1440), strict=True
    )
    slotInterval = fields.Integer(load_default=None, allow_none=True, validate=_MINUTES)
    location = Text(load_default=None, allow_none=True, validate=validate.Length(max=500))
    availabilityProfile = Text(load_default=None, allow_none=True)
    minimumNoticeMinutes = fields.Integer(
        load_default=None, allow_none=True, validate=validate.Range(min=0, max=525600)
    )
    bookingHorizonDays = fields.Integer(
        load_default=None, allow_none=True, validate=validate.Range(min=1, max=3650)
    )


class SubAccountDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=255))
    timezone = TimezoneField(load_default="UTC")
    settings = fields.Nested(SettingsDoc, load_default=lambda: SettingsDoc().load({}))
    availabilityProfiles = fields.List(fields.Nested(ProfileDoc), load_default=list)
    blockedTimes = fields.List(fields.Nested(BlockedTimeDoc), load_default=list)
    eventTypes = fields.List(fields.Nested(EventTypeDoc), load_default=list)
    apiKeys = fields.List(fields.Nested(ApiKeyDoc), load_default=list)
    calendarConnections = fields.List(fields.Nested(CalendarConnectionDoc), load_default=list)
    webhooks = fields.List(fields.Nested(WebhookDoc), load_default=list)

    @validates_schema
    def references_resolve(self, data: dict, **kwargs: Any) -> None:
        errors: dict[str, Any] = {}
        for field in (
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
        if sum(1 for p in data["availabilityProfiles"] if p["default"]) > 1:
            errors["availabilityProfiles"] = ["At most one profile may be the default."]
        if errors:
            raise ValidationError(errors)


class AgencyDoc(Schema):
    name = Text(required=True, validate=validate.Length(min=1, max=255))
    owner = fields.Nested(OwnerDoc, required=True)
    apiKeys = fields.List(fields.Nested(ApiKeyDoc), load_default=list)
    subAccounts = fields.List(fields.Nested(SubAccountDoc), load_default=list)

    @validates_schema
    def names_unique(self, data: dict, **kwargs: Any) -> None:
        errors = {f: d for f in ("apiKeys", "subAccounts") if (d := _unique_names(data[f]))}
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


def build_profile(sub_account: SubAccount, doc: dict, is_default: bool) -> AvailabilityProfile:
    profile = AvailabilityProfile(
        sub_account_id=sub_account.id,
        name=doc["name"],
        timezone=doc["timezone"] or sub_account.settings.timezone,
        is_default=is_default,
    )
    for day, ranges in doc["weeklyHours"].items():
        for start, end in ranges:
            profile.weekly_hours.append(
                WeeklyHours(weekday=WEEKDAYS.index(day), start_minute=start, end_minute=end)
            )
    for override in doc["dateOverrides"]:
        rows = [
            DateOverride(date=override["date"], start_minute=start, end_minute=end)
            for start, end in override["hours"]
        ] or [DateOverride(date=override["date"])]
        profile.date_overrides.extend(rows)
    db.session.add(profile)
    return profile


def _create_sub_account(agency: Agency, doc: dict) -> dict[str, Any]:
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
        reminder_minutes_before=settings["reminderMinutesBefore"],
        auto_complete_bookings=settings["autoCompleteBookings"],
    )
    db.session.add(sub_account)
    db.session.flush()

    has_default = any(p["default"] for p in doc["availabilityProfiles"])
    profiles = {
        p["name"]: build_profile(sub_account, p, p["default"] or (not has_default and i == 0))
        for i, p in enumerate(doc["availabilityProfiles"])
    }
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
        )
        db.session.add(event_types[et["name"]])
    connections = {c["name"]: create_connection(sub_account, c) for c in doc["calendarConnections"]}
    webhooks = {w["name"]: create_subscription(sub_account, w) for w in doc["webhooks"]}
    db.session.flush()
    return {
        "id": sub_account.id,
        "name": sub_account.name,
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
                "subAccounts": [_create_sub_account(agency, s) for s in doc["subAccounts"]],
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
    return db.session.get(SubAccount, _create_sub_account(agency, doc)["id"])
