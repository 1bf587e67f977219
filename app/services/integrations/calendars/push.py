"""Push: Google and Microsoft tell the service when a connected calendar changes, so its busy
time is read seconds after a person changes it, not at the next poll.

- **Channels** (``app.jobs.calendars.keep_channels``, run by the worker after each sync of a
  connection whose kind pushes, with push on, and every 15 minutes for each such connection):
  every calendar read gets a channel, a Google ``events.watch`` channel or a Graph
  subscription to its events (created, updated, deleted), addressed under ``PUBLIC_URL`` at
  the paths its provider names (``Pushes``), with a random secret the provider sends back with
  every notification (Google's channel ``token``, Graph's ``clientState``), of which only the
  SHA-256 is stored. A channel is renewed ``RENEW_BEFORE`` its expiry (the provider extends
  it, or says it cannot: then a new channel, and the old one stopped; Google cannot, Graph
  PATCHes ``expirationDateTime``, at most 10,080 minutes on), and stopped (``channels.stop``,
  DELETE of the subscription) when its calendar is no longer read, its connection is switched
  off or removed, or push is switched off. This module asks the provider and stores what it
  answered; the job commits each channel's change as it is made.
- **Notifications** (``google_notification``, ``microsoft_notifications``,
  ``microsoft_lifecycle``): checked against the stored channel (its id, Google's resource id,
  the secret's digest, compared in constant time), then the connection is asked for a sync
  (``freshness.request_sync``: a burst becomes one queued sync). Google's first message
  (``sync``) is only acknowledged. Graph's lifecycle events: ``reauthorizationRequired`` renews
  the subscription, ``subscriptionRemoved`` makes a new one, ``missed`` reads the calendar. A
  notification for no known channel, with a wrong secret, or for a connection switched off
  causes no provider call and no sync: it is counted and answered like any other, so a forger
  learns nothing.

Push is on when ``CALENDAR_PUSH`` is ``on``, or ``auto`` (the default) with a ``PUBLIC_URL`` that
starts with ``https://`` (the providers deliver to HTTPS addresses only).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, delete, exists, func, select
from sqlalchemy.orm import Session

from app.config import Settings, settings
from app.counters import PUSH_CHANNEL_CHANGES, PUSH_NOTIFICATIONS
from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, PushChannel
from app.services.integrations.calendars.access import caldav_timeout, connection_access
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.freshness import request_sync
from app.services.integrations.calendars.providers import (
    OpenedChannel,
    Pushes,
    kinds_pushing,
    pusher,
)
from app.services.integrations.calendars.providers.google import GoogleProvider
from app.services.integrations.calendars.providers.microsoft import MicrosoftProvider

log = logging.getLogger(__name__)

# Where each provider's notifications arrive (``app.push``): the paths the providers name.
GOOGLE_PATH = GoogleProvider.notification_path
MICROSOFT_PATH = MicrosoftProvider.notification_path
MICROSOFT_LIFECYCLE_PATH = MicrosoftProvider.lifecycle_path or ""
# How long a channel is asked for: Graph allows at most 10,080 minutes for events, Google a
# week; a little less, so a clock a minute apart is not refused.
CHANNEL_LIFETIME = timedelta(minutes=10080 - 10)
# Renewed when this little is left: a day of retries before notifications would stop.
RENEW_BEFORE = timedelta(days=1)
# How long each stop may take when a person removes a connection (they wait for it).
STOP_TIMEOUT_S = 2.0
# Reported as near expiry (a renewal that keeps failing) in /metrics.
NEAR_EXPIRY = timedelta(hours=6)

Outcome = Literal["accepted", "acknowledged", "refused"]


def push_enabled(configured: Settings | None = None) -> bool:
    """Whether calendars get push channels (``CALENDAR_PUSH``: on, off, or auto: when
    ``PUBLIC_URL`` is https)."""
    configured = configured or settings()
    if configured.calendar_push == "auto":
        return configured.base_url.startswith("https://")
    return configured.calendar_push == "on"


def _address(path: str) -> str:
    return f"{settings().base_url}{path}"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _same_secret(secret: str | None, digest: str) -> bool:
    return secret is not None and hmac.compare_digest(_digest(secret), digest)


# Keeping channels (the worker)


@dataclass(frozen=True)
class ChannelsKept:
    """What keeping a connection's channels did (``app.jobs.calendars.keep_channels``):
    channels made, renewed, stopped, and failures (in words)."""

    made: int = 0
    renewed: int = 0
    stopped: int = 0
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class Channel:
    """A stored channel: its row, the connected calendar it watches (None: its calendar is no
    longer read), the provider's ids for it and its expiry."""

    row_id: int
    calendar_id: int | None
    channel_id: str
    resource_id: str | None
    expires_at: datetime


@dataclass(frozen=True)
class ChannelPlan:
    """A pushing connection's channels as they are, and what is needed to reach its
    provider."""

    connection_id: int
    kind: str
    provider: Pushes[Any] = field(repr=False)
    access: Any = field(repr=False)
    active: bool
    calendars: list[tuple[int, str]]  # (connected calendar id, remote id)
    channels: list[Channel]

    @property
    def wanted(self) -> bool:
        """Whether the connection should have channels now (active, with push on)."""
        return self.active and push_enabled()

    def to_stop(self) -> list[Channel]:
        """The channels no longer needed: every one when none is wanted, else those of
        calendars no longer read."""
        wanted = self.wanted
        return [c for c in self.channels if not wanted or c.calendar_id is None]

    def due(self, now: datetime) -> list[tuple[int, str, Channel | None]]:
        """The calendars read whose channel is missing (None) or within ``RENEW_BEFORE`` of
        its expiry; none when no channel is wanted."""
        if not self.wanted:
            return []
        by_calendar = {c.calendar_id: c for c in self.channels if c.calendar_id is not None}
        return [
            (calendar_id, remote_id, channel)
            for calendar_id, remote_id in self.calendars
            if (channel := by_calendar.get(calendar_id)) is None
            or channel.expires_at - now <= RENEW_BEFORE
        ]


def channel_plan(connection_id: int, timeout: float | None = None) -> ChannelPlan | None:
    """The connection's channels as they are, read in a session of its own (the caller waits
    on the provider next); None for a connection of a kind that does not push, or whose
    credentials cannot be opened."""
    with Session(db.engine) as session:
        connection = session.get(CalendarConnection, connection_id)
        provider = pusher(connection.kind) if connection is not None else None
        if connection is None or provider is None:
            return None
        access, problem = connection_access(connection, timeout or caldav_timeout())
        if problem is not None:
            return None
        calendars = session.execute(
            select(ConnectedCalendar.id, ConnectedCalendar.remote_id)
            .where(ConnectedCalendar.calendar_connection_id == connection_id)
            .order_by(ConnectedCalendar.id)
        ).all()
        channels = session.execute(
            select(
                PushChannel.id,
                PushChannel.connected_calendar_id,
                PushChannel.channel_id,
                PushChannel.resource_id,
                PushChannel.expires_at,
            )
            .where(PushChannel.calendar_connection_id == connection_id)
            .order_by(PushChannel.id)
        ).all()
        return ChannelPlan(
            connection_id,
            connection.kind,
            provider,
            access,
            connection.active,
            [(calendar_id, remote_id) for calendar_id, remote_id in calendars],
            [Channel(*row) for row in channels],
        )


def open_channel(plan: ChannelPlan, remote_id: str, now: datetime) -> tuple[OpenedChannel, str]:
    """Ask the provider for a new channel on one calendar, addressed under ``PUBLIC_URL``;
    returns it and its secret (to be stored only as a digest: ``add_channel``)."""
    secret = secrets.token_urlsafe(32)
    provider = plan.provider
    addresses = (
        _address(provider.notification_path),
        _address(provider.lifecycle_path) if provider.lifecycle_path else None,
    )
    opened = provider.open_channel(
        plan.access, remote_id, addresses, secret, now + CHANNEL_LIFETIME
    )
    return opened, secret


def add_channel(
    plan: ChannelPlan, calendar_id: int, opened: OpenedChannel, secret: str, now: datetime
) -> None:
    """Store a channel the provider just made (flushed; counted once committed:
    ``count_channel_change``)."""
    db.session.add(
        PushChannel(
            calendar_connection_id=plan.connection_id,
            connected_calendar_id=calendar_id,
            kind=plan.kind,
            channel_id=opened.channel_id,
            resource_id=opened.resource_id,
            secret_digest=_digest(secret),
            expires_at=opened.expires_at,
            created_at=now,
        )
    )
    db.session.flush()


def renew_channel(plan: ChannelPlan, channel: Channel, now: datetime) -> datetime | None:
    """Ask the provider for a later expiry; None when its channels cannot be extended (then a
    new one replaces it)."""
    return plan.provider.renew_channel(plan.access, channel.channel_id, now + CHANNEL_LIFETIME)


def note_renewed(channel: Channel, expires_at: datetime, now: datetime) -> None:
    """Store the later expiry the provider gave a channel (flushed)."""
    row = db.session.get(PushChannel, channel.row_id)
    if row is not None:
        row.expires_at, row.renewed_at = expires_at, now
    db.session.flush()


def close_channel(plan: ChannelPlan, channel_id: str, resource_id: str | None) -> None:
    """Stop a channel at the provider (``CalendarSyncError`` when it cannot be asked)."""
    plan.provider.close_channel(plan.access, channel_id, resource_id)


def forget_channel(channel: Channel) -> None:
    """Drop a channel's row (stopped, or replaced); flushed."""
    db.session.execute(delete(PushChannel).where(PushChannel.id == channel.row_id))


def count_channel_change(kind: str, change: str) -> None:
    """Count a channel made, renewed or stopped, once committed."""
    PUSH_CHANNEL_CHANGES.labels(kind, change).inc()


def stop_channels(connection_id: int) -> int:
    """Stop every channel of the connection at the provider (before it is removed, while its
    grant still works); best effort, each request within ``STOP_TIMEOUT_S`` (a person is
    waiting, and a channel not stopped only expires by itself). Returns how many were stopped;
    their rows go with the connection."""
    plan = channel_plan(connection_id, STOP_TIMEOUT_S)
    if plan is None:
        return 0
    stopped = 0
    for channel in plan.channels:
        try:
            close_channel(plan, channel.channel_id, channel.resource_id)
            stopped += 1
        except CalendarSyncError as err:
            log.warning("calendar connection %s: channel not stopped: %s", connection_id, err)
    return stopped


def connections_due_for_channels(now: datetime) -> list[int]:
    """The connections whose channels have something to be done now (what
    ``ChannelPlan.to_stop`` and ``ChannelPlan.due`` would find): a channel within
    ``RENEW_BEFORE`` of its expiry or whose calendar is no longer read; channels of a
    connection switched off, or of any connection while push is off; an active connection of a
    kind that pushes with a calendar read that has no channel. In id order; beat's upkeep gives
    each its own task (``calendars.keep_connection_channels``)."""
    has_channels = CalendarConnection.id.in_(select(PushChannel.calendar_connection_id))
    due: ColumnElement[bool]
    if not push_enabled():
        due = has_channels
    else:
        channel_due = CalendarConnection.id.in_(
            select(PushChannel.calendar_connection_id).where(
                (PushChannel.expires_at <= now + RENEW_BEFORE)
                | PushChannel.connected_calendar_id.is_(None)
            )
        )
        unwatched = exists().where(
            ConnectedCalendar.calendar_connection_id == CalendarConnection.id,
            ~exists().where(PushChannel.connected_calendar_id == ConnectedCalendar.id),
        )
        due = (
            channel_due
            | (CalendarConnection.active.is_(False) & has_channels)
            | (
                CalendarConnection.active.is_(True)
                & CalendarConnection.kind.in_(kinds_pushing())
                & unwatched
            )
        )
    return list(
        db.session.scalars(select(CalendarConnection.id).where(due).order_by(CalendarConnection.id))
    )


def channel_counts(now: datetime) -> tuple[int, int]:
    """(live channels, live channels expiring within ``NEAR_EXPIRY``), for ``/metrics``."""
    live, near = db.session.execute(
        select(
            func.count(PushChannel.id),
            func.count(PushChannel.id).filter(PushChannel.expires_at <= now + NEAR_EXPIRY),
        ).where(PushChannel.expires_at > now)
    ).one()
    return int(live), int(near)


# Notifications (the web process)


@dataclass(frozen=True)
class Notified:
    """What one notification did: ``accepted`` (a sync asked for), ``acknowledged`` (nothing
    to read: Google's first message, or a sync already queued), ``refused`` (unknown channel,
    wrong secret, connection off; ``reason`` for the log and metrics only)."""

    outcome: Outcome
    reason: str = ""
    connection_id: int | None = None


def google_notification(
    channel_id: str | None,
    token: str | None,
    resource_id: str | None,
    state: str | None,
    now: datetime,
) -> Notified:
    """One Google message (its ``X-Goog-*`` headers). Flushes; the caller commits, then counts
    it (``count_notified``)."""
    channel = _channel(GoogleProvider.kind, channel_id)
    if channel is None:
        return Notified("refused", "unknown channel")
    if not _same_secret(token, channel.secret_digest) or not hmac.compare_digest(
        (resource_id or "").encode(), (channel.resource_id or "").encode()
    ):
        return Notified("refused", "wrong token or resource")
    return _notified(channel, state != "sync", now)


# The entries of one Graph request that are read: Graph batches a few notifications per
# request, and one is enough to ask for a sync that reads everything. Bounded, so that an
# unauthenticated request costs one query and a bounded loop, however many entries it sends.
GRAPH_ENTRIES_READ = 100


def microsoft_notifications(values: list[Any], now: datetime) -> list[Notified]:
    """Graph's change notifications (the ``value`` array). Flushes; the caller commits."""
    return _microsoft_batch(values, now, lifecycle=False)


def microsoft_lifecycle(values: list[Any], now: datetime) -> list[Notified]:
    """Graph's lifecycle notifications: ``reauthorizationRequired`` (renew the subscription),
    ``subscriptionRemoved`` (make a new one), ``missed`` (read the calendar). Each asks for a
    sync, whose follow-up keeps the channels (``app.jobs.calendars.keep_channels``). Flushes; the
    caller commits."""
    return _microsoft_batch(values, now, lifecycle=True)


def _microsoft_batch(values: list[Any], now: datetime, *, lifecycle: bool) -> list[Notified]:
    """The first ``GRAPH_ENTRIES_READ`` entries, their subscriptions found with one query; a
    subscription named again in the same request does nothing more."""
    entries = values[:GRAPH_ENTRIES_READ]
    named = {
        name
        for entry in entries
        if isinstance(entry, dict) and (name := _text(entry.get("subscriptionId")))
    }
    channels = {
        channel.channel_id: channel
        for channel in db.session.scalars(
            select(PushChannel).where(
                PushChannel.kind == MicrosoftProvider.kind,
                PushChannel.channel_id.in_(sorted(name for name in named if len(name) <= 255)),
            )
        )
    }
    seen: set[str] = set()
    notified = []
    for entry in entries:
        if not isinstance(entry, dict):
            notified.append(Notified("refused", "not a notification"))
            continue
        channel = channels.get(_text(entry.get("subscriptionId")) or "")
        if channel is not None and channel.channel_id in seen:
            notified.append(Notified("acknowledged", "named again in the same request"))
            continue
        each = _microsoft_one(entry, channel, now, lifecycle=lifecycle)
        if channel is not None and each.outcome != "refused":
            seen.add(channel.channel_id)
        notified.append(each)
    return notified


def _microsoft_one(
    value: dict[str, Any], channel: PushChannel | None, now: datetime, *, lifecycle: bool
) -> Notified:
    if channel is None:
        return Notified("refused", "unknown subscription")
    if not _same_secret(_text(value.get("clientState")), channel.secret_digest):
        return Notified("refused", "wrong clientState")
    if lifecycle:
        event = value.get("lifecycleEvent")
        if event == "reauthorizationRequired":
            channel.expires_at = now  # renewed by the sync's follow-up
        elif event == "subscriptionRemoved":
            db.session.delete(channel)  # Graph removed it: a new one is made
            db.session.flush()
        elif event != "missed":
            return Notified("refused", "unknown lifecycle event")
    return _notified(channel, True, now)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 1024 else None


def _channel(kind: str, channel_id: str | None) -> PushChannel | None:
    if not channel_id or len(channel_id) > 255:
        return None
    return db.session.scalar(
        select(PushChannel).where(PushChannel.kind == kind, PushChannel.channel_id == channel_id)
    )


def _notified(channel: PushChannel, changed: bool, now: datetime) -> Notified:
    connection = db.session.get(CalendarConnection, channel.calendar_connection_id)
    if connection is None or not connection.active or channel.connected_calendar_id is None:
        return Notified("refused", "connection or calendar no longer read")
    if not changed:
        return Notified("acknowledged", "channel made", connection.id)
    if channel in db.session:  # a subscription Graph removed is deleted by now
        channel.last_notification_at = now
    connection.last_notification_at = now
    queued = request_sync(connection.id, now)
    return Notified("accepted" if queued else "acknowledged", "", connection.id)


def count_notified(provider: str, notified: list[Notified]) -> None:
    """Count what notifications did, once their transaction is committed (a notification whose
    commit failed did nothing, and is not counted)."""
    for each in notified:
        PUSH_NOTIFICATIONS.labels(provider, each.outcome).inc()
    # One line a request, however many entries it refused.
    refused = Counter(each.reason for each in notified if each.outcome == "refused")
    if refused:
        log.info(
            "%s notifications refused: %s",
            provider,
            ", ".join(f"{count} {reason}" for reason, count in sorted(refused.items())),
        )
