"""A team's open slots from its hosts' own: round robin offers a slot when any of its hosts
may take it, collective only when every host can; and which hosts can take a given slot.

Each host's open slots are computed as one calendar's are (``app.scheduling.slots``: the
host's working hours, its bookings and busy time, the event type's rules), on the event type's
grid, so the same slot of two hosts is the same ``Interval`` and slots compare by equality.
Pure: plain values in, plain values out.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from app.scheduling.intervals import Interval


def any_host_open(
    open_by_host: Mapping[int, Sequence[Interval]], offered: Collection[int] | None = None
) -> list[Interval]:
    """The slots at least one host may take (round robin): of the hosts in ``offered`` (None:
    every host), in time order."""
    slots: set[Interval] = set()
    for host_id, open_slots in open_by_host.items():
        if offered is None or host_id in offered:
            slots.update(open_slots)
    return sorted(slots)


def every_host_open(open_by_host: Mapping[int, Sequence[Interval]]) -> list[Interval]:
    """The slots every host can take at once (collective), in time order; none without
    hosts."""
    if not open_by_host:
        return []
    lists = iter(open_by_host.values())
    common = set(next(lists))
    for open_slots in lists:
        common &= set(open_slots)
    return sorted(common)


def hosts_open_at(slot: Interval, open_by_host: Mapping[int, Sequence[Interval]]) -> list[int]:
    """The hosts that can take ``slot``, by id."""
    return sorted(host_id for host_id, open_slots in open_by_host.items() if slot in open_slots)
