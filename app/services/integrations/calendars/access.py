"""How to reach a connection's calendar: its URL, credentials (decrypted here, never logged)
and timeout, shared by the inbound sync and write-back."""

from __future__ import annotations

from functools import partial

from sqlalchemy import select
from sqlalchemy.orm import object_session

from app.config import settings
from app.models import CalendarConnection, ConnectedCalendar, ConnectionKind
from app.models.calendar_connection import OAUTH_KINDS
from app.services.common.encryption import SecretUnreadable, decrypt_secret
from app.services.integrations.calendars.errors import CalendarSyncError, CredentialsUnreadable
from app.services.integrations.calendars.oauth import oauth_provider, valid_access_token
from app.services.integrations.calendars.providers.caldav import CalendarAccess
from app.services.integrations.calendars.providers.feed import FeedAccess
from app.services.integrations.calendars.providers.http_json import ApiAccess
from app.services.integrations.outbound.addresses import (
    CALDAV_ALLOW_PRIVATE,
    AddressGuard,
    app_policy,
)

_ERROR_LENGTH = 2000


def caldav_timeout(timeout: float | None = None) -> float:
    """``timeout``, else the configured ``CALDAV_TIMEOUT_SECONDS``."""
    if timeout is not None:
        return timeout
    return settings().caldav_timeout_seconds


def caldav_allow_private() -> bool:
    """Whether calendar connections may lead to private addresses (``CALDAV_ALLOW_PRIVATE``:
    tests, a private deployment), whoever added them."""
    return settings().caldav_allow_private


# However slowly a feed's server sends its one answer, a provider's API its pages, or a CalDAV
# server its answers, a read (or a write) waits at most this many of its per-request timeouts in
# all.
READ_DEADLINE_TIMEOUTS = 6
# A CalDAV read that reads the calendar in full (the first, or after the server forgot its sync
# token) may take half as long again: one large answer for thousands of events, which a slow
# server takes a while to compute and send (90 s with the default timeout, below the worker's
# 120 s task limit, so the sync still records its outcome).
FULL_READ_DEADLINE_TIMEOUTS = READ_DEADLINE_TIMEOUTS * 3 // 2


def connection_access(
    connection: CalendarConnection, timeout: float
) -> tuple[CalendarAccess | FeedAccess | ApiAccess, CalendarSyncError | None]:
    """How to reach the connection's calendars (what its kind's provider takes), and the error
    to report instead of reaching the server when the stored secret cannot be decrypted."""
    if connection.kind in OAUTH_KINDS:
        provider = oauth_provider(connection.kind)
        api_access = ApiAccess(
            api_url=provider.api_url,
            label=provider.label,
            timeout=timeout,
            deadline_seconds=timeout * READ_DEADLINE_TIMEOUTS,
            token=partial(valid_access_token, connection.id, timeout),
            write_calendar=connection.write_calendar,
        )
        return api_access, None
    if connection.kind == ConnectionKind.ICS:
        deadline = timeout * READ_DEADLINE_TIMEOUTS
        return FeedAccess(connection.url, timeout, deadline, caldav_allow_private()), None
    password, problem = None, None
    if connection.encrypted_secret is not None:
        try:
            password = decrypt_secret(connection.encrypted_secret, settings().secret_keys)
        except SecretUnreadable:
            problem = CredentialsUnreadable(
                "the stored password cannot be decrypted with this SECRET_KEY; enter it again"
            )
    access = CalendarAccess(
        url=connection.url,
        username=connection.username,
        password=password,
        calendar=connection.calendar,
        calendar_url=_found_calendar(connection),
        timeout=timeout,
        deadline_seconds=timeout * READ_DEADLINE_TIMEOUTS,
        full_read_deadline_seconds=timeout * FULL_READ_DEADLINE_TIMEOUTS,
        guard=AddressGuard(
            app_policy(),
            allow_private=caldav_allow_private() or connection.added_by_operator,
            setting=CALDAV_ALLOW_PRIVATE,
        ),
    )
    return access, problem


def _found_calendar(connection: CalendarConnection) -> str | None:
    """Where a sync last found the connection's calendar (a write goes there directly)."""
    session = object_session(connection)
    assert session is not None  # a connection read from the database
    return session.scalar(
        select(ConnectedCalendar.remote_id)
        .where(
            ConnectedCalendar.calendar_connection_id == connection.id,
            ConnectedCalendar.sync_token.is_not(None) | ConnectedCalendar.ctag.is_not(None),
        )
        .order_by(ConnectedCalendar.id)
        .limit(1)
    )


def redacted(message: str, access: object) -> str:
    """``message`` as it may be stored and shown: without the password, and not too long."""
    password = getattr(access, "password", None)
    if password and len(password) >= 4:
        message = message.replace(password, "***")
    return message[:_ERROR_LENGTH]
