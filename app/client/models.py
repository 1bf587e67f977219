"""The API's resources as typed values: times are timezone-aware ``datetime``s (the API's ISO
8601 strings, parsed), names are snake_case. Fields the API leaves out of an answer (the
update's reduced booking, for one) are ``None``.

Each model reads its answer by its own fields (``FromJson``): a field's name in the JSON is its
camelCase (``api_name``), its type says how the value is read. ``tests/api/test_client_models.py``
holds the fields to the OpenAPI document, so the models stay the one statement of the shapes."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Self

# A field's metadata key: the API leaves the field out (rather than null) when it has no value.
OMITTED = "omitted_when_none"


def without_none(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields that have a value: the API reads a field left out as "not given"."""
    return {key: value for key, value in fields.items() if value is not None}


def parse_instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def api_name(name: str) -> str:
    """A field's name in the API's JSON: ``first_name`` → ``firstName``."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _reader(hint: Any) -> Callable[[Any], Any]:
    """How a JSON value becomes a value of the type ``hint`` (``X | None`` reads as ``X``):
    instants and dates are parsed, lists of models read item by item, the rest kept as is."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if hint is datetime:
        return parse_instant
    if hint is date:
        return date.fromisoformat
    if typing.get_origin(hint) is list and hasattr(typing.get_args(hint)[0], "from_json"):
        model = typing.get_args(hint)[0]
        return lambda items: [model.from_json(item) for item in items]
    return lambda value: value


@functools.cache
def _fields(model: type) -> list[tuple[str, str, dataclasses.Field, Callable[[Any], Any]]]:
    """Per field of ``model``: its name, its API name, the field, and its ``_reader``."""
    hints = typing.get_type_hints(model)
    return [
        (f.name, api_name(f.name), f, _reader(hints[f.name])) for f in dataclasses.fields(model)
    ]


class FromJson:
    """``from_json`` for a dataclass model: a field without a default is required (its absence
    a ``KeyError``), one with a default takes it when the answer leaves the field out or null."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        values = {}
        model: type = cls  # (functools.cache's wrapper is typed to take a Hashable)
        for name, key, spec, read in _fields(model):
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                value = data[key]
                values[name] = None if value is None else read(value)
            elif data.get(key) is not None:
                values[name] = read(data[key])
        return cls(**values)


@dataclass(frozen=True)
class Slot(FromJson):
    start: datetime
    end: datetime
    # Availability of an event type with seats: how many bookings the slot still takes. The
    # API leaves it out for other slots, and so does the JSON made of a model (``OMITTED``).
    seats_remaining: int | None = field(default=None, metadata={OMITTED: True})


@dataclass(frozen=True)
class AvailabilityDay(FromJson):
    date: date
    slots: list[Slot]


@dataclass(frozen=True)
class Attendee(FromJson):
    id: int
    email: str
    name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    phone: str | None = None
    timezone: str | None = None
    is_organizer: bool | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # The attendee's own link to see, cancel or move the booking: hand it to them.
    manage_url: str | None = None


@dataclass(frozen=True)
class NewAttendee:
    """An attendee to send with a create or an update; ``email`` is required."""

    email: str
    name: str | None = None
    first_name: str | None = None
    last_name: str | None = None
    phone: str | None = None

    def to_json(self) -> dict[str, str]:
        return without_none(
            {api_name(f.name): getattr(self, f.name) for f in dataclasses.fields(self)}
        )


@dataclass(frozen=True)
class BookingHost(FromJson):
    """A host the booking is made with (a clinic's dentist, a sales rep)."""

    id: int
    name: str | None = None
    email: str | None = None


@dataclass(frozen=True)
class Booking(FromJson):
    id: int
    start_time: datetime
    end_time: datetime
    status: str
    uid: str | None = None
    title: str | None = None
    description: str | None = None
    location: str | None = None
    timezone: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    attendees: list[Attendee] = field(default_factory=list)
    confirmed_at: datetime | None = None
    cancelled_at: datetime | None = None
    completed_at: datetime | None = None
    # Who the booking is with, and why (``single``, ``requested``, ``priority``, ``weight``,
    # ``least_recently_booked``, ``collective``).
    hosts: list[BookingHost] = field(default_factory=list)
    assignment_reason: str | None = None
    # The answers to its event type's questions, by question key.
    responses: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BookingPage(FromJson):
    bookings: list[Booking]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True)
class Cancellation(FromJson):
    id: int
    status: str
    cancelled_at: datetime
    cancellation_reason: str | None = None


@dataclass(frozen=True)
class Hold(FromJson):
    """A slot held for a short while: book it with ``create_booking(…, hold_token=…)`` before
    ``expires_at``. ``hold_token`` is shown only in this answer."""

    id: int
    event_type_id: int
    start_time: datetime
    end_time: datetime
    expires_at: datetime
    hold_token: str


@dataclass(frozen=True)
class ReleasedHold(FromJson):
    id: int
    status: str
    released_at: datetime


@dataclass(frozen=True)
class EventTypeHost(FromJson):
    """A host an event type is booked with: its ``id`` is what ``host_id`` takes."""

    id: int
    name: str | None = None


@dataclass(frozen=True)
class EventType(FromJson):
    """An event type that takes bookings: book it with its ``id``. ``questions`` is the JSON
    Schema of the ``responses`` a booking sends (its ``properties`` by question key, each
    ``title`` the question; ``required`` the ones that must be answered)."""

    id: int
    name: str
    duration: int
    slot_interval: int
    timezone: str
    location_kind: str
    seats: int
    minimum_notice_minutes: int
    booking_horizon_days: int
    assignment: str
    location: str | None = None
    hosts: list[EventTypeHost] = field(default_factory=list)
    questions: dict[str, Any] = field(default_factory=dict)
