"""Slot generation and the time rule (app.scheduling.slots)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from app.scheduling.intervals import Interval, merge
from app.scheduling.slots import (
    SlotRules,
    TimeProblem,
    conflicting,
    open_slots,
    slots_by_day,
    time_problem,
)
from app.scheduling.working_hours import WeeklySchedule, working_intervals, working_ranges

T0 = datetime(2026, 12, 1, tzinfo=UTC)  # a Tuesday


def at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC)


def iv(start: datetime, end: datetime) -> Interval:
    return Interval(start, end)


def mins(n: int) -> timedelta:
    return timedelta(minutes=n)


def rules(duration=30, step=None, before=0, after=0, earliest=None, latest=None) -> SlotRules:
    return SlotRules(
        mins(duration), mins(step or duration), mins(before), mins(after), earliest, latest
    )


WORK = [iv(at(9), at(12))]
WINDOW = iv(at(0), at(0, day=2))


def starts(slots):
    return [f"{s.start:%H:%M}" for s in slots]


def test_slots_fill_working_hours_on_the_duration_grid():
    assert starts(open_slots(WORK, [], rules(), WINDOW)) == [
        "09:00",
        "09:30",
        "10:00",
        "10:30",
        "11:00",
        "11:30",
    ]


def test_slot_interval_smaller_than_duration_overlaps_slots():
    slots = open_slots(WORK, [], rules(duration=60, step=15), WINDOW)
    assert starts(slots) == [
        "09:00",
        "09:15",
        "09:30",
        "09:45",
        "10:00",
        "10:15",
        "10:30",
        "10:45",
        "11:00",
    ]
    assert all(s.end - s.start == mins(60) for s in slots)


def test_busy_time_removes_overlapping_slots_only():
    busy = [iv(at(10), at(10, 45))]
    assert starts(open_slots(WORK, busy, rules(), WINDOW)) == ["09:00", "09:30", "11:00", "11:30"]


def test_slot_may_touch_busy_time():
    busy = [iv(at(9, 30), at(10))]
    assert starts(open_slots(WORK, busy, rules(), WINDOW)) == [
        "09:00",
        "10:00",
        "10:30",
        "11:00",
        "11:30",
    ]


def test_adjacent_and_overlapping_busy_intervals_act_as_one():
    busy = merge([iv(at(9), at(9, 40)), iv(at(9, 40), at(10)), iv(at(9, 50), at(10, 30))])
    assert starts(open_slots(WORK, busy, rules(), WINDOW)) == ["10:30", "11:00", "11:30"]


def test_buffer_after_keeps_distance_from_the_next_busy_time():
    busy = [iv(at(10), at(10, 30))]
    # 09:30-10:00 plus 10 min after reaches into 10:00: gone.
    assert starts(open_slots(WORK, busy, rules(after=10), WINDOW)) == [
        "09:00",
        "10:30",
        "11:00",
        "11:30",
    ]


def test_buffer_before_keeps_distance_from_the_previous_busy_time():
    busy = [iv(at(10), at(10, 30))]
    # 10:30 needs 15 min before, back to 10:15: gone; the grid resumes at 11:00.
    assert starts(open_slots(WORK, busy, rules(before=15), WINDOW)) == [
        "09:00",
        "09:30",
        "11:00",
        "11:30",
    ]


def test_buffers_may_reach_outside_working_hours():
    slots = open_slots(WORK, [], rules(before=30, after=30), WINDOW)
    assert starts(slots)[0] == "09:00" and starts(slots)[-1] == "11:30"


def test_minimum_notice_is_inclusive_and_keeps_the_grid():
    assert starts(open_slots(WORK, [], rules(earliest=at(10)), WINDOW))[0] == "10:00"
    assert starts(open_slots(WORK, [], rules(earliest=at(10, 1)), WINDOW))[0] == "10:30"


def test_booking_horizon_is_exclusive():
    assert starts(open_slots(WORK, [], rules(latest=at(10, 30)), WINDOW))[-1] == "10:00"
    assert starts(open_slots(WORK, [], rules(latest=at(10, 31)), WINDOW))[-1] == "10:30"


def test_window_boundary_cuts_slots_that_would_cross_it():
    window = iv(at(9, 15), at(11, 15))
    assert starts(open_slots(WORK, [], rules(), window)) == ["09:30", "10:00", "10:30"]


def test_slot_longer_than_working_hours_never_fits():
    assert open_slots([iv(at(9), at(9, 20))], [], rules(), WINDOW) == []


def test_slots_by_day_regroups_in_the_requested_timezone():
    # Working 23:00-01:00 UTC spans two UTC dates but one New York date.
    slots = open_slots([iv(at(23), at(1, day=2))], [], rules(duration=60), iv(at(0), at(12, day=2)))
    ny = ZoneInfo("America/New_York")
    days = slots_by_day(slots, ny, date(2026, 12, 1), date(2026, 12, 2))
    assert [(d.isoformat(), len(s)) for d, s in days] == [("2026-12-01", 2), ("2026-12-02", 0)]
    utc_days = slots_by_day(slots, ZoneInfo("UTC"), date(2026, 12, 1), date(2026, 12, 2))
    assert [(d.isoformat(), len(s)) for d, s in utc_days] == [("2026-12-01", 1), ("2026-12-02", 1)]


def test_slots_by_day_lists_closed_days_empty():
    days = slots_by_day([], ZoneInfo("UTC"), date(2026, 12, 1), date(2026, 12, 3))
    assert days == [(date(2026, 12, d), []) for d in (1, 2, 3)]


def test_profile_in_london_queried_from_tokyo():
    schedule = WeeklySchedule("Europe/London", {1: [(9 * 60, 10 * 60)]})  # Tuesdays 09-10 London
    working = working_intervals(schedule, at(0), at(0, day=3))
    slots = open_slots(working, [], rules(duration=60), iv(at(0), at(0, day=3)))
    days = slots_by_day(slots, ZoneInfo("Asia/Tokyo"), date(2026, 12, 1), date(2026, 12, 2))
    # 09:00 London = 09:00Z = 18:00 Tokyo, still Tuesday there.
    assert [(d.day, starts(s)) for d, s in days] == [(1, ["09:00"]), (2, [])]


def test_dst_day_slots_stay_at_local_times():
    schedule = WeeklySchedule("America/New_York", {6: [(9 * 60, 11 * 60)]})
    window = iv(datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 3, 9, tzinfo=UTC))
    slots = open_slots(working_intervals(schedule, *window), [], rules(duration=60), window)
    ny = ZoneInfo("America/New_York")
    assert [f"{s.start.astimezone(ny):%H:%M}" for s in slots] == ["09:00", "10:00"]


# The time rule for a single booking: same rule, no grid.
def test_time_problem_accepts_an_unaligned_booking_inside_hours():
    assert time_problem(iv(at(9, 7), at(9, 52)), WORK, rules()) is None


def test_time_problem_names_each_failure():
    assert time_problem(iv(at(10), at(10)), WORK, rules()) is TimeProblem.NOT_AFTER_START
    assert time_problem(iv(at(10), at(10, day=2) + mins(1)), WORK, rules()) is TimeProblem.TOO_LONG
    assert (
        time_problem(iv(at(9), at(9, 30)), WORK, rules(earliest=at(9, 1))) is TimeProblem.TOO_SOON
    )
    assert time_problem(iv(at(9), at(9, 30)), WORK, rules(latest=at(9))) is TimeProblem.TOO_FAR
    assert time_problem(iv(at(11, 45), at(12, 15)), WORK, rules()) is TimeProblem.OUTSIDE_HOURS


def test_conflicting_applies_buffers():
    busy = [iv(at(10), at(10, 30))]
    assert conflicting(iv(at(9, 30), at(10)), busy, rules()) is None
    assert conflicting(iv(at(9, 30), at(10)), busy, rules(after=1)) == busy[0]
    assert conflicting(iv(at(10, 30), at(11)), busy, rules(before=1)) == busy[0]


# Properties, checked on random schedules, busy time and rules.
minute_ranges = st.lists(
    st.tuples(st.integers(0, 1439), st.integers(5, 600)).map(
        lambda t: (t[0], min(1440, t[0] + t[1]))
    ),
    max_size=3,
)
zones = st.sampled_from(
    ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"]
)


@st.composite
def scenarios(draw):
    weekly = {d: draw(minute_ranges) for d in range(7)}
    tz = draw(zones)
    window_start = datetime(2026, 3, 1, tzinfo=UTC) + mins(draw(st.integers(0, 60 * 24 * 250)))
    window = iv(window_start, window_start + mins(draw(st.integers(0, 60 * 24 * 10))))
    busy = merge(
        iv(window.start + mins(s), window.start + mins(s + length))
        for s, length in draw(
            st.lists(st.tuples(st.integers(-600, 15000), st.integers(1, 300)), max_size=25)
        )
    )
    duration = draw(st.integers(5, 240))
    slot_rules = SlotRules(
        duration=mins(duration),
        step=mins(draw(st.integers(5, 240))),
        buffer_before=mins(draw(st.integers(0, 60))),
        buffer_after=mins(draw(st.integers(0, 60))),
        earliest_start=window.start + mins(draw(st.integers(-600, 3000))),
        latest_start=window.start + mins(draw(st.integers(0, 20000))),
    )
    schedule = WeeklySchedule(tz, weekly)
    return working_ranges(schedule, *window), busy, slot_rules, window


def start_allowed(rules, start):
    """The notice and horizon rule, written out for the oracles."""
    if rules.earliest_start is not None and start < rules.earliest_start:
        return False
    return rules.latest_start is None or start < rules.latest_start


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_slots_respect_every_rule(scenario):
    ranges, busy, slot_rules, window = scenario
    working = merge(ranges)
    slots = open_slots(ranges, busy, slot_rules, window)
    assert slots == sorted(slots)
    for slot in slots:
        assert window.contains(slot)
        assert any(w.contains(slot) for w in working)
        occupied = slot_rules.occupied_interval(slot)
        assert not any(b.overlaps(occupied) for b in busy)
        assert start_allowed(slot_rules, slot.start)
        assert time_problem(slot, working, slot_rules) is None


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_every_open_grid_point_is_returned(scenario):
    """Oracle: a start is on the grid when it is a whole number of steps after the latest range
    start at or before it (within the same stretch of working time)."""
    ranges, busy, slot_rules, window = scenario
    working = merge(ranges)
    anchors = sorted({r.start for r in ranges})
    expected = set()
    for anchor in anchors:
        stretch = next(w for w in working if w.start <= anchor < w.end)
        start = anchor
        while start + slot_rules.duration <= stretch.end:
            latest_anchor = max(a for a in anchors if a <= start)
            slot = iv(start, start + slot_rules.duration)
            if (
                latest_anchor == anchor
                and window.contains(slot)
                and start_allowed(slot_rules, start)
                and conflicting(slot, busy, slot_rules) is None
            ):
                expected.add(slot)
            start += slot_rules.step
    assert open_slots(ranges, busy, slot_rules, window) == sorted(expected)


def all_day_every_day(tz):
    return WeeklySchedule(tz, dict.fromkeys(range(7), ((0, 1440),)))


def day_slots(schedule, window_start, day, minutes):
    window = iv(window_start, datetime(2026, 12, 10, tzinfo=UTC))
    slots = open_slots(working_ranges(schedule, *window), [], rules(duration=minutes), window)
    return [s for s in slots if s.start.date() == day]


def test_a_days_slots_do_not_depend_on_where_the_window_starts():
    schedule = all_day_every_day("UTC")
    day = date(2026, 12, 2)
    from_before = day_slots(schedule, datetime(2026, 12, 1, tzinfo=UTC), day, 25)
    from_the_day = day_slots(schedule, datetime(2026, 12, 2, tzinfo=UTC), day, 25)
    assert from_before == from_the_day
    assert starts(from_the_day)[:3] == ["00:00", "00:25", "00:50"]


def test_each_days_grid_starts_at_its_own_range_start():
    # Ranges touch across midnight: the last slot of a day may run into the next day, and the
    # next day's grid starts again at its midnight.
    slots = day_slots(
        all_day_every_day("UTC"), datetime(2026, 12, 1, tzinfo=UTC), date(2026, 12, 1), 25
    )
    assert starts(slots)[-1] == "23:45" and slots[-1].end == at(0, 10, day=2)
