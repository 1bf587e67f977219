"""Which connections make an event type's online meetings: a Google Meet event type needs an
active Google connection that writes bookings back in its sub account, a Microsoft Teams one an
active Microsoft connection that does (the meeting is made with the booking's event in that
calendar: ``write_back``). An event type asking for a meeting nothing can make is refused when
it is saved, with a message saying what to connect; provisioning asks the same of the
connections in its document (``missing_meeting_connection``).

Removing such a connection later (or switching its write-back off) is not refused: bookings
made then get no meeting, and keep the event type's location text, as any booking does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from app.extensions import db
from app.models import MEETING_KINDS, CalendarConnection, LocationKind
from app.services.common.errors import InvalidRequest
from app.services.integrations.calendars.providers import kinds_making

# What a meeting kind is called, and the calendar that makes it, as a person knows them.
_NEEDS = {
    LocationKind.GOOGLE_MEET: ("Google Meet", "Google calendar"),
    LocationKind.MICROSOFT_TEAMS: ("Microsoft Teams", "Microsoft 365 calendar"),
}
FIELD = "locationKind"


@dataclass(frozen=True)
class Connected:
    """A connection as the check sees it."""

    kind: str
    write_back: bool
    active: bool = True


def meeting_makers(location_kind: str) -> frozenset[str]:
    """The connection kinds whose calendars make meetings of ``location_kind``."""
    return frozenset(kinds_making(location_kind))


def missing_meeting_connection(location_kind: str, connections: Iterable[Connected]) -> str | None:
    """Why ``connections`` cannot make the meetings of ``location_kind`` (None: one can, or
    the kind needs no meeting made)."""
    if location_kind not in MEETING_KINDS:
        return None
    makers = meeting_makers(location_kind)
    if any(c.kind in makers and c.write_back and c.active for c in connections):
        return None
    name, calendar = _NEEDS[LocationKind(location_kind)]
    return (
        f"{name} needs a connected {calendar} that bookings are written to: connect one"
        " under Calendar connections first."
    )


def require_meeting_connection(sub_account_id: int, location_kind: str) -> None:
    """Refuse (``InvalidRequest``, by field ``locationKind``) an event type of the sub account
    whose meetings none of its active write-back connections can make."""
    if location_kind not in MEETING_KINDS:
        return
    rows = db.session.execute(
        select(CalendarConnection.kind, CalendarConnection.write_back).where(
            CalendarConnection.sub_account_id == sub_account_id,
            CalendarConnection.active.is_(True),
        )
    ).all()
    problem = missing_meeting_connection(
        location_kind, (Connected(kind, write_back) for kind, write_back in rows)
    )
    if problem is not None:
        raise InvalidRequest(f"{FIELD}: {problem}", errors={FIELD: [problem]})
