"""Bookable services."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Boolean, CheckConstraint, ForeignKey, Integer, String, func, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import Model
from app.models.availability import AvailabilityProfile
from app.models.host import host_column
from app.models.limits import (
    DURATION_MAX_MINUTES,
    DURATION_MIN_MINUTES,
    LOCATION_MAX,
    NAME_MAX,
    SEATS_MAX,
)
from app.models.types import UTCDateTime, stored_enum, utcnow
from app.scheduling.round_robin import (
    PRIORITY_DEFAULT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    WEIGHT_DEFAULT,
    WEIGHT_MAX,
    WEIGHT_MIN,
)


class LocationKind(StrEnum):
    """Where an event type's meetings happen. For Google Meet and Microsoft Teams the worker
    has the provider make a meeting with the booking's calendar event, and the join link
    becomes the booking's location; the others are the ``location`` text as typed (an
    address, a phone number, a fixed link)."""

    IN_PERSON = "in_person"
    PHONE = "phone"
    GOOGLE_MEET = "google_meet"
    MICROSOFT_TEAMS = "microsoft_teams"
    LINK = "link"


class HostAssignment(StrEnum):
    """Who an event type's bookings are made with: its one host (``host_id``), one of its hosts
    chosen per booking (round robin, ``app.scheduling.round_robin``), or all of them at once
    (collective). Round-robin and collective types list their hosts in ``EventTypeHost``."""

    SINGLE = "single"
    ROUND_ROBIN = "round_robin"
    COLLECTIVE = "collective"


# The kinds whose link the provider makes when the booking's event is written.
MEETING_KINDS = (LocationKind.GOOGLE_MEET, LocationKind.MICROSOFT_TEAMS)


class EventType(Model):
    """A bookable service. Notice and horizon left empty fall back to the calendar settings;
    an empty slot interval means "step by the duration"."""

    __tablename__ = "event_types"
    __table_args__ = (
        CheckConstraint(
            f"duration BETWEEN {DURATION_MIN_MINUTES} AND {DURATION_MAX_MINUTES}", name="duration"
        ),
        CheckConstraint("buffer_before >= 0 AND buffer_after >= 0", name="buffers"),
        CheckConstraint(
            "slot_interval IS NULL OR slot_interval BETWEEN "
            f"{DURATION_MIN_MINUTES} AND {DURATION_MAX_MINUTES}",
            name="step",
        ),
        CheckConstraint(f"seats BETWEEN 1 AND {SEATS_MAX}", name="seats"),
        CheckConstraint("max_ahead IS NULL OR max_ahead >= 0", name="max_ahead"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    # The host its bookings are made with (the sub account's first when none is named); for
    # a round-robin or collective type, its first host (its hosts are ``hosts``).
    host_id: Mapped[int] = host_column()
    assignment: Mapped[HostAssignment] = mapped_column(
        stored_enum(HostAssignment, "assignment", 16),
        default=HostAssignment.SINGLE,
        server_default=HostAssignment.SINGLE.value,
    )
    # Round robin: a host this many bookings ahead of the least-booked is not offered.
    max_ahead: Mapped[int | None] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    duration: Mapped[int] = mapped_column(Integer)
    buffer_before: Mapped[int] = mapped_column(Integer, default=0)
    buffer_after: Mapped[int] = mapped_column(Integer, default=0)
    slot_interval: Mapped[int | None] = mapped_column(Integer)
    location: Mapped[str | None] = mapped_column(String(LOCATION_MAX))
    location_kind: Mapped[LocationKind] = mapped_column(
        stored_enum(LocationKind, "location_kind", 16),
        default=LocationKind.IN_PERSON,
        server_default=LocationKind.IN_PERSON.value,
    )
    # How many bookings one slot takes (a class, a webinar): 1 is one booking a slot. The
    # seats of a slot share its time (``app.scheduling.seats``).
    seats: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    availability_profile_id: Mapped[int | None] = mapped_column(
        ForeignKey("availability_profiles.id", ondelete="SET NULL")
    )
    minimum_notice_minutes: Mapped[int | None] = mapped_column(Integer)
    booking_horizon_days: Mapped[int | None] = mapped_column(Integer)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # The reminders of its bookings (``app.models.reminder.Reminder`` items); None: the sub
    # account's list.
    reminders: Mapped[list[Any] | None] = mapped_column(JSON)
    # At most so many bookings / minutes a day, week, month (``app.scheduling.caps``):
    # ``{"perDay": {"count": K, "minutes": M}, "perWeek": …, "perMonth": …}``; None: no cap.
    booking_limits: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # What its bookings are asked (``app.services.availability.questions``): a list of
    # ``{"key", "label", "type", "required", "options"}``, in the order they are asked.
    questions: Mapped[list[dict[str, Any]]] = mapped_column(
        JSON, default=list, server_default=text("'[]'")
    )
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    availability_profile: Mapped[AvailabilityProfile | None] = relationship()
    hosts: Mapped[list[EventTypeHost]] = relationship(
        cascade="all, delete-orphan", order_by="EventTypeHost.host_id"
    )

    @property
    def is_team(self) -> bool:
        """Whether its bookings are made with one of several hosts, or all of them."""
        return self.assignment is not HostAssignment.SINGLE


class EventTypeHost(Model):
    """A host of a round-robin or collective event type: its priority (0–4, higher first) and
    weight (1–1000) for this type (``app.scheduling.round_robin``), and since when it has been
    eligible without a break (fairness calibrates a host that joined during the month)."""

    __tablename__ = "event_type_hosts"
    __table_args__ = (
        CheckConstraint(f"priority BETWEEN {PRIORITY_MIN} AND {PRIORITY_MAX}", name="priority"),
        CheckConstraint(f"weight BETWEEN {WEIGHT_MIN} AND {WEIGHT_MAX}", name="weight"),
    )

    event_type_id: Mapped[int] = mapped_column(
        ForeignKey("event_types.id", ondelete="CASCADE"), primary_key=True
    )
    host_id: Mapped[int] = mapped_column(
        ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    priority: Mapped[int] = mapped_column(
        Integer, default=PRIORITY_DEFAULT, server_default=str(PRIORITY_DEFAULT)
    )
    weight: Mapped[int] = mapped_column(
        Integer, default=WEIGHT_DEFAULT, server_default=str(WEIGHT_DEFAULT)
    )
    eligible_since: Mapped[datetime] = mapped_column(
        UTCDateTime, default=utcnow, server_default=func.now()
    )
