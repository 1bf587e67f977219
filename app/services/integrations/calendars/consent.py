"""Connecting a Google or Microsoft 365 account the way people do: the provider's consent page,
then choosing which of the account's calendars keep the calendar from being booked and which
one receives the bookings.

The dashboard starts a consent with ``begin_consent`` (where to send the browser, and the
``state`` the provider sends back), and finishes it when the provider sends the browser back
with a code: ``take_consent`` finds the consent by its state and marks it used, once, in its
own transaction; ``finish_consent`` makes the code a grant, and the grant a connection reading
the account's primary calendar. What waits between the two is kept by the server
(``OAuthConsent``): the PKCE verifier never reaches the browser, and a callback replayed with
an old cookie finds its consent used and exchanges no code a second time. ``choose_calendars``
then sets what the person chose. The provisioning document's ``refreshToken`` form
(``connections.CalendarConnectionDoc``) reaches the same rows without a browser.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from sqlalchemy import delete, select, update

from app.config import Settings, settings
from app.extensions import db
from app.models import CalendarConnection, ConnectedCalendar, OAuthConsent, SubAccount
from app.models.calendar_connection import OAUTH_KINDS
from app.models.types import utcnow
from app.services.common.encryption import (
    SecretUnreadable,
    decrypt_secret,
    encrypt_secret,
)
from app.services.common.errors import InvalidRequest
from app.services.common.tokens import token_digest
from app.services.integrations.calendars.access import caldav_timeout
from app.services.integrations.calendars.connections import (
    ConnectionTestFailed,
    create_connection,
    find_connection,
    list_calendars,
)
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.freshness import request_sync
from app.services.integrations.calendars.oauth import (
    OAuthProvider,
    authorization_url,
    exchange_code,
    oauth_provider,
)
from app.services.integrations.calendars.providers import PRIMARY
from app.services.integrations.calendars.sync import recount

# At most this many calendars of one account are read for busy time (each is a sync of its
# own); the provisioning document has the same bound.
MAX_CHOSEN_CALENDARS = 20
# How long a consent begun may wait for the provider's redirect back: a person reading the
# consent page and signing in there, not a day.
CONSENT_LIFETIME = timedelta(minutes=30)


class ProviderNotConfigured(InvalidRequest):
    """The operator has not given the service an OAuth client at this provider."""


@dataclass(frozen=True)
class Consent:
    """A consent begun: where to send the browser, and the state it comes back with."""

    url: str
    state: str


@dataclass(frozen=True)
class ConsentTaken:
    """A consent the provider's redirect came back for, now used: what to finish it with."""

    kind: str
    sub_account_id: int
    code_verifier: str


def provider_setup(kind: str) -> OAuthProvider:
    """The provider ``kind`` as configured (``configured``, ``missing_settings``, ``label``)."""
    if kind not in OAUTH_KINDS:
        raise InvalidRequest(f"{kind} is not connected through a consent page")
    return oauth_provider(kind)


def consent_page_origins(configured: Settings) -> list[str]:
    """The origins of the configured providers' consent pages (where "Connect" leads)."""
    origins = []
    for kind in OAUTH_KINDS:
        provider = oauth_provider(kind, configured)
        if provider.configured:
            parts = urlsplit(provider.authorize_url)
            origins.append(f"{parts.scheme}://{parts.netloc}")
    return list(dict.fromkeys(origins))


def begin_consent(
    kind: str, redirect_uri: str, *, sub_account: SubAccount, user_id: int, now: datetime
) -> Consent:
    """Where to send the person (``user_id``) to allow the service calendar access at ``kind``
    for ``sub_account``; the consent waits, kept by the server, for ``CONSENT_LIFETIME``
    (those that expired are dropped). Raises ``ProviderNotConfigured`` naming the settings an
    operator must make first. Flushes, never commits."""
    provider = provider_setup(kind)
    if not provider.configured:
        raise ProviderNotConfigured(
            f"{provider.label} calendars cannot be connected on this server yet: its operator"
            f" sets {' and '.join(provider.missing_settings)} (see docs/operations.md)"
        )
    state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
    db.session.execute(delete(OAuthConsent).where(OAuthConsent.expires_at <= now))
    db.session.add(
        OAuthConsent(
            state_digest=token_digest(state),
            kind=kind,
            sub_account_id=sub_account.id,
            user_id=user_id,
            encrypted_verifier=encrypt_secret(verifier, settings().secret_keys[0]),
            created_at=now,
            expires_at=now + CONSENT_LIFETIME,
        )
    )
    db.session.flush()
    url = authorization_url(provider, redirect_uri, state, verifier, caldav_timeout())
    return Consent(url, state)


def take_consent(state: str, kind: str, *, user_id: int, now: datetime) -> ConsentTaken | None:
    """The consent ``state`` names, begun by ``user_id`` at ``kind`` and neither used nor
    expired, marked used (one statement: of two callbacks at once, one takes it); None for any
    other. The caller commits before finishing it, so the use is kept even if the provider
    then refuses the code."""
    taken = db.session.execute(
        update(OAuthConsent)
        .where(
            OAuthConsent.state_digest == token_digest(state),
            OAuthConsent.kind == kind,
            OAuthConsent.user_id == user_id,
            OAuthConsent.used_at.is_(None),
            OAuthConsent.expires_at > now,
        )
        .values(used_at=now)
        .returning(OAuthConsent.sub_account_id, OAuthConsent.encrypted_verifier)
        .execution_options(synchronize_session=False)
    ).first()
    if taken is None:
        return None
    try:
        verifier = decrypt_secret(taken.encrypted_verifier, settings().secret_keys)
    except SecretUnreadable:  # SECRET_KEY changed meanwhile: begin again
        return None
    return ConsentTaken(kind, taken.sub_account_id, verifier)


def finish_consent(
    sub_account: SubAccount, kind: str, redirect_uri: str, code: str, code_verifier: str
) -> CalendarConnection:
    """A connection of the account that consented (reading and writing its primary calendar
    until the person chooses), from the code the provider sent back. Raises
    ``ConnectionTestFailed`` when the provider does not grant it. Flushes, never commits."""
    provider = provider_setup(kind)
    try:
        grant = exchange_code(provider, redirect_uri, code, code_verifier, caldav_timeout())
    except CalendarSyncError as err:
        raise ConnectionTestFailed(err.message) from None
    connection = create_connection(
        sub_account,
        {
            "name": _free_name(sub_account, provider.label),
            "kind": kind,
            "refreshToken": grant.refresh_token,
            "writeBack": True,
        },
    )
    connection.encrypted_secret = grant.sealed(settings().secret_keys[0])
    db.session.flush()
    return connection


@dataclass(frozen=True)
class CalendarOption:
    """One calendar of the account, as the person chooses among them."""

    remote_id: str
    name: str
    checked: bool  # read for busy time now
    write_into: bool  # bookings are written into it now
    writable: bool  # the account may write into it (a shared calendar may be read-only)


def calendar_options(sub_account: SubAccount, connection_id: int) -> list[CalendarOption]:
    """The account's calendars (asked of the provider now) with what is chosen of them;
    raises ``ConnectionTestFailed`` when the provider cannot be asked."""
    connection = find_connection(sub_account, connection_id)
    _require_oauth(connection)
    found = list_calendars(sub_account, connection.id)
    chosen = _chosen(connection.id)
    options = []
    for calendar in found:
        ids = {calendar.url} | ({PRIMARY} if calendar.primary else set())
        options.append(
            CalendarOption(
                calendar.url,
                calendar.name or calendar.url,
                checked=bool(ids & chosen),
                write_into=connection.write_calendar in ids,
                writable=calendar.writable,
            )
        )
    return options


def choose_calendars(
    sub_account: SubAccount,
    connection_id: int,
    calendars: list[str],
    write_calendar: str | None,
    write_back: bool,
) -> CalendarConnection:
    """Read ``calendars`` (ids) for busy time, and write bookings into ``write_calendar`` when
    ``write_back``. A calendar no longer chosen stops blocking time at once (its busy time
    goes with its rows); one still chosen keeps its sync state. Flushes, never commits."""
    connection = find_connection(sub_account, connection_id)
    _require_oauth(connection)
    wanted = list(dict.fromkeys(c for c in calendars if c))
    if not wanted:
        raise InvalidRequest(
            "Choose at least one calendar to check for conflicts.",
            errors={"calendars": ["Choose at least one calendar."]},
        )
    if len(wanted) > MAX_CHOSEN_CALENDARS:
        raise InvalidRequest(
            f"Choose at most {MAX_CHOSEN_CALENDARS} calendars.",
            errors={"calendars": [f"At most {MAX_CHOSEN_CALENDARS}."]},
        )
    if write_back and not write_calendar:
        raise InvalidRequest(
            "Choose the calendar bookings are written into, or turn write-back off.",
            errors={"writeCalendar": ["Choose a calendar."]},
        )
    chosen = _chosen(connection.id)
    db.session.execute(
        delete(ConnectedCalendar).where(
            ConnectedCalendar.calendar_connection_id == connection.id,
            ConnectedCalendar.remote_id.not_in(wanted),
        )
    )
    for remote_id in wanted:
        if remote_id not in chosen:
            db.session.add(
                ConnectedCalendar(calendar_connection_id=connection.id, remote_id=remote_id)
            )
    connection.write_back = write_back
    if write_calendar:
        connection.write_calendar = write_calendar
    db.session.flush()
    # The busy time of the calendars no longer read went with them: the page says what is left
    # until the sync of those now chosen tells more.
    recount(connection)
    db.session.flush()
    request_sync(connection.id, utcnow())  # the calendars now chosen, read at once
    return connection


def _chosen(connection_id: int) -> set[str]:
    return set(
        db.session.scalars(
            select(ConnectedCalendar.remote_id).where(
                ConnectedCalendar.calendar_connection_id == connection_id
            )
        )
    )


def _require_oauth(connection: CalendarConnection) -> None:
    if connection.kind not in OAUTH_KINDS:
        raise InvalidRequest("Only Google and Microsoft 365 connections choose calendars here.")


def _free_name(sub_account: SubAccount, label: str) -> str:
    """``label``, or ``label 2``, ``label 3``… : the first name the sub account has not used."""
    taken = set(
        db.session.scalars(
            select(CalendarConnection.name).where(
                CalendarConnection.sub_account_id == sub_account.id
            )
        )
    )
    name, n = label, 1
    while name in taken:
        n += 1
        name = f"{label} {n}"
    return name
