"""The round-robin rule (``app.scheduling.round_robin``): priority, then the host furthest
below its weighted share, then the least recently booked; hosts that join during the window are
calibrated, not given its backlog; ``max_ahead`` holds back a host too far ahead."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

from app.scheduling.round_robin import (
    AssignmentReason,
    CountedBooking,
    RoundRobinHost,
    choose,
    offered,
    standings,
)

MONTH = datetime(2031, 1, 1, tzinfo=UTC)


def book_in_turn(hosts, count, *, joins=None, busy=lambda n, host_id: False, max_ahead=None):
    """``count`` bookings made one after another, each given to the host the rule picks among
    those not ``busy`` for it; ``joins`` maps a booking number to the hosts that become
    eligible then. Returns the bookings per host and the reasons given."""
    joins = joins or {}
    present = list(hosts)
    made: list[CountedBooking] = []
    reasons: Counter[AssignmentReason] = Counter()
    for n in range(count):
        at = MONTH + timedelta(minutes=n)
        for host in joins.get(n, []):
            present.append(
                RoundRobinHost(host.host_id, host.priority, host.weight, eligible_since=at)
            )
        free = [h.host_id for h in present if not busy(n, h.host_id)]
        assignment = choose(free, standings(present, made), max_ahead)
        assert assignment is not None
        reasons[assignment.reason] += 1
        made.append(CountedBooking(assignment.host_id, at))
    return Counter(b.host_id for b in made), reasons


def test_300_bookings_on_three_equal_hosts_end_within_one_of_each_other():
    counts, _ = book_in_turn([RoundRobinHost(1), RoundRobinHost(2), RoundRobinHost(3)], 300)
    assert max(counts.values()) - min(counts.values()) <= 1
    assert sum(counts.values()) == 300


def test_weights_200_100_100_give_shares_within_five_percent_of_50_25_25():
    hosts = [RoundRobinHost(1, weight=200), RoundRobinHost(2), RoundRobinHost(3)]
    counts, _ = book_in_turn(hosts, 300)
    for host_id, share in ((1, 0.50), (2, 0.25), (3, 0.25)):
        assert abs(counts[host_id] / 300 - share) <= 0.05 * share, counts


def test_a_host_added_halfway_is_not_given_the_backlog():
    counts, _ = book_in_turn(
        [RoundRobinHost(1), RoundRobinHost(2)], 300, joins={150: [RoundRobinHost(3)]}
    )
    # The first 150 went 75/75; from then on the three share alike.
    assert counts[3] in (49, 50, 51), counts
    assert abs(counts[1] - counts[2]) <= 1, counts


def test_without_calibration_the_late_host_would_take_the_backlog():
    """What calibration prevents: a host counted from zero takes every booking until it has
    caught up with the others."""
    hosts = [RoundRobinHost(1), RoundRobinHost(2), RoundRobinHost(3)]
    made = [CountedBooking(1 + n % 2, MONTH + timedelta(minutes=n)) for n in range(150)]
    late = standings(hosts, made)  # host 3 counted from zero: eligible all along
    assert choose([1, 2, 3], late).host_id == 3
    joined = [*hosts[:2], RoundRobinHost(3, eligible_since=MONTH + timedelta(minutes=150))]
    calibrated = standings(joined, made)
    assert [round(s.counted) for s in calibrated] == [75, 75, 75]


def test_the_highest_priority_free_host_takes_the_booking_whatever_the_shares():
    hosts = [RoundRobinHost(1, priority=4), RoundRobinHost(2, priority=2)]
    made = [CountedBooking(1, MONTH + timedelta(minutes=n)) for n in range(10)]
    assignment = choose([1, 2], standings(hosts, made))
    assert (assignment.host_id, assignment.reason) == (1, AssignmentReason.PRIORITY)


def test_a_busy_host_of_higher_priority_leaves_the_booking_to_the_next():
    hosts = [RoundRobinHost(1, priority=4), RoundRobinHost(2), RoundRobinHost(3)]
    assignment = choose([2, 3], standings(hosts, []))
    assert assignment.host_id in (2, 3)


def test_equal_shares_go_to_the_least_recently_booked_then_the_lowest_id():
    hosts = [RoundRobinHost(1), RoundRobinHost(2), RoundRobinHost(3)]
    made = [
        CountedBooking(3, MONTH),
        CountedBooking(1, MONTH + timedelta(minutes=1)),
        CountedBooking(2, MONTH + timedelta(minutes=2)),
    ]
    assignment = choose([1, 2, 3], standings(hosts, made))
    assert (assignment.host_id, assignment.reason) == (
        3,
        AssignmentReason.LEAST_RECENTLY_BOOKED,
    )
    assert choose([1, 2, 3], standings(hosts, [])).host_id == 1  # never booked: by id


def test_the_host_furthest_below_its_share_is_chosen_for_its_weight():
    hosts = [RoundRobinHost(1), RoundRobinHost(2)]
    made = [CountedBooking(1, MONTH), CountedBooking(1, MONTH + timedelta(minutes=1))]
    assignment = choose([1, 2], standings(hosts, made))
    assert (assignment.host_id, assignment.reason) == (2, AssignmentReason.WEIGHT)


def test_shares_count_every_host_of_the_type_busy_or_not():
    """Host 1 is busy for many slots: its share keeps counting, so it is first in line when
    free again."""
    hosts = [RoundRobinHost(1), RoundRobinHost(2), RoundRobinHost(3)]
    counts, _ = book_in_turn(hosts, 90, busy=lambda n, host_id: host_id == 1 and n < 60)
    assert counts[1] == 30  # every booking once it was free again, none before
    assert counts[2] == counts[3] == 30


def test_a_host_too_far_ahead_is_not_offered():
    hosts = [RoundRobinHost(1), RoundRobinHost(2)]
    made = [CountedBooking(1, MONTH + timedelta(minutes=n)) for n in range(4)]
    ranked = standings(hosts, made)
    assert [s.host.host_id for s in offered(ranked, max_ahead=3)] == [2]
    assert [s.host.host_id for s in offered(ranked, max_ahead=4)] == [1, 2]
    assert choose([1], ranked, max_ahead=3) is None  # the only free one is too far ahead
    assert choose([1], ranked).host_id == 1


def test_bookings_of_hosts_no_longer_on_the_type_do_not_count():
    hosts = [RoundRobinHost(1), RoundRobinHost(2)]
    made = [CountedBooking(9, MONTH), CountedBooking(1, MONTH + timedelta(minutes=1))]
    assert [s.count for s in standings(hosts, made)] == [1, 0]
