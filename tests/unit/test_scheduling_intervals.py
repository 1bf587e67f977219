"""Interval algebra on half-open UTC intervals."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from app.scheduling.intervals import Interval, first_overlap, merge

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def iv(start_min: int, end_min: int) -> Interval:
    return Interval(T0 + timedelta(minutes=start_min), T0 + timedelta(minutes=end_min))


def test_touching_intervals_do_not_overlap():
    assert not iv(0, 30).overlaps(iv(30, 60))
    assert iv(0, 31).overlaps(iv(30, 60))


def test_merge_sorts_and_fuses_overlapping_and_adjacent():
    assert merge([iv(60, 90), iv(0, 30), iv(30, 45), iv(80, 120)]) == [iv(0, 45), iv(60, 120)]


def test_merge_drops_empty_and_contained():
    assert merge([iv(0, 100), iv(10, 20), iv(50, 50)]) == [iv(0, 100)]


def test_first_overlap_finds_the_overlapping_interval():
    busy = [iv(0, 30), iv(60, 90), iv(120, 150)]
    assert first_overlap(iv(85, 100), busy) == iv(60, 90)
    assert first_overlap(iv(90, 120), busy) is None
    assert first_overlap(iv(-10, 0), busy) is None


# Property tests against a brute-force model: sets of whole minutes.
spans = st.lists(
    st.tuples(st.integers(0, 500), st.integers(1, 60)).map(lambda t: iv(t[0], t[0] + t[1])),
    max_size=12,
)


def minutes(intervals):
    covered = set()
    for start, end in intervals:
        first = int((start - T0).total_seconds() // 60)
        covered.update(range(first, first + int((end - start).total_seconds() // 60)))
    return covered


@given(spans)
def test_merge_is_sorted_disjoint_and_covers_the_same_time(intervals):
    merged = merge(intervals)
    assert minutes(merged) == minutes(intervals)
    assert all(a.end < b.start for a, b in itertools.pairwise(merged))


@given(spans, st.tuples(st.integers(-10, 560), st.integers(1, 60)))
def test_first_overlap_agrees_with_brute_force(busy, probe):
    interval = iv(probe[0], probe[0] + probe[1])
    merged = merge(busy)
    expected = next((b for b in merged if b.overlaps(interval)), None)
    assert first_overlap(interval, merged) == expected
