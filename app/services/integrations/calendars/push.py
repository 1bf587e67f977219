"""Push: Google and Microsoft tell the service when a connected calendar changes, so its busy
time is read seconds after a person changes it, not at the next poll.

- **Channels** (``keep_channels``, run by the worker after each sync of a Google or Microsoft
  connection, with push on): every calendar read gets a channel, a Google ``events.watch``
  channel or a Graph subscription to its events (created, updated, deleted), addressed under
  ``PUBLIC_URL`` (``GOOGLE_PATH``, ``MICROSOFT_PATH``, ``MICROSOFT_LIFECYCLE_PATH``), with a
  random secret the provider sends back with every notification (Google's channel ``token``,
  Graph's ``clientState``), of which only the SHA-256 is stored. A channel is renewed
  ``RENEW_BEFORE`` its expiry (Google: a new channel, then the old one stopped; Graph: a PATCH
  of ``expirationDateTime``, at most 10,080 minutes on), and stopped (``channels.stop``,
  DELETE of the subscription) when its calendar is no longer read, its connection is switched
  off or removed, or push is switched off.
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
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.config import Settings, settings
from app.counters import PUSH_CHANNEL_CHANGES, PUSH_NOTIFICATIONS
from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, PushChannel
from app.models.calendar_connection import ConnectionKind
from app.services.common.transactions import owns_transactions
from app.services.integrations.calendars.access import caldav_timeout, connection_access
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.freshness import request_sync
from app.services.integrations.calendars.providers import provider_for

log = logging.getLogger(__name__)

GOOGLE_PATH = "/push/google"
MICROSOFT_PATH = "/push/microsoft"
MICROSOFT_LIFECYCLE_PATH = "/push/microsoft/lifecycle"
PUSH_KINDS = (ConnectionKind.GOOGLE, ConnectionKind.MICROSOFT)
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
    """What ``keep_channels`` did: channels made, renewed, stopped, and failures (in words)."""

    made: int = 0
    renewed: int = 0
    stopped: int = 0
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Plan:
    kind: str
    access: Any
    active: bool
    calendars: list[tuple[int, str]]  # (connected calendar id, remote id)
    channels: list[tuple[int, int | None, str, str | None, datetime]]
    # (row id, connected calendar id, channel id, resource id, expires at)


def keep_channels(connection_id: int, now: datetime) -> ChannelsKept:
    """Make every calendar the connection reads have a live channel (made, or renewed when
    within ``RENEW_BEFORE`` of expiry), and stop those it no longer needs (its calendar is no
    longer read, the connection is switched off, push is off). The provider is asked with no
    transaction open, and each channel's change is committed as it is made (``_make``,
    ``_renew``, ``_forget``). Never raises for a provider's sake."""
    with Session(db.engine) as session:
        plan = _plan(session, connection_id)
    if plan is None:
        return ChannelsKept()
    wanted = plan.active and push_enabled()
    provider = provider_for(plan.kind)
    made = renewed = stopped = 0
    errors: list[str] = []
    by_calendar = {c[1]: c for c in plan.channels if c[1] is not None}
    for row_id, calendar_id, channel_id, resource_id, _ in plan.channels:
        if wanted and calendar_id is not None:
            continue
        try:
            _stop(provider, plan, channel_id, resource_id)
            stopped += 1
        except CalendarSyncError as err:
            errors.append(err.message)  # it expires by itself; its notifications are refused
        _forget(row_id, "stopped")
    if not wanted:
        return ChannelsKept(0, 0, stopped, tuple(errors))
    for calendar_id, remote_id in plan.calendars:
        channel = by_calendar.get(calendar_id)
        if channel is not None and channel[4] - now > RENEW_BEFORE:
            continue
        try:
            if channel is None:
                _make(provider, plan, connection_id, calendar_id, remote_id, now)
                made += 1
            else:
                _renew(provider, plan, connection_id, channel, remote_id, now)
                renewed += 1
        except CalendarSyncError as err:
            log.warning("calendar connection %s: push channel not kept: %s", connection_id, err)
            errors.append(err.message)
    return ChannelsKept(made, renewed, stopped, tuple(errors))


def _plan(session: Session, connection_id: int, timeout: float | None = None) -> _Plan | None:
    connection = session.get(CalendarConnection, connection_id)
    if connection is None or connection.kind not in PUSH_KINDS:
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
    return _Plan(
        connection.kind,
        access,
        connection.active,
        [(calendar_id, remote_id) for calendar_id, remote_id in calendars],
        [
            (row_id, calendar_id, channel_id, resource_id, expires_at)
            for row_id, calendar_id, channel_id, resource_id, expires_at in channels
        ],
    )


@owns_transactions
def _make(
    provider: Any, plan: _Plan, connection_id: int, calendar_id: int, remote_id: str, now: datetime
) -> None:
    """A new channel for one calendar, its row committed as soon as the provider made it (a
    job that waits on a provider: no transaction is open meanwhile); a row that cannot be
    kept stops the channel again."""
    secret = secrets.token_urlsafe(32)
    if plan.kind == ConnectionKind.GOOGLE:
        channel_id = str(uuid.uuid4())
        resource_id, expires = provider.watch(
            plan.access,
            remote_id,
            channel_id,
            _address(GOOGLE_PATH),
            secret,
            now + CHANNEL_LIFETIME,
        )
    else:
        resource_id = None
        channel_id, expires = provider.subscribe(
            plan.access,
            remote_id,
            _address(MICROSOFT_PATH),
            _address(MICROSOFT_LIFECYCLE_PATH),
            secret,
            now + CHANNEL_LIFETIME,
        )
    db.session.add(
        PushChannel(
            calendar_connection_id=connection_id,
            connected_calendar_id=calendar_id,
            kind=plan.kind,
            channel_id=channel_id,
            resource_id=resource_id,
            secret_digest=_digest(secret),
            expires_at=expires,
            created_at=now,
        )
    )
    try:
        db.session.commit()
    except Exception:  # the calendar went meanwhile (or a second keeper made one): undo ours
        db.session.rollback()
        _stop(provider, plan, channel_id, resource_id)
        raise
    PUSH_CHANNEL_CHANGES.labels(plan.kind, "made").inc()


@owns_transactions
def _renew(
    provider: Any,
    plan: _Plan,
    connection_id: int,
    channel: tuple[int, int | None, str, str | None, datetime],
    remote_id: str,
    now: datetime,
) -> None:
    """A later expiry for one channel, committed as soon as the provider gave it."""
    row_id, calendar_id, channel_id, resource_id, _ = channel
    assert calendar_id is not None  # keep_channels renews the channels of calendars only
    if plan.kind == ConnectionKind.MICROSOFT:
        expires = provider.renew_subscription(plan.access, channel_id, now + CHANNEL_LIFETIME)
        row = db.session.get(PushChannel, row_id)
        if row is not None:
            row.expires_at, row.renewed_at = expires, now
        db.session.commit()
        PUSH_CHANNEL_CHANGES.labels(plan.kind, "renewed").inc()
        return
    # Google channels cannot be extended: a new one, then the old one stopped (both deliver
    # for a moment; a notification more is a sync more, never one less).
    _forget(row_id, None)  # its calendar is free for the new channel's row
    _make(provider, plan, connection_id, calendar_id, remote_id, now)
    try:
        _stop(provider, plan, channel_id, resource_id)
    except CalendarSyncError as err:
        log.info("calendar connection %s: old channel not stopped: %s", connection_id, err)
    PUSH_CHANNEL_CHANGES.labels(plan.kind, "renewed").inc()


def _stop(provider: Any, plan: _Plan, channel_id: str, resource_id: str | None) -> None:
    if plan.kind == ConnectionKind.GOOGLE:
        provider.stop_channel(plan.access, channel_id, resource_id)
    else:
        provider.unsubscribe(plan.access, channel_id)


@owns_transactions
def _forget(row_id: int, change: str | None) -> None:
    """Drop a channel's row (stopped, or replaced), committed at once."""
    db.session.execute(delete(PushChannel).where(PushChannel.id == row_id))
    db.session.commit()
    if change is not None:
        PUSH_CHANNEL_CHANGES.labels("any", change).inc()


def stop_channels(connection_id: int) -> int:
    """Stop every channel of the connection at the provider (before it is removed, while its
    grant still works); best effort, each request within ``STOP_TIMEOUT_S`` (a person is
    waiting, and a channel not stopped only expires by itself). Returns how many were stopped;
    their rows go with the connection."""
    with Session(db.engine) as session:
        plan = _plan(session, connection_id, STOP_TIMEOUT_S)
    if plan is None:
        return 0
    provider, stopped = provider_for(plan.kind), 0
    for _, _, channel_id, resource_id, _ in plan.channels:
        try:
            _stop(provider, plan, channel_id, resource_id)
            stopped += 1
        except CalendarSyncError as err:
            log.warning("calendar connection %s: channel not stopped: %s", connection_id, err)
    return stopped


def connections_with_channels() -> list[int]:
    """Connections whose channels the periodic upkeep looks after: every one with a channel
    (to renew or stop), and every active Google or Microsoft connection (to make one)."""
    with_channels = select(PushChannel.calendar_connection_id)
    return list(
        db.session.scalars(
            select(CalendarConnection.id)
            .where(
                CalendarConnection.id.in_(with_channels)
                | (
                    CalendarConnection.kind.in_([str(kind) for kind in PUSH_KINDS])
                    & CalendarConnection.active.is_(True)
                )
            )
            .order_by(CalendarConnection.id)
        )
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
    channel = _channel(ConnectionKind.GOOGLE, channel_id)
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
    sync, whose follow-up keeps the channels (``keep_channels``). Flushes; the caller commits."""
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
                PushChannel.kind == ConnectionKind.MICROSOFT,
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
