"""Health a person can act on: when a connection fails in a way trying again cannot mend (a
revoked grant, an expired refresh token, a deleted calendar, a feed that is gone), what they
must do, in words (``action_needed``), kept on the connection as ``needs_action`` by the sync
and cleared by its next success; shown on the dashboard, by ``flask connections list`` and
counted for ``/metrics`` (``connections_needing_action``); and told once by mail to the people
who can open the sub account in the dashboard (``tell_people``), until it has worked again.

The busy time the connection brought stays as it was meanwhile (``sync``): an unreachable
calendar never turns into a free one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from app.extensions import db
from app.models import CalendarConnection, ConnectionKind, Role, SubAccount, User
from app.models.calendar_connection import OAUTH_KINDS
from app.models.tenancy import user_sub_account_access
from app.scheduling.timezones import format_utc
from app.services.integrations.calendars.errors import (
    AuthenticationFailed,
    CalendarNotFound,
    CalendarSyncError,
    CredentialsUnreadable,
    MalformedCalendarData,
)
from app.services.integrations.notifications.connection_mail import ConnectionNotice, send_notice

log = logging.getLogger(__name__)

RECONNECT = "reconnect"
CHOOSE_CALENDAR = "choose another calendar"
CHECK_PASSWORD = "enter the username and password again"
SUBSCRIBE_AGAIN = "subscribe again with the feed's new address"
CHECK_FEED = "check the feed's address"
CHECK_SETTINGS = "check the connection's settings"

# (connection page) ← (sub account id, connection id): built by the caller, which may build
# web links (``app.links``); services do not.
PageLink = Callable[[int, int], str]


def action_needed(kind: str, err: CalendarSyncError) -> str | None:
    """What a person must do after ``err`` for a connection of ``kind`` to work again; None
    when trying again later may mend it by itself (``err.retryable``)."""
    if err.retryable:
        return None
    if kind == ConnectionKind.ICS:
        return CHECK_FEED if isinstance(err, MalformedCalendarData) else SUBSCRIBE_AGAIN
    if isinstance(err, AuthenticationFailed | CredentialsUnreadable):
        return RECONNECT if kind in OAUTH_KINDS else CHECK_PASSWORD
    if isinstance(err, CalendarNotFound):
        return CHOOSE_CALENDAR
    return CHECK_SETTINGS


def connections_needing_action() -> int:
    """How many active connections of active sub accounts wait for a person (the gauge)."""
    return (
        db.session.scalar(
            select(func.count())
            .select_from(CalendarConnection)
            .join(SubAccount, SubAccount.id == CalendarConnection.sub_account_id)
            .where(
                CalendarConnection.needs_action.is_not(None),
                CalendarConnection.active.is_(True),
                SubAccount.active.is_(True),
            )
        )
        or 0
    )


def tell_people(connection_id: int, *, now: datetime, page: PageLink) -> bool:
    """If the connection needs a person and its people were not told since it last worked,
    mail each of them once (``notifications.connection_mail``): which connection, what
    happened, what to do, and a link to its page (``page``). Returns whether they were told now.

    Its people: the active users who may open the sub account in the dashboard (the agency's
    owners, and the agency users it is granted to). The connection is marked told
    (``action_mailed_at``, flushed) once every message went out; a message that failed is tried
    again at the next call, and one already sent is not sent twice (its key names the spell of
    failure: the last success before it). No transaction is held while the mail server is
    waited for: the connection is read in a session of its own."""
    with Session(db.engine) as session:
        connection = session.get(CalendarConnection, connection_id)
        if (
            connection is None
            or connection.needs_action is None
            or connection.action_mailed_at is not None
            or not connection.active
        ):
            return False
        sub_account = session.get(SubAccount, connection.sub_account_id)
        assert sub_account is not None  # the connection's (a foreign key)
        if not sub_account.active:
            return False
        people = _people(session, sub_account)
        notice = ConnectionNotice(
            sub_account_id=sub_account.id,
            sub_account_name=sub_account.name,
            connection_name=connection.name,
            problem=connection.last_error or "the calendar could not be read",
            action=connection.needs_action,
            link=page(sub_account.id, connection.id),
        )
        since = format_utc(connection.last_success_at) if connection.last_success_at else "never"
    spell = f"connection:{connection_id}:needs-action:{since}"
    failures = send_notice(notice, people, now=now, key=lambda email: f"{spell}:{email}")
    if failures:
        log.warning("calendar connection %s: not everyone was told: %s", connection_id, failures)
        return False
    db.session.execute(
        update(CalendarConnection)
        .where(
            CalendarConnection.id == connection_id,
            CalendarConnection.needs_action.is_not(None),
        )
        .values(action_mailed_at=now)
        .execution_options(synchronize_session=False)
    )
    db.session.flush()
    return True


def _people(session: Session, sub_account: SubAccount) -> list[str]:
    """The addresses of the active users who may open ``sub_account`` in the dashboard."""
    granted = select(user_sub_account_access.c.user_id).where(
        user_sub_account_access.c.sub_account_id == sub_account.id
    )
    return list(
        session.scalars(
            select(User.email)
            .where(
                User.agency_id == sub_account.agency_id,
                User.active.is_(True),
                or_(User.role == Role.AGENCY_OWNER, User.id.in_(granted)),
            )
            .order_by(User.id)
        )
    )
