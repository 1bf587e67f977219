"""Half-open intervals ``[start, end)`` of UTC instants, and the operations on sorted lists of
them that the scheduling rules need.

``merge`` produces the normal form (sorted, non-overlapping, non-adjacent) that the busy-time
lists are kept in: O(n log n) for its sort; ``first_overlap`` searches such a list in
O(log n + k).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple


class Interval(NamedTuple):
    start: datetime
    end: datetime

    def overlaps(self, other: Interval) -> bool:
        """Half-open: touching intervals (one ends where the other starts) do not overlap."""
        return self.start < other.end and other.start < self.end

    def contains(self, other: Interval) -> bool:
        return self.start <= other.start and other.end <= self.end


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sort and fuse overlapping or touching intervals; empty ones are dropped."""
    merged: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[0] < i[1]):
        if merged and start <= merged[-1].end:
            if end > merged[-1].end:
                merged[-1] = Interval(merged[-1].start, end)
        else:
            merged.append(Interval(start, end))
    return merged


def first_overlap(interval: Interval, others: list[Interval]) -> Interval | None:
    """The first of the sorted ``others`` that overlaps ``interval``, by binary search."""
    lo, hi = 0, len(others)
    while lo < hi:  # first index whose end is after interval.start
        mid = (lo + hi) // 2
        if others[mid].end <= interval.start:
            lo = mid + 1
        else:
            hi = mid
    for other in others[lo:]:
        if other.start >= interval.end:
            return None
        if other.overlaps(interval):
            return other
    return None
