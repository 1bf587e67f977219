"""How to reach a connection's calendar: its URL, credentials (decrypted here, never logged)
and timeout, shared by the inbound sync and write-back."""

from __future__ import annotations

from flask import current_app
from sqlalchemy import select
from sqlalchemy.orm import object_session

from app.models import CalendarConnection, ConnectedCalendar
from app.services.common.encryption import SecretUnreadable, decrypt_secret, secret_keys
from app.services.integrations.calendars.errors import CalendarSyncError, CredentialsUnreadable
from app.services.integrations.calendars.providers.caldav import CalendarAccess

DEFAULT_TIMEOUT_SECONDS = 10.0
_ERROR_LENGTH = 2000


def caldav_timeout(timeout: float | None = None) -> float:
    """``timeout``, else the configured ``CALDAV_TIMEOUT_SECONDS``."""
    if timeout is not None:
        return timeout
    return float(current_app.config.get("CALDAV_TIMEOUT_SECONDS", DEFAULT_TIMEOUT_SECONDS))


def connection_access(
    connection: CalendarConnection, timeout: float
) -> tuple[CalendarAccess, CalendarSyncError | None]:
    """The connection's ``CalendarAccess``, and the error to report instead of reaching the
    server when the stored password cannot be decrypted."""
    password, problem = None, None
    if connection.encrypted_secret is not None:
        try:
            password = decrypt_secret(connection.encrypted_secret, secret_keys(current_app.config))
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
    )
    return access, problem


def _found_calendar(connection: CalendarConnection) -> str | None:
    """Where a sync last found the connection's calendar (a write goes there directly)."""
    return object_session(connection).scalar(
        select(ConnectedCalendar.remote_id)
        .where(
            ConnectedCalendar.calendar_connection_id == connection.id,
            ConnectedCalendar.sync_token.is_not(None) | ConnectedCalendar.ctag.is_not(None),
        )
        .order_by(ConnectedCalendar.id)
        .limit(1)
    )


def redacted(message: str, access: CalendarAccess) -> str:
    """``message`` as it may be stored and shown: without the password, and not too long."""
    if access.password and len(access.password) >= 4:
        message = message.replace(access.password, "***")
    return message[:_ERROR_LENGTH]
