"""The kinds of calendar a connection may have, each behind ``CalendarProvider``
(``providers.base``): ``provider_for(kind)`` is the one place a kind becomes its adapter."""

from __future__ import annotations

from typing import Any

from app.services.integrations.calendars.providers.base import (
    PRIMARY,
    CalendarChanges,
    CalendarProvider,
    Cursor,
    ItemRead,
    RemoteCalendar,
    StoredEvent,
)
from app.services.integrations.calendars.providers.caldav import CalDAVProvider
from app.services.integrations.calendars.providers.feed import FeedProvider
from app.services.integrations.calendars.providers.google import GoogleProvider
from app.services.integrations.calendars.providers.microsoft import MicrosoftProvider

_PROVIDERS: dict[str, CalendarProvider[Any]] = {
    provider.kind: provider
    for provider in (
        CalDAVProvider(),
        FeedProvider(),
        GoogleProvider(),
        MicrosoftProvider(),
    )
}


def provider_for(kind: str) -> CalendarProvider[Any]:
    """The adapter for connections of ``kind``."""
    return _PROVIDERS[kind]


__all__ = [
    "PRIMARY",
    "CalendarChanges",
    "CalendarProvider",
    "Cursor",
    "ItemRead",
    "RemoteCalendar",
    "StoredEvent",
    "provider_for",
]
