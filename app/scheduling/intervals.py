"""Half-open intervals ``[start, end)`` of UTC instants, and set algebra on sorted lists of them.

Every function takes and returns lists sorted by start; ``merge`` produces the normal form
(sorted, non-overlapping, non-adjacent) the others expect. All work is a single sorted sweep:
O(n log n) for the sort in ``merge``, O(n + m) for the rest.
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


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Intersection of two merged lists."""
    result: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        start = max(a[i].start, b[j].start)
        end = min(a[i].end, b[j].end)
        if start < end:
            result.append(Interval(start, end))
        if a[i].end < b[j].end:
            i += 1
        else:
            j += 1
    return result


def subtract(base: list[Interval], cuts: list[Interval]) -> list[Interval]:
    """``base`` minus ``cuts``, both merged."""
    result: list[Interval] = []
    j = 0
    for start, end in base:
        while j < len(cuts) and cuts[j].end <= start:
            j += 1
        k = j
        while k < len(cuts) and cuts[k].start < end:
            if cuts[k].start > start:
                result.append(Interval(start, cuts[k].start))
            start = max(start, cuts[k].end)
            k += 1
        if start < end:
            result.append(Interval(start, end))
    return result


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
