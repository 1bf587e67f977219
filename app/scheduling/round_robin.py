"""Round robin: which host a booking of a round-robin event type goes to, and which hosts a
slot is offered with. The one place the fairness rule lives (``docs/api.md``, "Hosts").

Among the hosts free for the whole occupied interval (the caller knows who is free):

1. **Priority** first: only the hosts of the highest priority (0–4, higher first) are
   considered.
2. Then the host **furthest below its weighted share** of the counting window's bookings (the
   event type's active bookings in the current calendar month of the sub account's timezone):
   ``share = weight ÷ total weight × total bookings`` and ``shortfall = share − count``.
3. Then the **least recently booked** (never booked first), then the lowest host id.

**Calibration.** A host that was not eligible from the window's start (added during the
month, or back from leave) is counted as if it had taken, before it became eligible, what its
weight earns at the pace the others set then: ``weight × bookings before it joined ÷ the
total weight of the hosts eligible then``. So it joins at the others' level: it is not given
the month's backlog, nor starved for the month.

**Too far ahead** (``max_ahead``, optional): a host more than that many bookings (counted with
calibration) ahead of the least-booked eligible host is not offered, so one host's free
calendar does not pile a month's bookings on it.

Pure: plain values in, plain values out; no clock, no database.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 0, 4, 2
WEIGHT_MIN, WEIGHT_MAX, WEIGHT_DEFAULT = 1, 1000, 100


class AssignmentReason(StrEnum):
    """Why a booking has its host (``assignmentReason`` in the API)."""

    SINGLE = "single"  # the event type has one host
    REQUESTED = "requested"  # the client named the host (``hostId``)
    PRIORITY = "priority"  # the only free host of the highest priority
    WEIGHT = "weight"  # furthest below its weighted share
    LEAST_RECENTLY_BOOKED = "least_recently_booked"  # shares equal: booked longest ago
    COLLECTIVE = "collective"  # every host of the event type takes part


@dataclass(frozen=True)
class RoundRobinHost:
    """A host of a round-robin event type: its priority and weight for that type, and since
    when it has been eligible without a break (None: since before the window began)."""

    host_id: int
    priority: int = PRIORITY_DEFAULT
    weight: int = WEIGHT_DEFAULT
    eligible_since: datetime | None = None


@dataclass(frozen=True)
class CountedBooking:
    """One of the event type's active bookings in the counting window: its host, and when it
    was made (the order the window's bookings were handed out in)."""

    host_id: int
    made_at: datetime


@dataclass(frozen=True)
class Standing:
    """Where a host stands in the window: its bookings, its calibration, when it was last
    booked (None: never in the window)."""

    host: RoundRobinHost
    count: int
    calibration: float
    last_booked_at: datetime | None

    @property
    def counted(self) -> float:
        """Its bookings as fairness counts them: its own and its calibration."""
        return self.count + self.calibration


@dataclass(frozen=True)
class Assignment:
    host_id: int
    reason: AssignmentReason


def standings(
    hosts: Sequence[RoundRobinHost], bookings: Iterable[CountedBooking]
) -> list[Standing]:
    """Every host's standing in the window (``hosts``' order)."""
    made = sorted(bookings, key=lambda b: b.made_at)
    counts = {host.host_id: 0 for host in hosts}
    last: dict[int, datetime] = {}
    for booking in made:
        if booking.host_id in counts:
            counts[booking.host_id] += 1
            last[booking.host_id] = booking.made_at
    return [
        Standing(
            host, counts[host.host_id], _calibration(host, hosts, made), last.get(host.host_id)
        )
        for host in hosts
    ]


def _calibration(
    host: RoundRobinHost, hosts: Sequence[RoundRobinHost], made: Sequence[CountedBooking]
) -> float:
    """What ``host``'s weight would have earned of the bookings made before it was eligible,
    at the pace of the hosts eligible then (0 for a host eligible all along)."""
    if host.eligible_since is None:
        return 0.0
    since = host.eligible_since
    before = [b for b in made if b.made_at < since]
    if not before:
        return 0.0
    present = sum(
        h.weight
        for h in hosts
        if h.host_id != host.host_id and (h.eligible_since is None or h.eligible_since <= since)
    )
    if present <= 0:
        return 0.0
    return host.weight * len(before) / present


def shortfall(standing: Standing, all_standings: Sequence[Standing]) -> float:
    """How far below its weighted share of the window's bookings the host is (negative:
    above)."""
    total_weight = sum(s.host.weight for s in all_standings)
    total = sum(s.counted for s in all_standings)
    return standing.host.weight / total_weight * total - standing.counted


def offered(all_standings: Sequence[Standing], max_ahead: int | None) -> list[Standing]:
    """The hosts a slot may be offered with: all of them, or (with ``max_ahead``) those no more
    than ``max_ahead`` bookings ahead of the least-booked."""
    if max_ahead is None or not all_standings:
        return list(all_standings)
    least = min(s.counted for s in all_standings)
    return [s for s in all_standings if s.counted - least <= max_ahead]


def choose(
    free: Sequence[int],
    all_standings: Sequence[Standing],
    max_ahead: int | None = None,
) -> Assignment | None:
    """The host a booking goes to among ``free`` (the hosts free for its whole occupied
    interval), and why; None when none of them may take it. Shares are reckoned over every
    host of the event type (``all_standings``), free or not."""
    allowed = {s.host.host_id for s in offered(all_standings, max_ahead)}
    candidates = [s for s in all_standings if s.host.host_id in set(free) & allowed]
    if not candidates:
        return None
    top = max(s.host.priority for s in candidates)
    best = [s for s in candidates if s.host.priority == top]
    if len(best) == 1:
        return Assignment(best[0].host.host_id, AssignmentReason.PRIORITY)
    shortfalls = {s.host.host_id: shortfall(s, all_standings) for s in best}
    most = max(shortfalls.values())
    # A hair's difference is a tie: shares are fractions, counts whole.
    behind = [s for s in best if shortfalls[s.host.host_id] >= most - 1e-9]
    if len(behind) == 1:
        return Assignment(behind[0].host.host_id, AssignmentReason.WEIGHT)
    never = datetime.min
    chosen = min(
        behind,
        key=lambda s: (
            s.last_booked_at.replace(tzinfo=None) if s.last_booked_at else never,
            s.host.host_id,
        ),
    )
    return Assignment(chosen.host.host_id, AssignmentReason.LEAST_RECENTLY_BOOKED)
