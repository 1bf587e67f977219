"""Seats: one slot of an event type taken by up to N bookings (a class, a webinar, a group
intake). The one place that says how the seats of a slot share its time.

The bookings (and holds) of one slot of a seated event type form its *group*, named by
``seat_group``: the event type and the slot's exact bounds. The rule, beside the time rule of
``app.scheduling.slots``:

- A group's occupied time (the slot widened by the buffers) is busy for everything else: every
  other event type, and every other slot of its own type, exactly as one booking's would be.
- The group's own slot stays open to its event type while seats remain: ``seats`` minus the
  bookings and live holds of the group. A full group is busy time like any other.

So a seated slot never overlaps another booking, a group never holds more than its seats, and
an event type with one seat (the default) is today's rule: every booking its own group of one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from app.scheduling.intervals import Interval, first_overlap, merge
from app.scheduling.slots import SlotRules


def seat_group(event_type_id: int, slot: Interval) -> str:
    """The name of a seated slot's group (stored with each of its bookings and holds)."""
    return f"{event_type_id}:{int(slot.start.timestamp())}:{int(slot.end.timestamp())}"


def group_slot(group: str, event_type_id: int) -> Interval | None:
    """The slot a ``seat_group`` names, if it is one of ``event_type_id``'s."""
    owner, start, end = group.split(":")
    if owner != str(event_type_id):
        return None
    return Interval(datetime.fromtimestamp(int(start), UTC), datetime.fromtimestamp(int(end), UTC))


@dataclass
class SeatGroup:
    """One seated slot: its occupied time and the seats its bookings and live holds take."""

    slot: Interval
    occupied: Interval
    booked: int = 0
    held: int = 0

    @property
    def taken(self) -> int:
        return self.booked + self.held


class SeatProblem(StrEnum):
    """Why a seated slot cannot be taken."""

    FULL = "full"  # every seat of the slot is taken
    OVERLAPS = "overlaps"  # another slot's group occupies the time


@dataclass
class SeatedSlots:
    """The groups of one seated event type over a span, keyed by their slot."""

    seats: int
    groups: dict[Interval, SeatGroup] = field(default_factory=dict)

    def add(self, slot: Interval, occupied: Interval, *, held: bool = False) -> None:
        """Count a booking (or, ``held``, a live hold) of the group of ``slot``."""
        group = self.groups.get(slot)
        if group is None:
            group = self.groups[slot] = SeatGroup(slot, occupied)
        else:  # buffers may have changed between two seats: the group occupies the widest
            group.occupied = Interval(
                min(group.occupied.start, occupied.start), max(group.occupied.end, occupied.end)
            )
        if held:
            group.held += 1
        else:
            group.booked += 1

    def remaining(self, slot: Interval) -> int:
        """Seats still free in ``slot`` (all of them if nobody took one)."""
        group = self.groups.get(slot)
        return max(0, self.seats - group.taken) if group else self.seats

    def problem(self, slot: Interval, rules: SlotRules) -> SeatProblem | None:
        """Whether ``slot`` (a slot of this event type) can take one more seat: not if its own
        group is full, nor if another group's time meets the slot's occupied time."""
        occupied = rules.occupied_interval(slot)
        for group in self.groups.values():
            if group.slot == slot:
                if group.taken >= self.seats:
                    return SeatProblem.FULL
            elif group.occupied.overlaps(occupied):
                return SeatProblem.OVERLAPS
        return None

    def keep_open(self, slots: Iterable[Interval], rules: SlotRules) -> list[Interval]:
        """The slots (in order, already clear of every other busy time) that can still take a
        seat."""
        if not self.groups:
            return list(slots)
        shared = merge(self.shared_time())
        # Only a slot that meets some group's time is asked about each group.
        return [
            slot
            for slot in slots
            if first_overlap(rules.occupied_interval(slot), shared) is None
            or self.problem(slot, rules) is None
        ]

    def booked_only(self) -> SeatedSlots:
        """The groups as their bookings alone make them (holds are applied at each question by
        availability kept without an instant: ``app.scheduling.offered``)."""
        return SeatedSlots(
            self.seats,
            {
                slot: SeatGroup(group.slot, group.occupied, group.booked)
                for slot, group in self.groups.items()
                if group.booked
            },
        )

    def booked_in(self, slot: Interval) -> int:
        group = self.groups.get(slot)
        return group.booked if group else 0

    def shared_time(self) -> list[Interval]:
        """Every group's occupied time (busy for anything that is not one of its seats)."""
        return [group.occupied for group in self.groups.values()]


@dataclass(frozen=True)
class Seat:
    """The seat a booking or hold takes: its group, its number (1…count) and the group's
    seats when it was taken (the database keeps each number once per group, within count)."""

    group: str
    number: int
    count: int


def first_free_seat(group: str, seats: int, numbers_taken: Iterable[int]) -> Seat | None:
    """The lowest seat of ``group`` nobody has, or None when all ``seats`` are taken."""
    taken = set(numbers_taken)
    for number in range(1, seats + 1):
        if number not in taken:
            return Seat(group, number, seats)
    return None
