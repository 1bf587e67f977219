"""Calendar connections: operators manage them with ``flask connections …`` (add, list, remove),
dashboard users with the functions below the operator's, which keep to a sub account and check
where a typed URL leads. Syncing is ``app.services.integrations.calendars.sync``. Passwords
are stored encrypted and never shown. The connection's document (``CalendarConnectionDoc``)
lives here, and provisioning creates connections through ``create_connection``.

Where a connection may point (users' functions only): the CalDAV URL, and a calendar given as
a URL, must resolve to public addresses, as webhook URLs must (``outbound.addresses``: no
loopback, private, link-local — the cloud metadata service — or otherwise reserved address,
nor an IPv6 address hiding one) unless ``CALDAV_ALLOW_PRIVATE`` is on (tests and their Radicale
on 127.0.0.1, a private deployment), which the refusal names. The check runs when a URL is
saved and again before each test and "sync now", and the CalDAV client checks every
connection it makes, at every sync, live check and write-back: the name is resolved once, by
the guard, and the connection goes to the address checked (a redirect's target, and a name
whose DNS answer has changed since, are checked anew and refused before anything is sent). An
operator's connections (``added_by_operator``) may lead to private addresses. A stored password
is only ever sent to the server it was entered for: pointing a connection at another server
needs the password again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urljoin, urlsplit

from marshmallow import Schema, ValidationError, fields, validate, validates_schema
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import settings
from app.extensions import db
from app.models import (
    BlockedTime,
    CalendarConnection,
    ConnectedCalendar,
    ConnectionKind,
    Host,
    SubAccount,
)
from app.models.calendar_connection import OAUTH_KINDS
from app.models.types import utcnow
from app.services.common.encryption import SecretUnreadable, encrypt_secret
from app.services.common.errors import InvalidRequest, NotFound
from app.services.common.ids import is_storable_id
from app.services.common.lookups import get_checked, load_named, rows_in_order
from app.services.integrations.calendars.access import (
    caldav_allow_private,
    caldav_timeout,
    connection_access,
    redacted,
)
from app.services.integrations.calendars.errors import CalendarSyncError
from app.services.integrations.calendars.freshness import (
    ConnectionFreshness,
    connection_freshness,
    enqueue_after_commit,
    request_sync,
)
from app.services.integrations.calendars.oauth import Grant, oauth_provider, revoke
from app.services.integrations.calendars.providers import PRIMARY, provider_for
from app.services.integrations.calendars.providers.feed import feed_url
from app.services.integrations.calendars.push import push_enabled, stop_channels
from app.services.integrations.calendars.sync import forget_sync_state
from app.services.integrations.outbound.addresses import (
    CALDAV_ALLOW_PRIVATE,
    UnsafeUrl,
    resolve_target,
)
from app.validation import Text, describe_errors, flatten_errors

log = logging.getLogger(__name__)

MAX_LISTED_CALENDARS = 100


class ConnectionNotFound(NotFound):
    message = "Calendar connection not found"


class ConnectionTestFailed(InvalidRequest):
    """The server could not be reached, refused the credentials, or did not answer as a
    CalDAV server does; the message says which, never with the password."""


@dataclass(frozen=True)
class CalendarChoice:
    """A calendar of the connection's account: its display name (None: unnamed) and URL (or,
    for Google and Microsoft, its id); whether it is the account's primary one, and whether
    bookings can be written into it."""

    name: str | None
    url: str
    primary: bool = False
    writable: bool = True


def _http_url(value: str) -> None:
    """An absolute http(s) URL with a host; credentials belong in username and password."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValidationError("Not a valid URL.") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError("Must be an http:// or https:// URL.")
    if parts.username is not None or parts.password is not None:
        raise ValidationError("Must not contain credentials; use username and password.")


def _calendar_reference(value: str) -> None:
    """A calendar's URL (absolute, or a path on the server) or its display name."""
    if "://" in value:
        _http_url(value)


def _feed_url(value: str) -> None:
    """A feed's address: ``webcal://`` (a feed's own scheme), ``https://`` or ``http://``."""
    scheme = urlsplit(value).scheme.lower()
    _http_url(feed_url(value) if scheme == "webcal" else value)


_DOCUMENT_KINDS = tuple(ConnectionKind)
_FIELDS_OF_KIND = {
    ConnectionKind.CALDAV: {"url", "username", "password", "calendar", "writeBack"},
    ConnectionKind.ICS: {"url"},
    ConnectionKind.GOOGLE: {"refreshToken", "calendars", "writeCalendar", "writeBack"},
    ConnectionKind.MICROSOFT: {"refreshToken", "calendars", "writeCalendar", "writeBack"},
}
_REQUIRED_OF_KIND = {
    ConnectionKind.CALDAV: ("url", "username", "password"),
    ConnectionKind.ICS: ("url",),
    ConnectionKind.GOOGLE: ("refreshToken",),
    ConnectionKind.MICROSOFT: ("refreshToken",),
}


class CalendarConnectionDoc(Schema):
    """A connection as provisioning, the CLI and the dashboard describe it. ``kind`` picks the
    provider and the fields that apply:

    - ``caldav`` (the default): ``url``, ``username``, ``password``, optionally ``calendar``
      and ``writeBack``;
    - ``ics`` (a feed, read-only): ``url``;
    - ``google`` and ``microsoft`` (the headless form of the dashboard's consent, for scripts
      and tests): ``refreshToken``, ``calendars`` (the ids checked for conflicts; default the
      primary), ``writeCalendar`` (the id bookings are written into; default the primary) and
      ``writeBack``.
    """

    # The fields any kind may have (a document that adds one, as provisioning's ``host``, names
    # it here too).
    FIELDS_OF_EVERY_KIND = frozenset({"name", "kind", "active"})

    name = Text(required=True, validate=validate.Length(min=1, max=255))
    kind = fields.String(
        load_default=ConnectionKind.CALDAV, validate=validate.OneOf(list(_DOCUMENT_KINDS))
    )
    url = Text(validate=validate.Length(max=1000))
    username = Text(validate=validate.Length(min=1, max=255))
    password = Text(validate=validate.Length(min=1, max=1024))
    calendar = Text(
        load_default=None,
        allow_none=True,
        validate=[validate.Length(min=1, max=1000), _calendar_reference],
    )
    refreshToken = Text(validate=validate.Length(min=1, max=4096))
    calendars = fields.List(
        Text(validate=validate.Length(min=1, max=1000)), validate=validate.Length(min=1, max=20)
    )
    writeCalendar = Text(allow_none=True, validate=validate.Length(min=1, max=1000))
    writeBack = fields.Boolean(load_default=True)

    @validates_schema(pass_original=True)
    def _fields_of_the_kind(self, data: dict[str, Any], original: Any, **kwargs: Any) -> None:
        errors: dict[str, list[str]] = {}
        kind = data.get("kind", ConnectionKind.CALDAV)
        allowed = _FIELDS_OF_KIND[kind] | self.FIELDS_OF_EVERY_KIND
        given = original.keys() if isinstance(original, dict) else data.keys()
        for field in sorted((given & self.fields.keys()) - allowed):
            errors[field] = [f"Not a field of a {kind} connection."]
        if not kwargs.get("partial"):
            for field in _REQUIRED_OF_KIND[kind]:
                if field not in data:
                    errors[field] = ["Missing data for required field."]
        if "url" in data and kind in (ConnectionKind.CALDAV, ConnectionKind.ICS):
            try:
                (_feed_url if kind == ConnectionKind.ICS else _http_url)(data["url"])
            except ValidationError as err:
                errors["url"] = list(err.messages)
        if errors:
            raise ValidationError(errors)


def create_connection(
    sub_account: SubAccount, doc: dict, *, by_operator: bool = False
) -> CalendarConnection:
    """A connection of the document's kind. Its secret (a CalDAV password, an OAuth grant) is
    stored encrypted (``app.services.common.encryption``); a feed never writes back; the
    calendars a Google or Microsoft connection reads are its ``ConnectedCalendar`` rows.
    ``by_operator``: an operator's (its CalDAV server may be on a private address)."""
    kind = doc["kind"]
    key = settings().secret_keys[0]
    connection = CalendarConnection(
        sub_account_id=sub_account.id, name=doc["name"], kind=kind, added_by_operator=by_operator
    )
    if kind == ConnectionKind.CALDAV:
        connection.url, connection.calendar = doc["url"], doc["calendar"]
        connection.username = doc["username"]
        connection.encrypted_secret = encrypt_secret(doc["password"], key)
        connection.write_back = doc["writeBack"]
    elif kind == ConnectionKind.ICS:
        connection.url, connection.write_back = doc["url"], False
    else:
        connection.url = kind  # the provider's endpoints are configuration, not the row's
        connection.encrypted_secret = Grant(doc["refreshToken"]).sealed(key)
        connection.write_back = doc["writeBack"]
        connection.write_calendar = doc.get("writeCalendar") or PRIMARY
    # Bookings made before it was connected are written by the worker (``write_back``).
    connection.write_existing_pending = connection.write_back
    db.session.add(connection)
    db.session.flush()
    if kind in OAUTH_KINDS:
        for remote_id in dict.fromkeys(doc.get("calendars") or [PRIMARY]):
            db.session.add(
                ConnectedCalendar(calendar_connection_id=connection.id, remote_id=remote_id)
            )
    # Read at once, whoever made it: the worker has it as soon as this commits.
    request_sync(connection.id, utcnow())
    return connection


def list_connections(sub_account_id: int | None = None) -> list[CalendarConnection]:
    return rows_in_order(CalendarConnection, sub_account_id)


def get_connection(connection_id: int) -> CalendarConnection:
    return get_checked(CalendarConnection, connection_id, lambda _: True, ConnectionNotFound)


def add_connection(
    sub_account_id: int, document: dict[str, Any], *, by_operator: bool = True
) -> CalendarConnection:
    """A connection from the provisioning document's fields (``name``, ``url``, ``username``,
    ``password``, ``calendar``, ``writeBack``); every problem named by field.

    For operators (``flask connections add``, provisioning): the URL may be any address, private
    ones included, whatever ``CALDAV_ALLOW_PRIVATE`` says. Operators run the service and reach
    its network anyway; the check keeps dashboard users, who do not, from pointing the server at
    what only it can reach. Dashboard users add through ``connect_calendar``, whose
    connections are checked at every request as well (``by_operator=False``)."""
    sub_account, doc = load_named(
        sub_account_id, CalendarConnectionDoc(), document, CalendarConnection
    )
    connection = create_connection(sub_account, doc, by_operator=by_operator)
    db.session.flush()
    return connection


def remove_connection(connection_id: int) -> None:
    """Delete the connection and the busy time it brought (its external blocked times). Its
    push channels are stopped and a Google grant is revoked first (best effort: a provider that
    cannot be reached does not keep a person from removing the connection; a channel not
    stopped expires by itself, and its notifications are refused meanwhile)."""
    connection = get_connection(connection_id)
    if connection.kind in OAUTH_KINDS and connection.encrypted_secret:
        stop_channels(connection.id)  # while the grant still works
        try:
            grant = Grant.opened(connection.encrypted_secret, settings().secret_keys)
            revoke(oauth_provider(connection.kind), grant, caldav_timeout())
        except (SecretUnreadable, CalendarSyncError):
            log.warning("calendar connection %s: grant not revoked", connection.id)
    db.session.delete(connection)
    db.session.flush()


# Dashboard users: a sub account's connections, with where their URLs lead checked.


class ConnectionChangesDoc(CalendarConnectionDoc):
    """Changes to a connection: any of ``CalendarConnectionDoc``'s fields, and ``active``."""

    active = fields.Boolean()


def find_connection(sub_account: SubAccount, connection_id: int) -> CalendarConnection:
    """The sub account's connection ``connection_id``; another sub account's is not found."""
    connection = (
        db.session.get(CalendarConnection, connection_id) if is_storable_id(connection_id) else None
    )
    if connection is None or connection.sub_account_id != sub_account.id:
        raise ConnectionNotFound()
    return connection


def connect_calendar(sub_account: SubAccount, document: dict[str, Any]) -> CalendarConnection:
    """``add_connection`` for a dashboard user: the same document and rules, and the URL (and a
    calendar given as a URL) must lead to a permitted address. Flushes, never commits."""
    errors = flatten_errors(CalendarConnectionDoc().validate(document))
    if "url" not in errors:
        calendar = None if "calendar" in errors else document.get("calendar")
        errors.update(_target_errors(document["url"], calendar))
    if errors:
        raise _invalid(errors)
    return add_connection(sub_account.id, document, by_operator=False)


def update_connection(
    sub_account: SubAccount, connection_id: int, document: dict[str, Any]
) -> CalendarConnection:
    """Apply ``document`` (any of ``name``, ``url``, ``username``, ``password``, ``calendar``,
    ``writeBack``, ``active``; a field left out stays as it is) to the connection.

    A new URL, username, password or calendar makes the next sync read the calendar afresh. A
    URL or calendar on a server the stored password was not entered for needs ``password``.
    Flushes, never commits."""
    connection = find_connection(sub_account, connection_id)
    if document.get("kind", connection.kind) != connection.kind:
        raise _invalid({"kind": ["A connection's kind cannot change: add a new connection."]})
    try:  # the fields of the connection's own kind
        doc = ConnectionChangesDoc().load({**document, "kind": connection.kind}, partial=True)
    except ValidationError as err:
        raise _invalid(flatten_errors(err.messages)) from None
    name = doc.get("name", connection.name)
    url = doc.get("url", connection.url)
    username = doc.get("username", connection.username)
    calendar = doc.get("calendar", connection.calendar)
    errors: dict[str, list[str]] = {}
    if name != connection.name and _name_taken(sub_account, name):
        errors["name"] = [f"Duplicate name '{name}'."]
    if (url, calendar) != (connection.url, connection.calendar):
        errors.update(_target_errors(url, calendar))
        before = _password_destinations(connection.url, connection.calendar)
        if "password" not in doc and not _password_destinations(url, calendar) <= before:
            errors["password"] = [
                "Enter the password again: the stored one is only sent to the server it was "
                "entered for."
            ]
    if errors:
        raise _invalid(errors)
    old = (connection.url, connection.username, connection.calendar)
    reconnect = "password" in doc or (url, username, calendar) != old
    writing_before = connection.write_back and connection.active
    was_active = connection.active
    if (url, calendar) != (connection.url, connection.calendar):
        connection.added_by_operator = False  # pointed elsewhere by a dashboard user
    connection.name, connection.url, connection.username = name, url, username
    connection.calendar = calendar
    connection.write_back = doc.get("writeBack", connection.write_back)
    connection.active = doc.get("active", connection.active)
    _ask_for_existing_bookings(
        connection, started=not writing_before, elsewhere=(url, username, calendar) != old
    )
    if "password" in doc:
        connection.encrypted_secret = encrypt_secret(doc["password"], settings().secret_keys[0])
    if reconnect:
        forget_sync_state(connection.id)
    try:
        db.session.flush()
    except IntegrityError:  # the name was taken meanwhile
        raise _invalid({"name": [f"Duplicate name '{connection.name}'."]}) from None
    if connection.active and (reconnect or not was_active or connection.write_existing_pending):
        request_sync(connection.id, utcnow())  # back, or pointed elsewhere: read it at once
    return connection


def set_connection_host(
    sub_account: SubAccount, connection_id: int, host_id: int
) -> CalendarConnection:
    """Make the connection ``host_id``'s calendar: its busy time becomes that host's at once
    (the rows it already read move with it), and, writing back, the host's future bookings are
    written into it by the worker. Events written there for the former host stay until their
    bookings next change. Flushes, never commits."""
    connection = find_connection(sub_account, connection_id)
    host = db.session.get(Host, host_id) if is_storable_id(host_id) else None
    if host is None or host.sub_account_id != sub_account.id:
        raise _invalid({"hostId": ["Unknown host."]})
    if host.id == connection.host_id:
        return connection
    connection.host_id = host.id
    db.session.execute(
        update(BlockedTime)
        .where(BlockedTime.calendar_connection_id == connection.id)
        .values(host_id=host.id)
        .execution_options(synchronize_session=False)
    )
    _ask_for_existing_bookings(connection, started=True, elsewhere=True)
    db.session.flush()
    return connection


def _ask_for_existing_bookings(
    connection: CalendarConnection, *, started: bool, elsewhere: bool
) -> None:
    """Have the worker write the sub account's future bookings into the connection
    (``app.jobs.calendars.write_existing_bookings``) when it begins to write back: write-back
    switched on, the connection made active again while it is on, or its calendar now another
    one."""
    if connection.write_back and connection.active and (started or elsewhere):
        connection.write_existing_pending = True
        connection.write_existing_after = None


def list_calendars(
    sub_account: SubAccount, connection_id: int, *, timeout: float | None = None
) -> list[CalendarChoice]:
    """Connect with the connection's stored credentials and list its account's calendars, so
    the user can choose one; raises ``ConnectionTestFailed`` saying why not. Stores nothing.
    Waits at most ``timeout`` (default ``CALDAV_TIMEOUT_SECONDS``) for each answer."""
    connection = find_connection(sub_account, connection_id)
    _require_permitted(connection)
    access, problem = connection_access(connection, caldav_timeout(timeout))
    if problem is not None:
        raise ConnectionTestFailed(problem.message)
    try:
        found = provider_for(connection.kind).calendars(access, MAX_LISTED_CALENDARS)
        return [CalendarChoice(c.name, c.remote_id, c.primary, c.writable) for c in found]
    except CalendarSyncError as err:
        raise ConnectionTestFailed(redacted(err.message, access)) from None
    except Exception as err:  # the library failing in a way not foreseen
        log.exception("calendar connection %s: unexpected error listing calendars", connection.id)
        raise ConnectionTestFailed(f"unexpected error: {type(err).__name__}") from None


def ask_for_sync(sub_account: SubAccount, connection_id: int, *, now: datetime) -> bool:
    """A person's "Sync now": the worker reads the connection as soon as this commits (no
    provider is called in a person's request), once its URL is checked again. Returns whether
    a sync was queued now (False: one is queued already). Flushes, never commits."""
    connection = find_connection(sub_account, connection_id)
    _require_permitted(connection)
    if not connection.active:
        raise InvalidRequest("The connection is switched off: switch it on to sync it.")
    return request_sync(connection.id, now)


# The worker's task that runs a person's "Test connection" (``worker.tasks.calendars``).
TEST_TASK = "calendars.test"


@dataclass(frozen=True)
class ConnectionTest:
    """A person's latest "Test connection": ``pending`` until the worker has run it, then the
    calendars the account lists, or the ``error`` that kept it from listing them."""

    pending: bool
    calendars: list[CalendarChoice] | None = None
    error: str | None = None


def ask_for_test(sub_account: SubAccount, connection_id: int, *, now: datetime) -> None:
    """A person's "Test connection": the worker connects with the stored credentials and lists
    the account's calendars (no calendar server is called in a person's request); the page
    shows what it found (``connection_test``). Its URL is checked again first. Flushes."""
    connection = find_connection(sub_account, connection_id)
    _require_permitted(connection)
    connection.test_requested_at, connection.test_finished_at = now, None
    connection.test_result = None
    db.session.flush()
    enqueue_after_commit(TEST_TASK, connection.id)


def latest_test(connection: CalendarConnection) -> ConnectionTest | None:
    """The connection's latest test as the page shows it (None: never tested)."""
    if connection.test_requested_at is None:
        return None
    if connection.test_finished_at is None or connection.test_result is None:
        return ConnectionTest(pending=True)
    return connection_test_from(json.loads(connection.test_result))


@dataclass(frozen=True)
class PendingTest:
    """A test asked for, as the worker runs it: when it was asked, and how to reach the
    account (or why not)."""

    connection_id: int
    requested: datetime
    kind: str
    access: Any = dataclasses.field(repr=False)
    problem: CalendarSyncError | None


def pending_test(connection_id: int) -> PendingTest | None:
    """The connection's test waiting to be run (None: none was asked for), read in a session of
    its own: the caller waits on the calendar's server next."""
    with Session(db.engine) as session:
        connection = session.get(CalendarConnection, connection_id)
        if connection is None or connection.test_requested_at is None:
            return None
        access, problem = connection_access(connection, caldav_timeout())
        return PendingTest(
            connection_id, connection.test_requested_at, connection.kind, access, problem
        )


def list_for_test(asked: PendingTest) -> dict[str, Any]:
    """Ask the account for its calendars, as "Test connection" shows them: the calendars, or
    the ``error`` (its credentials redacted) that kept it from listing them."""
    try:
        if asked.problem is not None:
            raise asked.problem
        listed = provider_for(asked.kind).calendars(asked.access, MAX_LISTED_CALENDARS)
        return {
            "calendars": [
                asdict(CalendarChoice(c.name, c.remote_id, c.primary, c.writable)) for c in listed
            ]
        }
    except CalendarSyncError as err:
        return {"error": redacted(err.message, asked.access)}
    except Exception as err:  # the library failing in a way not foreseen
        log.exception(
            "calendar connection %s: unexpected error listing calendars", asked.connection_id
        )
        return {"error": f"unexpected error: {type(err).__name__}"}


def record_test(asked: PendingTest, found: dict[str, Any], now: datetime) -> ConnectionTest:
    """Keep what the test found for the page, unless a newer test was asked for meanwhile.
    Flushes."""
    db.session.execute(
        update(CalendarConnection)
        .where(
            CalendarConnection.id == asked.connection_id,
            CalendarConnection.test_requested_at == asked.requested,
        )
        .values(test_result=json.dumps(found), test_finished_at=now)
        .execution_options(synchronize_session=False)
    )
    return connection_test_from(found)


def connection_test_from(found: dict[str, Any]) -> ConnectionTest:
    if found.get("error") is not None:
        return ConnectionTest(pending=False, error=found["error"])
    return ConnectionTest(
        pending=False, calendars=[CalendarChoice(**choice) for choice in found["calendars"]]
    )


def freshness_of(
    sub_account: SubAccount, connection_id: int, *, now: datetime
) -> ConnectionFreshness:
    """How the connection's changes arrive and whether a sync is on its way (its page)."""
    return connection_freshness(
        find_connection(sub_account, connection_id), now, push_available=push_enabled()
    )


def disconnect_calendar(sub_account: SubAccount, connection_id: int) -> None:
    """``remove_connection`` within the sub account: the connection and its busy time go."""
    remove_connection(find_connection(sub_account, connection_id).id)


def _invalid(errors: dict[str, list[str]]) -> InvalidRequest:
    return InvalidRequest(describe_errors(errors), errors=errors)


def _name_taken(sub_account: SubAccount, name: str) -> bool:
    return (
        db.session.scalar(
            select(CalendarConnection.id).where(
                CalendarConnection.sub_account_id == sub_account.id,
                CalendarConnection.name == name,
            )
        )
        is not None
    )


def _calendar_url(url: str, calendar: str | None) -> str | None:
    """Where a calendar reference leads, if it is a URL (absolute, or a path on the server);
    as the CalDAV provider resolves it. A display name leads nowhere of its own."""
    if calendar and (calendar.startswith("/") or "://" in calendar):
        return urljoin(url, calendar)
    return None


def _target_errors(url: str, calendar: str | None) -> dict[str, list[str]]:
    """Why ``url`` or the calendar's URL may not be connected to (resolved now), by field."""
    errors = {}
    allow_private = caldav_allow_private()
    for field, target in (("url", url), ("calendar", _calendar_url(url, calendar))):
        if target is None:
            continue
        try:
            resolve_target(
                target,
                require_https=False,
                allow_private=allow_private,
                setting=CALDAV_ALLOW_PRIVATE,
            )
        except UnsafeUrl as err:
            errors[field] = [f"{err.message[:1].upper()}{err.message[1:]}."]
    return errors


def _require_permitted(connection: CalendarConnection) -> None:
    if connection.kind in OAUTH_KINDS:
        return  # the provider's endpoints are configuration, not a typed address
    errors = _target_errors(connection.url, connection.calendar)
    if errors:
        raise _invalid(errors)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, parts.port or {"http": 80, "https": 443}.get(scheme)


def _password_destinations(url: str, calendar: str | None) -> set[tuple]:
    """The servers a sync sends the password to: the URL's, and a calendar URL's."""
    calendar_url = _calendar_url(url, calendar)
    return {_origin(url)} | ({_origin(calendar_url)} if calendar_url else set())
