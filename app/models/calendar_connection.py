"""External calendars whose busy time keeps the calendar from double booking.

A ``CalendarConnection`` is one account at one provider (its ``kind``); the calendars of it that
are read are its ``ConnectedCalendar`` rows, each with its own sync state; what was read of a
calendar is kept per item (``CalendarItem``: one CalDAV resource, one Google or Microsoft
event, one event of a feed), and each item's busy periods are ``BlockedTime`` rows pointing at
it. So a change to one event touches only that event's rows.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import Model
from app.models.host import host_column
from app.models.limits import CALDAV_URL_MAX, ETAG_MAX, NAME_MAX, TIMEZONE_MAX
from app.models.types import UTCDateTime, utcnow


class ConnectionKind(StrEnum):
    """Where a connection's calendars live; it picks the adapter that reads and writes them."""

    CALDAV = "caldav"
    GOOGLE = "google"
    MICROSOFT = "microsoft"
    ICS = "ics"  # a read-only feed (webcal:// or https://)


# The kinds reached through an OAuth grant (kept in ``encrypted_secret``), not a password.
OAUTH_KINDS = (ConnectionKind.GOOGLE, ConnectionKind.MICROSOFT)


class CalendarConnection(Model):
    """An account whose calendars' busy time blocks the sub account's calendar
    (``app.services.integrations.calendars``). Its secret (a CalDAV password, an OAuth grant)
    is stored encrypted (``app.services.common.encryption``) and never shown.

    Five groups of columns:

    - configuration: ``name`` (unique in the sub account), ``kind``, ``url`` (the CalDAV server
      or principal URL, the feed's URL; for Google and Microsoft the provider's name),
      ``calendar`` (CalDAV: the calendar's URL or display name; None: the account's only
      calendar), ``username``, ``encrypted_secret``, ``write_back``, ``write_calendar`` (Google
      and Microsoft: the id of the calendar bookings are written into), ``active``;
    - outcome, for operators: ``last_attempt_at``, ``last_success_at``, ``last_error`` and
      ``last_error_at`` (the latest failure, kept after a success so flapping shows),
      ``consecutive_failures`` (0 = healthy), ``busy_count`` (busy periods stored),
      ``skipped_count`` and ``skipped_reason`` (events the latest sync could not read);
    - write-back outcome (bookings written into the calendar, ``write_back``): ``last_write_at``
      (the latest successful write), ``last_write_error`` and ``last_write_error_at``;
    - the bookings made before write-back began (``write_existing_pending``: set when the
      connection is made with write-back on, or write-back is switched on, and cleared once the
      worker has written the sub account's future active bookings into it;
      ``write_existing_after``: the booking id written up to so far, ids in order);
    - what a person must do (``needs_action``: the action in words, such as "reconnect", set by
      a failure that trying again cannot fix, cleared by a success) and when they were told by
      mail (``action_mailed_at``: once, until the connection has worked again);
    - freshness (``app.services.integrations.calendars.freshness``): ``sync_requested_at`` (a
      sync is queued; asking again meanwhile queues nothing more), ``sync_running_until`` (a
      sync is running, a lease a crashed worker's sync gives up when it passes), and
      ``last_notification_at`` (the latest push notification for one of its calendars);
    - a person's "Test connection", run by the worker: ``test_requested_at``,
      ``test_finished_at`` and ``test_result`` (JSON: the calendars listed, or the error).

    The sync state is per calendar, on ``ConnectedCalendar``.
    """

    __tablename__ = "calendar_connections"
    __table_args__ = (UniqueConstraint("sub_account_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    # The host whose calendar this is.
    host_id: Mapped[int] = host_column()
    name: Mapped[str] = mapped_column(String(NAME_MAX))
    kind: Mapped[str] = mapped_column(String(32), default=ConnectionKind.CALDAV)
    url: Mapped[str] = mapped_column(String(CALDAV_URL_MAX))
    calendar: Mapped[str | None] = mapped_column(String(CALDAV_URL_MAX))
    username: Mapped[str | None] = mapped_column(String(255))
    encrypted_secret: Mapped[str | None] = mapped_column(Text)
    write_back: Mapped[bool] = mapped_column(Boolean, default=True)
    write_calendar: Mapped[str | None] = mapped_column(String(CALDAV_URL_MAX))
    active: Mapped[bool] = mapped_column(Boolean, default=True)

    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0)
    busy_count: Mapped[int] = mapped_column(Integer, default=0)
    skipped_count: Mapped[int] = mapped_column(Integer, default=0)
    skipped_reason: Mapped[str | None] = mapped_column(Text)
    last_write_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_write_error: Mapped[str | None] = mapped_column(Text)
    last_write_error_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    write_existing_pending: Mapped[bool] = mapped_column(Boolean, default=False)
    write_existing_after: Mapped[int | None] = mapped_column(Integer)
    needs_action: Mapped[str | None] = mapped_column(Text)
    action_mailed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sync_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    sync_running_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_notification_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    test_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    test_finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    test_result: Mapped[str | None] = mapped_column(Text)  # JSON: calendars, or an error
    # Added by an operator (``flask connections add``, provisioning) and not pointed elsewhere
    # since by a dashboard user: its CalDAV URLs may lead to private addresses (operators'
    # own servers). A dashboard user's may not, at any request (unless CALDAV_ALLOW_PRIVATE).
    added_by_operator: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def failing(self) -> bool:
        """The latest sync attempt failed."""
        return self.consecutive_failures > 0


class ConnectedCalendar(Model):
    """One calendar of a connection that is read for busy time, with what lets the next sync
    read only what changed since the last one:

    - ``remote_id``: where the calendar is (a CalDAV calendar's URL, a Google or Microsoft
      calendar id, a feed's URL); ``name`` as the provider shows it;
    - ``sync_token``: the provider's marker for "changes since" (CalDAV's ``DAV:sync-token``,
      Google's ``nextSyncToken``, Microsoft's delta link, a feed's ``ETag``);
    - ``ctag``: a second marker for an unchanged calendar (CalendarServer's ``getctag``, a
      digest of the members' ETags, a feed's ``Last-Modified``);
    - ``synced_until`` and ``synced_timezone``: the end of the window that was read, and the
      timezone all-day and floating events were placed in. A sync whose window reaches past
      ``synced_until``, or whose timezone differs, reads the calendar in full.
    """

    __tablename__ = "connected_calendars"
    __table_args__ = (UniqueConstraint("calendar_connection_id", "remote_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    calendar_connection_id: Mapped[int] = mapped_column(
        ForeignKey("calendar_connections.id", ondelete="CASCADE"), index=True
    )
    remote_id: Mapped[str] = mapped_column(String(CALDAV_URL_MAX))
    name: Mapped[str | None] = mapped_column(String(NAME_MAX))
    sync_token: Mapped[str | None] = mapped_column(Text)
    ctag: Mapped[str | None] = mapped_column(Text)
    synced_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    synced_timezone: Mapped[str | None] = mapped_column(String(TIMEZONE_MAX))

    def forget_sync_state(self) -> None:
        """Make the next sync read the calendar in full."""
        self.sync_token = None
        self.ctag = None
        self.synced_until = None
        self.synced_timezone = None


class CalendarItem(Model):
    """One item of a connected calendar as last read: ``key`` is where it is (a CalDAV
    resource's href, a Google or Microsoft event id, an event's UID in a feed), ``etag`` its
    version there, ``uid`` its iCalendar UID (the service's own written-back events are not
    busy time). Its busy periods are the ``BlockedTime`` rows that point at it. ``problem``:
    why the item could not be read (its earlier busy periods, if any, stay in force)."""

    __tablename__ = "calendar_items"
    __table_args__ = (UniqueConstraint("connected_calendar_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    connected_calendar_id: Mapped[int] = mapped_column(
        ForeignKey("connected_calendars.id", ondelete="CASCADE"), index=True
    )
    key: Mapped[str] = mapped_column(String(CALDAV_URL_MAX))
    etag: Mapped[str | None] = mapped_column(String(ETAG_MAX))
    uid: Mapped[str | None] = mapped_column(String(500))
    problem: Mapped[str | None] = mapped_column(Text)


class WrittenEvent(Model):
    """That write-back put a booking's event in a connection's calendar, and where: for the
    providers that choose an event's id themselves (Microsoft Graph: neither the id nor the
    iCalendar UID can be set) its ``event_id``, by which write-back updates and deletes it and
    the sync knows an item as the service's own (not busy time: the booking occupies that time
    itself); for those that store it under the booking's UID, ``NO_EVENT_ID``. So a booking
    moved to another host is deleted from the calendars it is in that are no longer its
    hosts'."""

    __tablename__ = "written_events"
    __table_args__ = (
        UniqueConstraint("booking_id", "calendar_connection_id"),
        Index("ix_written_events_connection_event", "calendar_connection_id", "event_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    booking_id: Mapped[int] = mapped_column(ForeignKey("bookings.id", ondelete="CASCADE"))
    calendar_connection_id: Mapped[int] = mapped_column(
        ForeignKey("calendar_connections.id", ondelete="CASCADE")
    )
    event_id: Mapped[str] = mapped_column(String(CALDAV_URL_MAX))


# ``WrittenEvent.event_id`` of an event found by the booking's UID (no id of the provider's).
NO_EVENT_ID = ""


class CalendarWriteLease(Model):
    """One writer at a time of a booking's event in a connection's calendar: the write-back of
    an outbox event, a second delivery of it, and the writing of existing bookings after a
    connection is made could otherwise write the same booking at once (two events where the
    provider chooses the id, as Graph does). A writer claims the row (committed at once) before
    it writes, and the row goes in the transaction that records what it wrote; one that finds
    the row held, and not past ``until``, leaves the booking to its retry. ``until`` outlasts
    any write (a worker task's hard time limit), so a writer that died frees it then."""

    __tablename__ = "calendar_write_leases"

    booking_id: Mapped[int] = mapped_column(
        ForeignKey("bookings.id", ondelete="CASCADE"), primary_key=True
    )
    calendar_connection_id: Mapped[int] = mapped_column(
        ForeignKey("calendar_connections.id", ondelete="CASCADE"), primary_key=True
    )
    holder: Mapped[str] = mapped_column(String(32))
    until: Mapped[datetime] = mapped_column(UTCDateTime)


class PushChannel(Model):
    """A provider's promise to tell the service when a connected calendar changes: a Google
    ``events.watch`` channel or a Microsoft Graph subscription
    (``app.services.integrations.calendars.push``). ``channel_id`` is the channel's id (chosen
    by the service for Google, by Graph for a subscription), ``resource_id`` Google's id of the
    watched calendar (both needed to stop the channel); ``secret_digest`` the SHA-256 of the
    secret the provider sends back with every notification (Google's channel token, Graph's
    ``clientState``), so the secret itself is never stored; ``expires_at`` when the provider
    stops sending (renewed before that)."""

    __tablename__ = "push_channels"
    __table_args__ = (UniqueConstraint("kind", "channel_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    calendar_connection_id: Mapped[int] = mapped_column(
        ForeignKey("calendar_connections.id", ondelete="CASCADE"), index=True
    )
    # None: the calendar is no longer read; the worker stops the channel and drops the row.
    connected_calendar_id: Mapped[int | None] = mapped_column(
        ForeignKey("connected_calendars.id", ondelete="SET NULL"), unique=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    channel_id: Mapped[str] = mapped_column(String(255))
    resource_id: Mapped[str | None] = mapped_column(String(CALDAV_URL_MAX))
    secret_digest: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    renewed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_notification_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class OAuthConsent(Model):
    """A Google or Microsoft consent begun from the dashboard and not yet finished: what the
    provider's redirect back is checked against and finished with, kept by the server
    (``app.services.integrations.calendars.consent``). ``state_digest`` is the SHA-256 of the
    ``state`` sent to the provider; ``encrypted_verifier`` the PKCE code verifier, encrypted
    with ``SECRET_KEY``, so neither the browser's cookie nor a reader of the database has it;
    ``used_at`` is set when the callback takes it, once: a replayed callback finds it used."""

    __tablename__ = "oauth_consents"

    id: Mapped[int] = mapped_column(primary_key=True)
    state_digest: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    sub_account_id: Mapped[int] = mapped_column(
        ForeignKey("sub_accounts.id", ondelete="CASCADE"), index=True
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    encrypted_verifier: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
