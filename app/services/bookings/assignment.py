"""Who a write's time is claimed with: the event type's one host, or, for a round-robin type,
one of its hosts chosen under the calendar's lock (``app.scheduling.round_robin``).

``plan_host_claim`` plans the claim of every candidate host before the lock (their working
hours, the one question for all of their connected calendars); ``claim`` under the lock tries
each candidate against its own busy time and hands the time to:

- the host ``hostId`` named, when free (refused otherwise with ``host_unavailable`` and that
  host's suggested slots);
- the preferred host, when free: a reschedule keeps its host, a booking made from a hold goes
  to the hold's host;
- else the host round robin chooses among the free ones (priority, weighted share, least
  recently booked), with its reason.

When no candidate is free, the refusal is the one of the host that came nearest (a host busy
in a connected calendar came nearer than one outside its working hours), with the nearest open
slots of all the candidates together.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from app.models import EventType, HostAssignment, SubAccount
from app.scheduling.intervals import Interval
from app.scheduling.round_robin import AssignmentReason, choose
from app.scheduling.suggestions import nearest_slots
from app.services.availability.open_time import only_host
from app.services.bookings.time_claims import ClaimedTime, TimeClaim, plan_claim
from app.services.common.errors import ErrorCode, InvalidRequest, TimeUnavailable
from app.services.integrations.calendars.live_check import LiveQuestion, plan_live_check
from app.services.scheduling_inputs import TeamMember, load_standings, team_of

# How near a refused host came to taking the time, by the refusal's code (higher: nearer):
# the time rule refuses before anything is read, then the claim meets bookings, holds,
# blocked time and the connected calendars in turn, and caps last.
NEARNESS = {
    code: rank
    for rank, code in enumerate(
        (
            ErrorCode.OUTSIDE_HOURS,
            ErrorCode.MINIMUM_NOTICE,
            ErrorCode.BEYOND_HORIZON,
            ErrorCode.SLOT_TAKEN,
            ErrorCode.SLOT_HELD,
            ErrorCode.BLOCKED_TIME,
            ErrorCode.EXTERNAL_BUSY,
            ErrorCode.SEATS_FULL,
            ErrorCode.LIMIT_REACHED,
        )
    )
}

# How far a collective refusal looks for slots every host can take.
COMMON_SEARCH = timedelta(days=7)

COLLECTIVE_HAS_EVERYONE = "A collective event type's bookings are made with every host"
NO_ACTIVE_HOST = "No host of this event type is active"
NO_HOST_AHEAD = "Every host free at this time is too far ahead of the others (maxAhead)"


def nearest(refused: dict[int, TimeUnavailable]) -> TimeUnavailable:
    """The refusal of the host that came nearest to taking the time (``NEARNESS``)."""
    return max(refused.values(), key=lambda err: NEARNESS.get(err.code, -1))


class HostClaim(Protocol):
    """A planned claim of time: one host's (``TimeClaim``) or a team's (``TeamClaim``)."""

    @property
    def slot(self) -> Interval: ...

    def live_question(self) -> LiveQuestion | None: ...

    def claim(
        self,
        *,
        exclude_booking_id: int | None = None,
        consumed_hold_id: int | None = None,
        suggest: bool = True,
    ) -> ClaimedTime: ...


@dataclass(frozen=True)
class TeamClaim:
    """A round-robin write's claim, planned for each candidate host (``plans``, by host id)."""

    sub_account: SubAccount
    event_type: EventType
    members: list[TeamMember]
    plans: dict[int, TimeClaim]
    requested: bool  # ``hostId`` named the one candidate
    prefer_host: int | None  # kept when free (a reschedule's host, a hold's host)
    now: datetime

    @property
    def slot(self) -> Interval:
        return next(iter(self.plans.values())).slot

    def live_question(self) -> LiveQuestion | None:
        """One question for the connected calendars of every candidate that the time rule does
        not refuse anyway, under the one deadline."""
        askable = [host_id for host_id, plan in self.plans.items() if not plan.time_refused()]
        if not askable:
            return None
        plan = self.plans[askable[0]]
        return plan_live_check(
            self.sub_account.id, plan.rules.occupied_interval(plan.slot), askable
        )

    def claim(
        self,
        *,
        exclude_booking_id: int | None = None,
        consumed_hold_id: int | None = None,
        suggest: bool = True,
    ) -> ClaimedTime:
        """The time claimed with the chosen host (the calendar's lock held); ``reason`` None
        when the preferred host keeps it (its earlier reason stands)."""
        if self.event_type.assignment is HostAssignment.COLLECTIVE:
            return self._claim_everyone(exclude_booking_id, consumed_hold_id, suggest)
        free, refused = self._try_each(exclude_booking_id, consumed_hold_id)
        if self.requested:
            [(host_id, plan)] = self.plans.items()
            if host_id in refused:
                raise TimeUnavailable(
                    f"This host cannot take the time: {refused[host_id].message}",
                    ErrorCode.HOST_UNAVAILABLE,
                    plan.suggestions(
                        exclude_booking_id=exclude_booking_id, consumed_hold_id=consumed_hold_id
                    )
                    if suggest
                    else [],
                )
            return replace(free[host_id], reason=AssignmentReason.REQUESTED)
        if self.prefer_host in free:
            return replace(free[self.prefer_host], reason=None)
        if not free:
            raise self._refusal(refused, exclude_booking_id, consumed_hold_id, suggest)
        standings = load_standings(self.sub_account, self.event_type, self.members, self.now)
        choice = choose(list(free), standings, self.event_type.max_ahead)
        if choice is None:
            raise TimeUnavailable(
                NO_HOST_AHEAD,
                ErrorCode.SLOT_TAKEN,
                self._suggestions(exclude_booking_id, consumed_hold_id) if suggest else [],
            )
        return replace(free[choice.host_id], reason=choice.reason)

    def _claim_everyone(
        self, exclude_booking_id: int | None, consumed_hold_id: int | None, suggest: bool
    ) -> ClaimedTime:
        """A collective write: every host's time, or the nearest refusal with the slots all
        of them can take."""
        free, refused = self._try_each(exclude_booking_id, consumed_hold_id)
        if refused:
            refusal = nearest(refused)
            if suggest:
                refusal.suggested_slots = self._common_suggestions(exclude_booking_id)
            raise refusal
        first, *others = free.values()
        return replace(
            first,
            reason=AssignmentReason.COLLECTIVE,
            co_hosts=tuple(other.host_id for other in others),
        )

    def _try_each(
        self, exclude_booking_id: int | None, consumed_hold_id: int | None
    ) -> tuple[dict[int, ClaimedTime], dict[int, TimeUnavailable]]:
        """Each candidate's claim of the time, by host: those free and those refused (without
        suggestions: they are reckoned for the team, once, if needed)."""
        free: dict[int, ClaimedTime] = {}
        refused: dict[int, TimeUnavailable] = {}
        for host_id, plan in self.plans.items():
            try:
                free[host_id] = plan.claim(
                    exclude_booking_id=exclude_booking_id,
                    consumed_hold_id=consumed_hold_id,
                    suggest=False,
                )
            except TimeUnavailable as err:
                refused[host_id] = err
        return free, refused

    def _common_suggestions(self, exclude_booking_id: int | None) -> list[Interval]:
        """The nearest slots every host can take: each host's open slots of the day and the
        week after, in common."""
        common: set[Interval] | None = None
        plan = next(iter(self.plans.values()))
        window = Interval(plan.day.start, plan.day.end + COMMON_SEARCH)
        for each in self.plans.values():
            open_now = set(each.open_in(window, exclude_booking_id=exclude_booking_id))
            common = open_now if common is None else common & open_now
        return nearest_slots(sorted(common or ()), plan.slot.start, plan.day)

    def _refusal(
        self,
        refused: dict[int, TimeUnavailable],
        exclude_booking_id: int | None,
        consumed_hold_id: int | None,
        suggest: bool,
    ) -> TimeUnavailable:
        """The nearest host's refusal, with the candidates' nearest open slots together."""
        refusal = nearest(refused)
        if suggest:
            refusal.suggested_slots = self._suggestions(exclude_booking_id, consumed_hold_id)
        return refusal

    def _suggestions(
        self, exclude_booking_id: int | None, consumed_hold_id: int | None
    ) -> list[Interval]:
        found: set[Interval] = set()
        plan = next(iter(self.plans.values()))
        for each in self.plans.values():
            found.update(
                each.suggestions(
                    exclude_booking_id=exclude_booking_id, consumed_hold_id=consumed_hold_id
                )
            )
        return nearest_slots(sorted(found), plan.slot.start, plan.day)


def plan_host_claim(
    sub_account: SubAccount,
    event_type: EventType,
    slot: Interval,
    *,
    timezone: str,
    now: datetime,
    host_id: int | None = None,
    prefer_host: int | None = None,
) -> HostClaim:
    """Plan claiming ``slot`` on the event type (before the calendar's lock): its one host's
    claim, or a round-robin type's candidates' (``host_id``: only that host, by request).
    A ``host_id`` that is not one of the event type's hosts is refused."""
    if host_id is not None and event_type.assignment is HostAssignment.COLLECTIVE:
        raise InvalidRequest(COLLECTIVE_HAS_EVERYONE, errors={"hostId": [COLLECTIVE_HAS_EVERYONE]})
    if not event_type.is_team:
        if host_id is not None:  # the one host may be named; another is refused
            only_host(team_of(sub_account, event_type), host_id)
        return plan_claim(sub_account, event_type, slot, timezone=timezone, now=now)
    everyone = team_of(sub_account, event_type)
    members = only_host(everyone, host_id)
    if not members:  # every host of the team deactivated: nobody works then
        raise TimeUnavailable(NO_ACTIVE_HOST, ErrorCode.OUTSIDE_HOURS, [])
    # Hosts that share a profile share its plan (the day's working hours, read once).
    by_profile: dict[int | None, TimeClaim] = {}
    plans = {}
    for member in members:
        key = member.profile.id if member.profile is not None else None
        shared = by_profile.get(key)
        plans[member.host_id] = (
            replace(shared, host_id=member.host_id)
            if shared is not None
            else by_profile.setdefault(
                key,
                plan_claim(
                    sub_account, event_type, slot, timezone=timezone, now=now, member=member
                ),
            )
        )
    return TeamClaim(
        sub_account, event_type, everyone, plans, host_id is not None, prefer_host, now
    )
