"""What every kind of calendar provider answers, so the sync, write-back and the dashboard
never ask which kind they talk to. No database here: a provider reaches its server and says
what it found; ``app.services.integrations.calendars.sync`` decides what to store.

A sync asks a provider for the changes of one calendar since a ``Cursor`` (the markers the last
read left), within a window. The provider answers with a ``CalendarChanges``: either the whole
calendar (``complete``: an item not listed is gone) or only what changed since the cursor
(``changed`` and ``removed``), with each changed item already turned into busy periods. An item
that cannot be read is listed with its ``problem`` instead of failing the calendar.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar
from zoneinfo import ZoneInfo

from icalendar.timezone.windows_to_olson import WINDOWS_TO_OLSON

from app.scheduling.intervals import Interval
from app.scheduling.timezones import is_timezone, zone
from app.services.integrations.calendars.busy_time import (
    BusyPeriod,
    CalendarObject,
    object_busy_periods,
)
from app.services.integrations.calendars.errors import MalformedCalendarData

# The calendar of an account checked for conflicts and written into when none is chosen: the
# account's primary (Google's own alias; Microsoft's default calendar).
PRIMARY = "primary"


@dataclass(frozen=True)
class Cursor:
    """Where the last read of a calendar left off. ``remote_id`` None: never read (a CalDAV
    calendar is looked up by its name first). ``incremental``: the stored items cover the
    window asked for, so only changes since the markers are needed; otherwise the provider
    reads the calendar in full. ``known_etags``: the stored items' versions by key, for
    providers that find changes by comparing them (loaded only when asked for)."""

    remote_id: str | None
    sync_token: str | None = None
    ctag: str | None = None
    incremental: bool = False
    known_etags: Callable[[], Mapping[str, str | None]] = field(default=dict, repr=False)


@dataclass(frozen=True)
class ItemRead:
    """One item as read: ``key`` (stable within its calendar), ``etag`` (its version, if the
    provider has one), ``uid`` (its iCalendar UID), its busy periods in the window, or the
    ``problem`` that kept it from being read. ``kept``: the provider found it as it was last
    read (a feed lists every event every time) and did not expand it again."""

    key: str
    etag: str | None
    uid: str | None
    periods: list[BusyPeriod]
    problem: str | None = None
    kept: bool = False  # the same as the stored item: its busy time stays as it is
    changed_at: datetime | None = None  # when the provider says it last changed, if it does


@dataclass(frozen=True)
class CalendarChanges:
    """What a read found in one calendar, and the markers to keep for the next read."""

    remote_id: str
    name: str | None
    complete: bool
    changed: list[ItemRead]
    removed: list[str]
    sync_token: str | None
    ctag: str | None

    @property
    def unchanged(self) -> bool:
        return not self.complete and not self.changed and not self.removed


@dataclass(frozen=True)
class StoredEvent:
    """What storing a booking's event answered. ``event_id``: the event's id, for providers
    that choose it themselves (Microsoft; None for the others, which find the event by its
    UID). ``join_url``: the online meeting's join link, when one was asked for and the provider
    has made it; ``meeting_pending``: one was asked for and the provider is still making it (a
    later write of the same event answers it)."""

    event_id: str | None = None
    join_url: str | None = None
    meeting_pending: bool = False


@dataclass(frozen=True)
class RemoteCalendar:
    """A calendar a person may choose: its id (or URL) and the name the provider shows."""

    remote_id: str
    name: str | None
    primary: bool = False
    writable: bool = True


# What a provider takes to reach an account: its own kind of ``access``.
Access = TypeVar("Access", contravariant=True)


class CalendarProvider(Protocol[Access]):
    """What every kind of calendar does: list an account's calendars and read one's changes.
    ``access`` is whatever the provider needs to reach the account
    (``app.services.integrations.calendars.access`` builds it). What only some kinds do is a
    capability of its own (``AnswersLive``, ``WritesEvents``, ``Pushes``); which kind has which
    is the table in ``providers/__init__.py``."""

    kind: str

    def calendars(self, access: Access, limit: int) -> list[RemoteCalendar]:
        """The account's calendars, at most ``limit``."""

    def read(
        self,
        access: Access,
        cursor: Cursor,
        window: Interval,
        tz: ZoneInfo,
    ) -> CalendarChanges:
        """The calendar's changes since ``cursor`` (or all of it), busy periods in ``window``
        with all-day and floating times in ``tz``. Raises ``CalendarSyncError``s."""


class AnswersLive(Protocol[Access]):
    """A provider asked about a write's time at the moment of the write (the live check)."""

    def items_in(
        self, access: Access, remote_id: str | None, window: Interval, tz: ZoneInfo
    ) -> tuple[str, list[ItemRead]]:
        """The calendar's events that overlap ``window`` as they are now, asked in one question
        with no markers (the live check of a write), and the calendar's id as ``read`` names
        it (``remote_id`` None: the account's default, or the only one). Raises
        ``CalendarSyncError``s."""


class WritesEvents(Protocol[Access]):
    """A provider that receives the bookings as events (write-back)."""

    # The online meetings it makes with an event it writes (``LocationKind`` values: Google
    # makes Google Meet, Microsoft makes Teams); none for the others.
    meetings: frozenset[str]

    def put_event(
        self,
        access: Access,
        uid: str,
        data: bytes,
        event_id: str | None = None,
        *,
        meeting: str | None = None,
    ) -> StoredEvent:
        """Store the booking's event (UID ``uid``, iCalendar ``data``), replacing an earlier
        version. Providers that choose an event's id themselves (Microsoft) are given the id
        they answered last time (``event_id``; None: not written yet) and answer the event's
        id now; the others find the event by its UID. ``meeting`` (one of ``meetings``): the
        event carries an online meeting, made with its first write and kept by every later
        one (a retried write makes no second meeting); the answer carries its join link."""

    def delete_event(self, access: Access, uid: str, event_id: str | None = None) -> None:
        """Remove the booking's event (``event_id``: as ``put_event`` answered it); one
        already gone is no error."""


@dataclass(frozen=True)
class OpenedChannel:
    """A push channel as the provider made it: its id, the id of the resource it watches
    (Google's; None for providers that need none to stop it) and when it expires (the
    provider may cut the time asked for)."""

    channel_id: str
    resource_id: str | None
    expires_at: datetime


class Pushes(Protocol[Access]):
    """A provider that tells the service when a calendar changes (Google's watch channels,
    Graph's subscriptions), delivering to the paths it names under ``PUBLIC_URL``."""

    kind: str
    notification_path: str  # where its change notifications arrive (``app.push``)
    lifecycle_path: str | None  # where its notices about the channel itself arrive, if any

    def open_channel(
        self,
        access: Access,
        remote_id: str,
        addresses: tuple[str, str | None],
        secret: str,
        expires_at: datetime,
    ) -> OpenedChannel:
        """A channel telling ``addresses`` (the notification and lifecycle URLs) of every
        change of the calendar's events, with ``secret`` sent back in each message."""

    def renew_channel(
        self, access: Access, channel_id: str, expires_at: datetime
    ) -> datetime | None:
        """A later expiry for the channel, as the provider gave it; None when its channels
        cannot be extended (a new one is opened, then this one closed)."""

    def close_channel(self, access: Access, channel_id: str, resource_id: str | None) -> None:
        """Stop the channel; one the provider no longer knows is no error."""


def ical_item(key: str, etag: str | None, data: str, window: Interval, tz: ZoneInfo) -> ItemRead:
    """An item holding iCalendar data (a CalDAV resource, one event of a feed) as read: its
    busy periods, or, when it cannot be read, the problem (never an exception: one unreadable
    event does not keep the rest of the calendar from being current)."""
    try:
        uid, periods = object_busy_periods(CalendarObject(key, data), window, tz)
    except MalformedCalendarData as err:
        return ItemRead(key, etag, None, [], problem=err.message)
    return ItemRead(key, etag, uid, periods)


def zone_by_name(name: str | None) -> ZoneInfo | None:
    """The zone a calendar names: an IANA name, or a Windows one (``W. Europe Standard Time``,
    as Outlook and Graph write them); None for one neither knows."""
    name = (name or "").strip()
    iana = WINDOWS_TO_OLSON.get(name, name)
    return zone(iana) if is_timezone(iana) else None
