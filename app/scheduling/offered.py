"""Slots computed once for a calendar version and offered at any instant after.

What availability offers at an instant depends on the calendar (its version) and on the
instant itself: a slot that started, or fell inside the minimum notice, is no longer offered; a
slot that came within the booking horizon now is; a hold that expired no longer keeps its time.
So the costly part is computed without "now" (``open_slots`` with no earliest or latest start,
and without holds), and kept; the cheap part is applied at each question: two binary searches
for notice and horizon, and the holds still live at that instant taken out.

That split gives the same slots as computing everything at the instant: the grid is anchored at
working ranges, not at "now", so notice and horizon only cut the list; and a hold is busy time
like any other, so a slot that clears all other busy time is offered unless its occupied time
meets a live hold.

Instants here are POSIX seconds (floats for expiries, ints for slot bounds): what is kept must
travel to other processes cheaply, and comparisons on numbers are the cheapest there are.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class HeldTime:
    """A slot hold as availability sees it: its occupied time and when it stops counting;
    for a seat of the set's seated event type, the slot it holds a seat of (``seat_start``,
    ``seat_end``): that slot loses a seat, not its place."""

    start: int
    end: int
    expires_at: float
    seat_start: int | None = None
    seat_end: int | None = None
    # A team's set: the host whose time it holds (another host may still take the slot).
    host_id: int | None = None


@dataclass(frozen=True)
class Offer:
    """What a cached slot set offers at one instant: the slots ``first``…``last - 1`` (by
    index), less those in ``held_out``. ``expired_holds`` counts the kept holds that had expired
    by then; with ``first`` and ``last`` it tells one offer of the same set from another."""

    first: int
    last: int
    expired_holds: int
    held_out: frozenset[int] = frozenset()
    # Seated sets: slot index → seats live holds take in it.
    seats_held: Mapping[int, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.first}.{self.last}.{self.expired_holds}"


@dataclass(frozen=True)
class SlotSet:
    """Every slot of a window that working hours and busy time (holds apart) leave open,
    whatever the instant, with what decides which of them an instant offers.

    ``starts`` and ``ends`` are the slots in order; ``days`` is every date of the window in
    order with the range of slot indexes starting on it (``[first, last)``). ``holds`` are the
    holds stored at the calendar's version, live or not, in order of expiry.
    """

    starts: list[int]
    ends: list[int]
    days: list[tuple[str, int, int]]
    holds: list[HeldTime]
    notice_seconds: int
    horizon_seconds: int
    buffer_before_seconds: int
    buffer_after_seconds: int
    # A seated event type's seats per slot (1: unseated), and, when seated, the seats bookings
    # take in each slot (by index; holds are applied at each question, as for unseated sets).
    seats: int = 1
    booked_seats: list[int] = field(default_factory=list)
    # A team's set (a round-robin or collective event type): the hosts free for each slot (by
    # index), so a hold takes its host out of a slot rather than the slot itself; the slot is
    # held out when no host is left (round robin) or any of them is held (``collective``).
    slot_hosts: list[list[int]] = field(default_factory=list)
    collective: bool = False
    # Whatever a reader keeps beside the set (the API's rendered slots): lives with it.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def offer(self, now: float) -> Offer:
        """The slots offered at ``now``: starting at or after now + notice and before now +
        horizon, their occupied time (the slot widened by the buffers) clear of every hold that
        has not expired (a hold counts until its expiry)."""
        first = bisect_left(self.starts, now + self.notice_seconds)
        last = max(first, bisect_left(self.starts, now + self.horizon_seconds))
        expiries = [hold.expires_at for hold in self.holds]
        expired = bisect_right(expiries, now)
        held_out: set[int] = set()
        seats_held: dict[int, int] = {}
        hosts_held: dict[int, set[int]] = {}
        for hold in self.holds[expired:]:
            if self.slot_hosts and hold.host_id is not None:
                for i in self._meeting(hold, first, last):
                    hosts_held.setdefault(i, set()).add(hold.host_id)
                continue
            seat = self._seat_of(hold)
            if seat is None:
                held_out.update(self._meeting(hold, first, last))
                continue
            # A held seat: its slot keeps its place while seats remain; the others it meets
            # are busy, as for any hold.
            seats_held[seat] = seats_held.get(seat, 0) + 1
            held_out.update(i for i in self._meeting(hold, first, last) if i != seat)
        for seat, held in seats_held.items():
            if self.booked_seats[seat] + held >= self.seats:
                held_out.add(seat)
        for i, held_hosts in hosts_held.items():
            free = set(self.slot_hosts[i])
            if (free & held_hosts) if self.collective else not (free - held_hosts):
                held_out.add(i)
        return Offer(first, last, expired, frozenset(held_out), seats_held)

    def seats_remaining(self, offer: Offer, index: int) -> int | None:
        """The seats slot ``index`` has left at ``offer`` (None: not a seated set)."""
        if self.seats <= 1:
            return None
        return self.seats - self.booked_seats[index] - offer.seats_held.get(index, 0)

    def _seat_of(self, hold: HeldTime) -> int | None:
        """The index of the slot ``hold`` holds a seat of, if it is one of the set's."""
        if hold.seat_start is None or self.seats <= 1:
            return None
        i = bisect_left(self.starts, hold.seat_start)
        found = i < len(self.starts) and self.starts[i] == hold.seat_start
        return i if found and self.ends[i] == hold.seat_end else None

    def _meeting(self, hold: HeldTime, first: int, last: int) -> range:
        """Indexes of the slots in ``[first, last)`` whose occupied time overlaps ``hold``:
        ``start - before < hold.end`` and ``end + after > hold.start``. Slots of one set share
        a length, so both bounds are on the ordered starts."""
        if first >= last:
            return range(0)
        length = self.ends[first] - self.starts[first]
        lowest_start = hold.start - length - self.buffer_after_seconds  # exclusive
        highest_start = hold.end + self.buffer_before_seconds  # exclusive
        return range(
            max(first, bisect_right(self.starts, lowest_start)),
            min(last, bisect_left(self.starts, highest_start)),
        )

    def offered_days(self, offer: Offer) -> list[tuple[str, list[int]]]:
        """Every date of the window with the indexes of the slots ``offer`` offers on it."""
        return [
            (
                day,
                [
                    i
                    for i in range(max(first, offer.first), min(last, offer.last))
                    if i not in offer.held_out
                ],
            )
            for day, first, last in self.days
        ]

    def to_plain(self) -> dict[str, Any]:
        """The set as JSON-ready lists and numbers (kept in Redis)."""
        return {
            "starts": self.starts,
            "ends": self.ends,
            "days": self.days,
            "holds": [
                [h.start, h.end, h.expires_at, h.seat_start, h.seat_end, h.host_id]
                for h in self.holds
            ],
            "seats": [self.seats, self.booked_seats],
            "hosts": [self.slot_hosts, self.collective],
            "rules": [
                self.notice_seconds,
                self.horizon_seconds,
                self.buffer_before_seconds,
                self.buffer_after_seconds,
            ],
        }

    @classmethod
    def from_plain(cls, plain: dict[str, Any]) -> SlotSet:
        notice, horizon, before, after = plain["rules"]
        slot_hosts, collective = plain.get("hosts", ([], False))  # kept before teams: none
        return cls(
            starts=plain["starts"],
            ends=plain["ends"],
            days=[(day, first, last) for day, first, last in plain["days"]],
            holds=[HeldTime(*hold) for hold in plain["holds"]],
            notice_seconds=notice,
            horizon_seconds=horizon,
            buffer_before_seconds=before,
            buffer_after_seconds=after,
            seats=plain["seats"][0],
            booked_seats=plain["seats"][1],
            slot_hosts=slot_hosts,
            collective=collective,
        )
