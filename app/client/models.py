"""The API's resources as typed values: times are timezone-aware ``datetime``s (the API's ISO
8601 strings, parsed), names are snake_case. Fields the API leaves out of an answer (the
update's reduced booking, for one) are ``None``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any


def without_none(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields that have a value: the API reads a field left out as "not given"."""
    return {key: value for key, value in fields.items() if value is not None}


def parse_instant(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Slot:
    start: datetime
    end: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Slot:
        return cls(parse_instant(data["start"]), parse_instant(data["end"]))


@dataclass(frozen=True)
class AvailabilityDay:
    date: date
    slots: list[Slot]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AvailabilityDay:
        return cls(
            date=date.fromisoformat(data["date"]),
            slots=[Slot.from_json(slot) for slot in data["slots"]],
        )


@dataclass(frozen=True)
class Attendee:
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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attendee:
        return cls(
            id=data["id"],
            email=data["email"],
            name=data.get("name"),
            first_name=data.get("firstName"),
            last_name=data.get("lastName"),
            phone=data.get("phone"),
            timezone=data.get("timezone"),
            is_organizer=data.get("isOrganizer"),
            created_at=parse_instant(data.get("createdAt")),
            updated_at=parse_instant(data.get("updatedAt")),
        )


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
            {
                "email": self.email,
                "name": self.name,
                "firstName": self.first_name,
                "lastName": self.last_name,
                "phone": self.phone,
            }
        )


@dataclass(frozen=True)
class Booking:
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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Booking:
        return cls(
            id=data["id"],
            start_time=parse_instant(data["startTime"]),
            end_time=parse_instant(data["endTime"]),
            status=data["status"],
            uid=data.get("uid"),
            title=data.get("title"),
            description=data.get("description"),
            location=data.get("location"),
            timezone=data.get("timezone"),
            metadata=data.get("metadata") or {},
            attendees=[Attendee.from_json(a) for a in data.get("attendees", [])],
            confirmed_at=parse_instant(data.get("confirmedAt")),
            cancelled_at=parse_instant(data.get("cancelledAt")),
            completed_at=parse_instant(data.get("completedAt")),
        )


@dataclass(frozen=True)
class BookingPage:
    bookings: list[Booking]
    total: int
    limit: int
    offset: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BookingPage:
        return cls(
            bookings=[Booking.from_json(b) for b in data["bookings"]],
            total=data["total"],
            limit=data["limit"],
            offset=data["offset"],
        )


@dataclass(frozen=True)
class Cancellation:
    id: int
    status: str
    cancelled_at: datetime
    cancellation_reason: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Cancellation:
        return cls(
            id=data["id"],
            status=data["status"],
            cancelled_at=parse_instant(data["cancelledAt"]),
            cancellation_reason=data.get("cancellationReason"),
        )


@dataclass(frozen=True)
class Hold:
    """A slot held for a short while: book it with ``create_booking(…, hold_token=…)`` before
    ``expires_at``. ``hold_token`` is shown only in this answer."""

    id: int
    event_type_id: int
    start_time: datetime
    end_time: datetime
    expires_at: datetime
    hold_token: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Hold:
        return cls(
            id=data["id"],
            event_type_id=data["eventTypeId"],
            start_time=parse_instant(data["startTime"]),
            end_time=parse_instant(data["endTime"]),
            expires_at=parse_instant(data["expiresAt"]),
            hold_token=data["holdToken"],
        )


@dataclass(frozen=True)
class ReleasedHold:
    id: int
    status: str
    released_at: datetime

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReleasedHold:
        return cls(
            id=data["id"], status=data["status"], released_at=parse_instant(data["releasedAt"])
        )
