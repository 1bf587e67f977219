"""Slots kept for a calendar version and offered at an instant (app.scheduling.offered): the
same slots as computing everything at that instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from app.scheduling.intervals import Interval, merge
from app.scheduling.offered import HeldTime, SlotSet
from app.scheduling.slots import SlotRules, open_slots

T0 = datetime(2026, 12, 1, tzinfo=UTC)
DAY = 24 * 3600


def minutes(n: int) -> timedelta:
    return timedelta(minutes=n)


def seconds(instant: datetime) -> int:
    return int(instant.timestamp())


def kept(working, busy, holds, rules: SlotRules, window, notice: int, horizon: int) -> SlotSet:
    """What ``compute_slot_set`` keeps, for one day of slots."""
    slots = open_slots(working, merge(busy), rules, window)
    return SlotSet(
        starts=[seconds(s.start) for s in slots],
        ends=[seconds(s.end) for s in slots],
        days=[("2026-12-01", 0, len(slots))],
        holds=sorted(holds, key=lambda h: h.expires_at),
        notice_seconds=notice,
        horizon_seconds=horizon,
        buffer_before_seconds=int(rules.buffer_before.total_seconds()),
        buffer_after_seconds=int(rules.buffer_after.total_seconds()),
    )


def offered_starts(slot_set: SlotSet, now: float) -> list[int]:
    offer = slot_set.offer(now)
    ((_, indexes),) = slot_set.offered_days(offer)
    return [slot_set.starts[i] for i in indexes]


intervals = st.tuples(st.integers(0, 24 * 60 - 5), st.integers(5, 240)).map(
    lambda pair: Interval(T0 + minutes(pair[0]), T0 + minutes(pair[0] + pair[1]))
)


@settings(max_examples=300, deadline=None)
@given(
    working=st.lists(intervals, min_size=1, max_size=3),
    busy=st.lists(intervals, max_size=4),
    holds=st.lists(st.tuples(intervals, st.integers(0, DAY)), max_size=3),
    duration=st.sampled_from([15, 30, 45, 60]),
    step=st.sampled_from([None, 10, 15, 30]),
    before=st.sampled_from([0, 5, 15]),
    after=st.sampled_from([0, 10]),
    notice=st.integers(0, 600),
    horizon=st.integers(0, 20 * 60),
    now=st.integers(-60, 24 * 60),
)
def test_an_offer_is_what_computing_everything_at_that_instant_gives(
    working, busy, holds, duration, step, before, after, notice, horizon, now
):
    window = Interval(T0, T0 + timedelta(days=1))
    instant = T0 + minutes(now) + timedelta(seconds=17)  # not on a minute: to the second
    unbounded = SlotRules(
        minutes(duration), minutes(step or duration), minutes(before), minutes(after)
    )
    held = [
        HeldTime(seconds(i.start), seconds(i.end), (T0 + minutes(e)).timestamp()) for i, e in holds
    ]
    slot_set = kept(working, busy, held, unbounded, window, notice * 60, horizon * 60)

    live_holds = [i for i, e in holds if T0 + minutes(e) > instant]
    at_instant = SlotRules(
        unbounded.duration,
        unbounded.step,
        unbounded.buffer_before,
        unbounded.buffer_after,
        earliest_start=instant + minutes(notice),
        latest_start=instant + minutes(horizon),
    )
    expected = open_slots(working, merge([*busy, *live_holds]), at_instant, window)
    assert offered_starts(slot_set, instant.timestamp()) == [seconds(s.start) for s in expected]


def test_a_slot_inside_the_notice_is_no_longer_offered_a_second_after_it_was():
    working = [Interval(T0 + minutes(9 * 60), T0 + minutes(10 * 60))]
    window = Interval(T0, T0 + timedelta(days=1))
    slot_set = kept(working, [], [], SlotRules(minutes(30), minutes(30)), window, 3600, DAY)
    nine = seconds(T0) + 9 * 3600
    assert offered_starts(slot_set, nine - 3600) == [nine, nine + 1800]
    assert offered_starts(slot_set, nine - 3600 + 1) == [nine + 1800]


def test_a_hold_keeps_its_time_until_its_expiry_and_not_a_second_longer():
    working = [Interval(T0 + minutes(9 * 60), T0 + minutes(10 * 60))]
    window = Interval(T0, T0 + timedelta(days=1))
    nine = seconds(T0) + 9 * 3600
    hold = HeldTime(nine, nine + 1800, float(nine - 7200))
    slot_set = kept(working, [], [hold], SlotRules(minutes(30), minutes(30)), window, 0, DAY)
    assert offered_starts(slot_set, nine - 7201) == [nine + 1800]
    assert offered_starts(slot_set, nine - 7200) == [nine, nine + 1800]


def test_offers_at_different_instants_have_different_keys_when_they_differ():
    working = [Interval(T0 + minutes(9 * 60), T0 + minutes(10 * 60))]
    window = Interval(T0, T0 + timedelta(days=1))
    slot_set = kept(working, [], [], SlotRules(minutes(30), minutes(30)), window, 0, DAY)
    nine = seconds(T0) + 9 * 3600
    assert slot_set.offer(nine - 60).key == slot_set.offer(nine - 30).key
    assert slot_set.offer(nine - 60).key != slot_set.offer(nine + 1).key


def test_a_set_travels_as_plain_values_and_comes_back_the_same():
    working = [Interval(T0 + minutes(9 * 60), T0 + minutes(12 * 60))]
    window = Interval(T0, T0 + timedelta(days=1))
    hold = HeldTime(seconds(T0) + 9 * 3600, seconds(T0) + 10 * 3600, seconds(T0) + 0.5)
    slot_set = kept(
        working,
        [],
        [hold],
        SlotRules(minutes(30), minutes(15), minutes(5), minutes(10)),
        window,
        60,
        DAY,
    )
    assert SlotSet.from_plain(slot_set.to_plain()) == slot_set
