"""The kinds of calendar a connection may have, and what each can do: the one table of
capabilities. Every kind lists its calendars and reads their changes (``CalendarProvider``);
the rest is by capability (``providers.base``):

| kind        | answers live | writes events | pushes changes |
|-------------|--------------|---------------|----------------|
| `caldav`    | yes          | yes           | no (polled)    |
| `ics` feed  | no           | no            | no (polled)    |
| `google`    | yes          | yes           | yes            |
| `microsoft` | yes          | yes           | yes            |

A feed is not asked live: it is one file of every event, slow to fetch and often cached by its
server for minutes. Callers ask for a capability (``live_answerer``, ``event_writer``,
``pusher``) and never for a kind: a kind becomes its adapter here alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.services.integrations.calendars.providers.base import (
    PRIMARY,
    AnswersLive,
    CalendarChanges,
    CalendarProvider,
    Cursor,
    ItemRead,
    OpenedChannel,
    Pushes,
    RemoteCalendar,
    StoredEvent,
    WritesEvents,
)
from app.services.integrations.calendars.providers.caldav import CalDAVProvider
from app.services.integrations.calendars.providers.feed import FeedProvider
from app.services.integrations.calendars.providers.google import GoogleProvider
from app.services.integrations.calendars.providers.microsoft import MicrosoftProvider


@dataclass(frozen=True)
class Capabilities:
    """One kind's adapter, once per capability it has (None: it has not)."""

    reads: CalendarProvider[Any]
    answers_live: AnswersLive[Any] | None
    writes_events: WritesEvents[Any] | None
    pushes: Pushes[Any] | None


def _row(reads: Any, *, live: bool, writes: bool, pushes: bool) -> tuple[str, Capabilities]:
    return reads.kind, Capabilities(
        reads,
        reads if live else None,
        reads if writes else None,
        reads if pushes else None,
    )


_CAPABILITIES: dict[str, Capabilities] = dict(
    [
        _row(CalDAVProvider(), live=True, writes=True, pushes=False),
        _row(FeedProvider(), live=False, writes=False, pushes=False),
        _row(GoogleProvider(), live=True, writes=True, pushes=True),
        _row(MicrosoftProvider(), live=True, writes=True, pushes=True),
    ]
)


def provider_for(kind: str) -> CalendarProvider[Any]:
    """The adapter that lists and reads connections of ``kind``."""
    return _CAPABILITIES[kind].reads


def live_answerer(kind: str) -> AnswersLive[Any] | None:
    """The adapter asked about a write's time for ``kind``; None: it is not asked."""
    return _CAPABILITIES[kind].answers_live


def event_writer(kind: str) -> WritesEvents[Any] | None:
    """The adapter that writes bookings into calendars of ``kind``; None: read-only."""
    return _CAPABILITIES[kind].writes_events


def pusher(kind: str) -> Pushes[Any] | None:
    """The adapter whose channels tell of changes for ``kind``; None: it is polled."""
    return _CAPABILITIES[kind].pushes


def kinds_answering_live() -> list[str]:
    return [kind for kind, row in _CAPABILITIES.items() if row.answers_live is not None]


def kinds_pushing() -> list[str]:
    return [kind for kind, row in _CAPABILITIES.items() if row.pushes is not None]


def kinds_making(meeting: str) -> list[str]:
    """The kinds whose written events can carry an online meeting of ``meeting``'s kind."""
    return [
        kind
        for kind, row in _CAPABILITIES.items()
        if row.writes_events is not None and meeting in row.writes_events.meetings
    ]


__all__ = [
    "PRIMARY",
    "AnswersLive",
    "CalendarChanges",
    "CalendarProvider",
    "Cursor",
    "ItemRead",
    "OpenedChannel",
    "Pushes",
    "RemoteCalendar",
    "StoredEvent",
    "WritesEvents",
    "event_writer",
    "kinds_answering_live",
    "kinds_making",
    "kinds_pushing",
    "live_answerer",
    "provider_for",
    "pusher",
]
