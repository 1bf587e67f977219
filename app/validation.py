"""Shared marshmallow fields, and turning nested error dictionaries into messages that name the
field. Used by the API schemas and by provisioning alike; no Flask here."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema

from app.models.limits import (
    DURATION_MAX_MINUTES,
    DURATION_MIN_MINUTES,
    REMINDER_MAX_MINUTES,
    TIMEZONE_MAX,
)
from app.models.reminder import ReminderChannel
from app.models.types import MAX_ID
from app.scheduling.timezones import (
    INSTANT_MAX_LENGTH,
    MAX_YEAR,
    MIN_YEAR,
    InstantInput,
    InvalidInstant,
    is_timezone,
    read_instant,
    zone,
)


def flatten_errors(messages: Any, path: str = "") -> dict[str, list[str]]:
    """``{"attendees": {0: {"email": ["Not a valid email."]}}}`` →
    ``{"attendees[0].email": ["Not a valid email."]}``. Errors about the whole document
    (marshmallow's ``_schema``) are filed under the enclosing path, or ``_body`` at the top."""
    flat: dict[str, list[str]] = {}
    if isinstance(messages, Mapping):
        for key, value in messages.items():
            if key == "_schema":
                child = path
            elif isinstance(key, int):
                child = f"{path}[{key}]"
            else:
                child = f"{path}.{key}" if path else str(key)
            for field, errors in flatten_errors(value, child).items():
                flat.setdefault(field, []).extend(errors)
    elif isinstance(messages, list | tuple):
        for item in messages:
            if isinstance(item, Mapping | list | tuple):
                for field, errors in flatten_errors(item, path).items():
                    flat.setdefault(field, []).extend(errors)
            else:
                flat.setdefault(path or "_body", []).append(str(item))
    else:
        flat.setdefault(path or "_body", []).append(str(messages))
    return flat


def describe_errors(flat: dict[str, list[str]]) -> str:
    """One line for the envelope's ``message``: ``field: problem; other: problem``."""
    parts = []
    for field, errors in flat.items():
        text = " ".join(e.rstrip(".") for e in errors)
        parts.append(text if field == "_body" else f"{field}: {text}")
    return "; ".join(parts)


# What the OpenAPI document says of this module's fields, class-wide (``OPENAPI``; a field's
# own validators and metadata come first). The server checks more than a pattern can say (real
# dates, known zones); the descriptions say it in words.
# Every form ``read_instant`` reads (Python's ``fromisoformat``): extended or basic dates and
# week dates; hour, minute, second and any fraction (``.`` or ``,``); ``Z`` or an offset of
# hours, minutes and seconds; surrounding spaces. Years, months, days, weeks, hours, minutes
# and seconds within their ranges (years ``MIN_YEAR``–``MAX_YEAR``); a value it matches can
# still be refused for what a pattern cannot check (a 31st of February).
_YEAR = r"(19\d\d|2[01]\d\d)"
_DATE = (
    rf"({_YEAR}-?(0[1-9]|1[0-2])-?(0[1-9]|[12]\d|3[01])"
    rf"|{_YEAR}-?W(0[1-9]|[1-4]\d|5[0-3])(-?[1-7])?)"
)
_CLOCK = r"([01]\d|2[0-3])(:?[0-5]\d(:?[0-5]\d([.,]\d+)?)?)?"
INSTANT_PATTERN = rf"^ *{_DATE}([T ]{_CLOCK}(Z|[+-]{_CLOCK})?)? *$"
# No IANA name is a single letter (the shortest are ``GB`` and ``NZ``).
TIMEZONE_PATTERN = r"^[A-Za-z][A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$"
NO_NUL_PATTERN = r"^[^\x00]*$"


# A length in minutes: an event type's duration and slot step, a calendar's default duration,
# an availability query's slot length (the models' check constraints hold the same bounds).
DURATION_MINUTES = validate.Range(min=DURATION_MIN_MINUTES, max=DURATION_MAX_MINUTES)

MAX_ATTENDEES = 50
METADATA_MAX_KEYS = 50
METADATA_KEY_MAX = 40
METADATA_VALUE_MAX = 500
# A booking's metadata, as the document shows it (in requests and in answers).
METADATA_OPENAPI = {
    "maxProperties": METADATA_MAX_KEYS,
    "additionalProperties": {
        "anyOf": [
            {
                "type": "string",
                "maxLength": METADATA_VALUE_MAX,
                "pattern": NO_NUL_PATTERN,
                "nullable": True,  # null is a value too (OpenAPI 3.0 says so on a typed schema)
            },
            {"type": "integer", "minimum": -(2**53) + 1, "maximum": 2**53 - 1},
            {"type": "number", "format": "double", "not": {"type": "integer"}},
            {"type": "boolean"},
        ],
    },
    "description": f"Flat key-value data: at most {METADATA_MAX_KEYS} keys of 1–"
    f"{METADATA_KEY_MAX} characters; values are strings of up to {METADATA_VALUE_MAX} characters, "
    "finite numbers (integers within ±2^53), booleans or null; no nesting",
}


class InstantField(fields.Field):
    """An ISO 8601 date or date-time, kept as ``InstantInput`` until a timezone is known."""

    OPENAPI = {
        "type": "string",
        "minLength": 7,
        "maxLength": INSTANT_MAX_LENGTH,
        "pattern": INSTANT_PATTERN,
        "description": "ISO 8601: a date (`2031-01-06`), or a date-time with or without an offset "
        "(`2031-01-06T14:00:00Z`, `2031-01-06T09:00:00-05:00`, `2031-01-06T09:00`); basic and "
        f"week forms too (`20310106T140000Z`, `2031-W02-1`); at most {INSTANT_MAX_LENGTH} "
        f"characters; years {MIN_YEAR}–{MAX_YEAR}",
    }

    default_error_messages = {"invalid": "Not a valid ISO 8601 date or date-time."}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> InstantInput:
        try:
            return read_instant(value)
        except InvalidInstant:
            raise self.make_error("invalid") from None


class UTCInstantField(InstantField):
    """An ISO 8601 instant resolved at once; naive values and dates are read as UTC."""

    # Deserializes to the resolved instant, not InstantField's InstantInput: by design, and
    # only marshmallow calls it.
    def _deserialize(  # type: ignore[override]
        self, value: Any, attr: str | None, data: Any, **kwargs: Any
    ) -> datetime:
        try:
            return super()._deserialize(value, attr, data, **kwargs).resolve(zone("UTC"))
        except InvalidInstant:
            raise self.make_error("invalid") from None


class TimezoneField(fields.String):  # IANA names never contain NUL, so no Text needed
    """An IANA timezone name."""

    OPENAPI = {
        "minLength": 1,
        "maxLength": TIMEZONE_MAX,
        "pattern": TIMEZONE_PATTERN,
        "description": "An IANA timezone name the server knows, e.g. `America/New_York`",
    }

    default_error_messages = {"timezone": "Unknown timezone '{value}'; use an IANA name."}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        name = super()._deserialize(value, attr, data, **kwargs)
        if not is_timezone(name):
            raise self.make_error("timezone", value=name[:TIMEZONE_MAX])
        return name


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored (PostgreSQL takes neither NUL characters nor lone UTF-16
    surrogates, which JSON's ``\\ud800`` escapes can produce), or None."""
    if "\x00" in text:
        return "Must not contain NUL characters."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "Must be valid Unicode (no lone surrogates)."
    return None


class Text(fields.String):
    """A string that can be stored: refused with a 400, not failing with a 500."""

    OPENAPI = {"pattern": NO_NUL_PATTERN}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        problem = unstorable(text)
        if problem is not None:
            raise ValidationError(problem)
        return text


# A list of reminders (an event type's, a sub account's default): each an offset before the
# start and where it goes (``app.models.ReminderChannel``).
REMINDERS_MAX = 5


class ReminderSchema(Schema):
    minutesBefore = fields.Integer(
        required=True, strict=True, validate=validate.Range(min=1, max=REMINDER_MAX_MINUTES)
    )
    channels = fields.List(
        fields.String(validate=validate.OneOf([c.value for c in ReminderChannel])),
        required=True,
        validate=validate.Length(min=1, max=len(ReminderChannel)),
    )

    @validates_schema
    def _each_channel_once(self, data: dict[str, Any], **kwargs: Any) -> None:
        if len(set(data.get("channels", ()))) != len(data.get("channels", ())):
            raise ValidationError("Each channel at most once.", "channels")


def _distinct_offsets(reminders: list[dict[str, Any]]) -> None:
    offsets = [r["minutesBefore"] for r in reminders]
    if len(set(offsets)) != len(offsets):
        raise ValidationError("Two reminders with the same minutesBefore.")


def reminder_list(**kwargs: Any) -> fields.List:
    """The field of a reminder list: at most ``REMINDERS_MAX``, each offset once."""
    return fields.List(
        fields.Nested(ReminderSchema),
        validate=[validate.Length(max=REMINDERS_MAX), _distinct_offsets],
        **kwargs,
    )


class _PeriodLimitSchema(Schema):
    count = fields.Integer(
        load_default=None, allow_none=True, strict=True, validate=validate.Range(min=1, max=1000)
    )
    minutes = fields.Integer(
        load_default=None,
        allow_none=True,
        strict=True,
        validate=validate.Range(min=1, max=31 * 24 * 60),
    )


class BookingLimitsSchema(Schema):
    """``bookingLimits``: at most ``count`` bookings and/or ``minutes`` minutes of bookings a
    day, week (Monday to Sunday) and month, each part optional (``app.scheduling.caps``)."""

    perDay = fields.Nested(_PeriodLimitSchema, allow_none=True)
    perWeek = fields.Nested(_PeriodLimitSchema, allow_none=True)
    perMonth = fields.Nested(_PeriodLimitSchema, allow_none=True)


def booking_limits(**kwargs: Any) -> fields.Nested:
    """The field of a ``bookingLimits`` document (null: no cap)."""
    return fields.Nested(BookingLimitsSchema, allow_none=True, **kwargs)


def host_id_field(description: str) -> fields.Integer:
    """An optional ``hostId`` of a request: one of the event type's hosts, by id (what it does
    there is ``description``'s)."""
    return fields.Integer(
        validate=validate.Range(min=1, max=MAX_ID), metadata={"description": description}
    )
