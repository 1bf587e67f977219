"""Which open slots to offer instead of a time that cannot be booked."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from app.scheduling.intervals import Interval

SUGGESTION_COUNT = 5


def nearest_slots(
    open_slots: Iterable[Interval],
    wanted_start: datetime,
    wanted_day: Interval,
    limit: int = SUGGESTION_COUNT,
) -> list[Interval]:
    """Up to ``limit`` of ``open_slots`` in the order a person on the phone would offer them:
    those starting on the wanted day, nearest to the wanted start first (before or after; the
    earlier of two equally near); then the following days' from the earliest; then, when
    still short (a wanted time past the booking horizon, say), the preceding days' from the
    latest. Duplicates are dropped."""
    slots = set(open_slots)
    same_day = sorted(
        (s for s in slots if wanted_day.start <= s.start < wanted_day.end),
        key=lambda s: (abs(s.start - wanted_start), s.start),
    )
    later = sorted(s for s in slots if s.start >= wanted_day.end)
    earlier = sorted((s for s in slots if s.start < wanted_day.start), reverse=True)
    return (same_day + later + earlier)[:limit]
