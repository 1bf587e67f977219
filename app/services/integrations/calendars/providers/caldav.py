"""CalDAV calendars (RFC 4791), through the ``caldav`` library: read for the inbound sync,
written for write-back. No database here.

A read finds the calendar (where the last read found it, else by display name among the
principal's calendars, else the only one) and asks for its change markers in one PROPFIND
(``DAV:sync-token``, RFC 6578, and CalendarServer's ``getctag``; for servers with neither, a
digest of its members' ETags from a depth-1 PROPFIND). Then:

- markers equal to the cursor's: unchanged, nothing more is asked;
- an incremental read on a server with sync tokens: a ``sync-collection`` REPORT lists what
  changed and what was removed since the cursor's token, and one ``calendar-multiget`` fetches
  the changed resources; a token the server no longer knows means a full read;
- an incremental read on a server without (its ctag changed, or it has none): the members'
  ETags (one depth-1 PROPFIND, or the one the digest came from) are compared with the stored
  ones, and only new or changed resources are fetched;
- a full read: one ``calendar-query`` REPORT for the events in the window (on a server without
  sync tokens, with every member's ETag beside it, so the next read can compare); if the
  server fails its own time-range query (HTTP 500), one without the range, filtered here.

``put_event`` and ``delete_event`` write one event at ``<calendar>/<UID>.ics``: a PUT there
replaces what is there, and a DELETE of what is gone is no error, so both are safe to repeat.
Failures are raised as ``CalendarSyncError`` subclasses whose messages never include the
password.

Bounded in time, as anything read from outside must be. Every request has the timeout for
connecting and for each socket read, which alone bounds nothing: a server sending a byte every
few seconds never trips it. So every operation (a read, a write, listing the calendars) must
also finish within ``deadline_seconds`` in all, raised to ``full_read_deadline_seconds`` for a
read that turns out to be full (the first, one whose window moved on, a forgotten token): its one
large answer, thousands of events from a slow server, takes a while to compute and to send
(``access.py``: 6 and 9 times ``CALDAV_TIMEOUT_SECONDS``, 60 and 90 s by default, under the
worker's 120 s task limit). The large answers (a full read's ``calendar-query``, every member's
ETag) wait for each socket read as long as the deadline leaves, not one timeout: a server may
think for longer than that before its first byte. Past the deadline: ``ServerTimeout``
(retryable), naming the deadline.

How the deadline is kept: the operation runs in a thread of its own, and the caller waits for it
until the deadline and no longer. Only that bounds the caller's wall time whatever the library
is blocked in (a socket read, a TLS handshake, a name lookup, parsing, caldav's rate-limit
sleeps): closing the ``DAVClient`` from another thread does not interrupt a read in progress in
niquests/urllib3-future (it closes idle connections only), and a read's timeout restarts with
every byte. So that the abandoned thread ends too, instead of reading a drip for minutes, every
connection the operation opens is shown to its deadline as it is made (a duplicate of its TCP
socket, which a TLS wrapper does not detach; the operation's resolver, ``_CheckedResolver``,
makes each socket, through urllib3-future's public resolver interface), and shut down at the
deadline (the one deadline of outbound exchanges, ``outbound.transport.ExchangeDeadline``, as
webhooks and feeds keep it): the read in
progress ends at once, the library raises, nobody takes what it raises, and no connection is
opened after that. The thread only talks to the server and returns plain values: it has no
database session and no app context, so nothing it could write (a stray use of either raises).
What a read needs from the database (the stored ETags, loaded only when asked for) the waiting
thread loads for it, while it waits and never after. An abandoned write may still have reached
the server; the write-back tries it again, which a PUT and a DELETE allow.

Where requests may go: every connection the client makes (the URL's, a redirect's, one made
again later) resolves its name through the access's ``AddressGuard`` (``_CheckedResolver``) and
connects to an address the guard checked, never to a second lookup's answer. A redirect to a
private address, or a name whose DNS answer has changed to one since it was saved, is refused
before anything (a PROPFIND, the stored Basic credentials) is sent there: ``AddressRefused``,
whose message does not say which address or port it was, so errors cannot map what answers
inside the operator's network. An operator's connection (or ``CALDAV_ALLOW_PRIVATE``) allows
private addresses; the name is still resolved once, by the guard.

Credentials. A client that sends none first is answered 401 with the scheme to use, and asks
again with them: a round trip more for every operation, and a slow one where the server delays
its refusals against password guessing (Radicale: a second by default), which a live check's
1.5 s deadline cannot afford. So a server that asked for Basic credentials before, and took
them, is sent them with the first request of every later operation (``_ASKS_FOR_BASIC``, per
process, by the URL's origin): no more than it would be sent one round trip later. One that
asks for another scheme (Digest, whose answer needs the server's nonce) is never sent Basic
unasked, and a server that refuses the credentials sent unasked is asked afresh next time (its
scheme may have changed).

Answers that are not CalDAV are named for what they are. A web page (``text/html``) answering a
PROPFIND or REPORT means the URL is a web site's, not its CalDAV address, or a sign-in or proxy
page is in the way: ``NotCalDAV``, not retryable (someone has to change the URL or the way to the
server). An item larger than lxml parses (one text node over 10 MB: an event with a large file
attached inline) is ``ItemTooLarge``, not retryable either: the server sends it again every time
until someone makes it smaller. ``caldav`` could parse it (``DAVClient(huge_tree=True)``), but
that lifts libxml2's limits on the whole of every answer from a server nobody here controls, so
the limit stays, as the feeds' 20 MB does.
"""

from __future__ import annotations

import functools
import hashlib
import queue
import re
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote, unquote, urljoin, urlsplit
from zoneinfo import ZoneInfo

import niquests  # caldav's HTTP client (tests/conventions/test_library_internals.py checks it is)
from caldav.elements import dav
from caldav.elements.base import BaseElement
from caldav.lib import error as caldav_error
from lxml import etree
from urllib3_future.contrib.resolver.system import SystemResolver

from app.scheduling.intervals import Interval
from app.services.integrations.calendars.errors import (
    AddressRefused,
    AuthenticationFailed,
    CalendarNotFound,
    CalendarSyncError,
    ItemTooLarge,
    NotCalDAV,
    ServerError,
    ServerTimeout,
    ServerUnreachable,
)
from app.services.integrations.calendars.providers.base import (
    CalendarChanges,
    Cursor,
    ItemRead,
    RemoteCalendar,
    StoredEvent,
    ical_item,
)
from app.services.integrations.outbound.addresses import AddressGuard, UnsafeUrl
from app.services.integrations.outbound.transport import ExchangeDeadline

if TYPE_CHECKING:
    from caldav.davclient import DAVClient

# How many resources one calendar-multiget asks for.
MULTIGET_BATCH = 200


class GetCtag(BaseElement):
    """CalendarServer's collection tag: changes whenever anything in the calendar does."""

    tag: ClassVar[str] = "{http://calendarserver.org/ns/}getctag"


@dataclass(frozen=True)
class CalendarAccess:
    url: str  # the server or principal URL
    username: str | None
    password: str | None = field(repr=False)  # never in a log line or traceback
    calendar: str | None  # the calendar's URL or display name; None: the only calendar
    calendar_url: str | None  # where an earlier sync found it, if it did
    timeout: float  # connect, and each socket read
    deadline_seconds: float  # a whole operation: a write, a listing, a read
    full_read_deadline_seconds: float  # a read that reads the calendar in full
    guard: AddressGuard  # where its requests may go: every connection, every redirect


@dataclass(frozen=True)
class _Markers:
    """What the server says about the calendar's version. Equal markers, same contents."""

    sync_token: str | None
    ctag: str | None  # the server's ctag, else "etags:<sha256 of its members' ETags>"
    etags: Mapping[str, str | None] | None  # by key, when the digest was computed from them

    def same_as(self, sync_token: str | None, ctag: str | None) -> bool:
        """The calendar is unchanged since markers ``sync_token``/``ctag`` (None: unknown)."""
        if self.sync_token is not None:
            return self.sync_token == sync_token
        return self.ctag is not None and self.ctag == ctag


# The deadline of one operation (see the module docstring): kept in the operation's own thread,
# where its connections are made.
_DEADLINE: ContextVar[_Deadline | None] = ContextVar("caldav_deadline", default=None)


class _Deadline(ExchangeDeadline):
    """One operation's deadline: the outbound exchange's (``ExchangeDeadline``), waited on by
    the caller rather than timed, named for the error, with the queue of what the operation's
    thread asks the caller's to do (``_in_callers_thread``)."""

    def __init__(self, seconds: float, operation: str) -> None:
        super().__init__(seconds)
        self.operation = operation
        self.calls: queue.SimpleQueue[Any] | None = None  # to the caller's thread

    def allow_for(self, seconds: float, operation: str) -> None:
        """Let the operation take ``seconds`` in all (a read turned full), if that is longer."""
        if self.allow(seconds):
            self.operation = operation


def _within_deadline(operation: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A provider method, run in a thread of its own that its caller waits for until the access's
    deadline and no longer (then ``ServerTimeout``). The method's signature is unchanged."""

    def bounded(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def within_deadline(self: Any, access: CalendarAccess, *args: Any, **kwargs: Any) -> Any:
            deadline = _Deadline(access.deadline_seconds, operation)
            return _run(lambda: method(self, access, *args, **kwargs), deadline, access)

        return within_deadline

    return bounded


class _Call:
    """What the operation's thread asks the caller's to do (``_in_callers_thread``)."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.work = work
        self.done = threading.Event()
        self.outcome: dict[str, Any] = {}

    def run(self) -> None:
        try:
            self.outcome["value"] = self.work()
        except BaseException as err:  # handed back to the operation's thread
            self.outcome["error"] = err
        finally:
            self.done.set()


_FINISHED = object()


def _run(work: Callable[[], Any], deadline: _Deadline, access: CalendarAccess) -> Any:
    """``work()`` in a thread of its own, waited for until the deadline; meanwhile the waiting
    (the caller's) thread does what the operation's thread asks of it, and nothing after."""
    outcome: dict[str, Any] = {}
    messages: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def operation() -> None:
        _DEADLINE.set(deadline)  # this thread's own context
        deadline.calls = messages
        try:
            outcome["value"] = work()
        except BaseException as err:  # handed to the caller, who raises it
            outcome["error"] = err
        finally:
            deadline.end()
            messages.put(_FINISHED)

    threading.Thread(target=operation, name=f"caldav {deadline.operation}", daemon=True).start()
    finished = False
    try:
        while not finished:
            try:
                # A read that turns full moves the deadline on while it is waited for.
                message = messages.get(timeout=max(deadline.remaining(), 0.0))
            except queue.Empty:
                if deadline.remaining() <= 0:
                    raise ServerTimeout(
                        f"{_server(access.url)} did not finish answering within"
                        f" {deadline.seconds:g} s (the deadline of a {deadline.operation})"
                    ) from None
                continue
            finished = message is _FINISHED
            if not finished:
                message.run()
    finally:
        if not finished:
            deadline.end()  # the abandoned thread's read ends; what it returns is dropped
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _in_callers_thread(work: Callable[[], Any]) -> Any:
    """``work()`` done by the thread waiting for this operation: what needs the app's context
    or its database (the stored ETags), which the operation's thread has neither of, and never
    once the caller has stopped waiting."""
    deadline = _DEADLINE.get()
    if deadline is None or deadline.calls is None:
        return work()
    call = _Call(work)
    deadline.calls.put(call)
    if not call.done.wait(max(deadline.remaining(), 0.0) + 1.0):
        raise ConnectionAbortedError("the operation's deadline has passed")
    if "error" in call.outcome:
        raise call.outcome["error"]
    return call.outcome["value"]


def _allow_full_read(access: CalendarAccess) -> None:
    deadline = _DEADLINE.get()
    if deadline is not None:
        deadline.allow_for(access.full_read_deadline_seconds, "full read")


@contextmanager
def _patient(client: DAVClient) -> Iterator[None]:
    """For one large answer: each socket read may wait as long as the deadline leaves (a slow
    server may think about thousands of events for longer than one timeout before it sends)."""
    deadline = _DEADLINE.get()
    timeout = client.timeout
    if deadline is not None and timeout:
        # (connect, read). caldav annotates its timeout as int | None; it hands it to niquests,
        # which takes a float or a (connect, read) pair too.
        client.timeout = (timeout, max(timeout, deadline.remaining()))  # type: ignore[assignment]
    try:
        yield
    finally:
        client.timeout = timeout


_WEB_PAGE_TYPES = ("text/html", "application/xhtml+xml")


def _refuse_web_pages(server: str) -> Callable[..., None]:
    """A response hook: a web page answering a PROPFIND or REPORT (where CalDAV answers XML)
    is ``NotCalDAV``, not whatever the library makes of it."""

    def check(response: Any, **kwargs: Any) -> None:
        method = getattr(response.request, "method", None)
        kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if method not in ("PROPFIND", "REPORT") or not 200 <= response.status_code < 300:
            return
        if kind in _WEB_PAGE_TYPES and b"multistatus" not in response.content[:2048].lower():
            raise NotCalDAV(
                f"{server} answered a web page ({kind}), not CalDAV: check the URL, or a"
                " proxy or sign-in page is in the way"
            )

    return check


class CalDAVProvider:
    """CalDAV servers: Radicale, Xandikos, Nextcloud, Fastmail, iCloud and others."""

    kind = "caldav"
    meetings: frozenset[str] = frozenset()  # CalDAV makes no online meetings

    @_within_deadline("calendar listing")
    def calendars(self, access: CalendarAccess, limit: int) -> list[RemoteCalendar]:
        """The account's calendars (display name and URL), at most ``limit``."""
        with _translated_errors(access), _client(access) as client:
            found = client.principal().get_calendars()[:limit]
            return [RemoteCalendar(str(c.url), _clean(c.get_display_name())) for c in found]

    @_within_deadline("read")
    def read(
        self, access: CalendarAccess, cursor: Cursor, window: Interval, tz: ZoneInfo
    ) -> CalendarChanges:
        """The calendar's changes since ``cursor``, or all of it (see the module docstring)."""
        # A calendar whose markers were forgotten (its configuration changed, or it was not
        # found) is looked up afresh: another one may be meant now.
        remembered = cursor.remote_id if cursor.sync_token or cursor.ctag else None
        if not cursor.incremental:
            _allow_full_read(access)
        with _translated_errors(access), _client(access) as client:
            calendar, name, markers = _open(client, access, remembered)
            remote_id = str(calendar.url)
            known = cursor.incremental and cursor.remote_id == remote_id
            if known and markers.same_as(cursor.sync_token, cursor.ctag):
                return _changes(remote_id, name, markers, complete=False)
            if known and markers.sync_token and cursor.sync_token:
                changes = _changes_since_token(calendar, cursor.sync_token, window, tz)
                if changes is not None:
                    changed, removed, token = changes
                    return CalendarChanges(
                        remote_id, name, False, changed, removed, token, markers.ctag
                    )
            elif known and not markers.sync_token:
                etags = markers.etags if markers.etags is not None else _member_etags(calendar)
                changed, removed = _changes_by_etags(
                    calendar, etags, _in_callers_thread(cursor.known_etags), window, tz
                )
                return _changes(
                    remote_id, name, markers, complete=False, changed=changed, removed=removed
                )
            _allow_full_read(access)
            return _changes(
                remote_id,
                name,
                markers,
                complete=True,
                changed=_read_window(calendar, _etags_to_keep(calendar, markers), window, tz),
            )

    @_within_deadline("live check")
    def items_in(
        self, access: CalendarAccess, remote_id: str | None, window: Interval, tz: ZoneInfo
    ) -> tuple[str, list[ItemRead]]:
        """One ``calendar-query`` REPORT with a time range (RFC 4791, 7.8.1) on the calendar
        where the last read found it (else looked up), a day wider on both sides as a full
        read asks (servers place all-day and floating events in UTC); only the events whose
        busy time overlaps ``window`` in the sub account's timezone are kept."""
        with _translated_errors(access), _client(access) as client:
            calendar = client.calendar(url=remote_id) if remote_id else _find(client, access)
            items = [
                ical_item(_key(obj.url), None, _text(obj.data), window, tz)
                for obj in _events_around(calendar, window)
            ]
            return str(calendar.url), items

    @_within_deadline("write")
    def put_event(
        self,
        access: CalendarAccess,
        uid: str,
        data: bytes,
        event_id: str | None = None,
        *,
        meeting: str | None = None,
    ) -> StoredEvent:
        """Store the iCalendar object ``data`` (one event, UID ``uid``) in the calendar,
        replacing any earlier version (found by its UID: ``event_id`` is not needed). CalDAV
        makes no meetings: ``meeting`` is never asked of it."""
        with _translated_errors(access), _client(access) as client:
            calendar = _writable(client, access)
            try:
                _event_at(client, calendar, uid, data).save(increase_seqno=False)
            except caldav_error.NotFoundError:
                if not access.calendar_url:
                    raise
                calendar = _find(client, access)  # the remembered URL is gone: look it up
                _event_at(client, calendar, uid, data).save(increase_seqno=False)
        return StoredEvent()

    @_within_deadline("write")
    def delete_event(self, access: CalendarAccess, uid: str, event_id: str | None = None) -> None:
        """Remove the event with UID ``uid`` that ``put_event`` stored (nothing there: done)."""
        with _translated_errors(access), _client(access) as client:
            _event_at(client, _writable(client, access), uid).delete()


def _changes(
    remote_id: str,
    name: str | None,
    markers: _Markers,
    *,
    complete: bool,
    changed: list[ItemRead] | None = None,
    removed: list[str] | None = None,
) -> CalendarChanges:
    return CalendarChanges(
        remote_id, name, complete, changed or [], removed or [], markers.sync_token, markers.ctag
    )


def _etags_to_keep(calendar: Any, markers: _Markers) -> Mapping[str, str | None]:
    """The members' ETags a full read keeps, so the next read can compare them: on a server
    without sync tokens only (one with them lists its changes itself)."""
    if markers.sync_token:
        return {}
    return markers.etags if markers.etags is not None else _member_etags(calendar)


def _events_around(calendar: Any, window: Interval) -> list[Any]:
    """The events (with their data) one time-range ``calendar-query`` REPORT finds in the
    window, a day wider on both sides: the server places all-day and floating events in UTC,
    the service in the sub account's timezone.

    A server that fails that query itself (HTTP 500) is asked once more for its events without
    a time range, and the window is kept here (``ical_item`` keeps only busy time inside it):
    Xandikos 0.4 cannot expand an RDATE PERIOD, so one such event makes every time-range query
    that meets it fail, and the calendar would never be read. One larger answer, not none."""
    try:
        found = calendar.search(
            event=True,
            start=window.start - timedelta(days=1),
            end=window.end + timedelta(days=1),
            expand=False,
            post_filter=False,
        )
    except caldav_error.ReportError as err:
        if err.status != 500:
            raise
        found = calendar.search(event=True, expand=False, post_filter=False)
    return [obj for obj in found if obj.data]


def _read_window(
    calendar: Any, etags: Mapping[str, str | None], window: Interval, tz: ZoneInfo
) -> list[ItemRead]:
    """Every event in the window (a day wider on both sides: the server places all-day and
    floating events in UTC, the sync in the sub account's timezone); on a server that finds
    changes by ETags, every other member too (no periods), so the next read knows them."""
    with _patient(calendar.client):
        found = _events_around(calendar, window)
    items = {
        key: ical_item(key, etags.get(key), _text(obj.data), window, tz)
        for obj in found
        for key in [_key(obj.url)]
    }
    for key, etag in etags.items():
        items.setdefault(key, ItemRead(key, etag, None, []))
    return list(items.values())


def _changes_since_token(
    calendar: Any, token: str, window: Interval, tz: ZoneInfo
) -> tuple[list[ItemRead], list[str], str | None] | None:
    """(changed, removed, new token) from a sync-collection REPORT; None when the server no
    longer knows the token (RFC 6578 3.2: read the calendar in full)."""
    try:
        report = calendar.get_objects_by_sync_token(
            token, load_objects=False, disable_fallback=True
        )
    except (caldav_error.ReportError, caldav_error.DAVError) as err:
        if _expired_token(err):
            return None
        raise
    removed = {_key(url) for url in report.deleted_urls}
    wanted = {_key(obj.url) for obj in report.objects} - removed
    fetched = _multiget(calendar, sorted(wanted), window, tz)
    gone = wanted - {item.key for item in fetched}  # removed between the two requests
    return fetched, sorted(removed | gone), _clean(report.sync_token)


def _changes_by_etags(
    calendar: Any,
    etags: Mapping[str, str | None],
    known: Mapping[str, str | None],
    window: Interval,
    tz: ZoneInfo,
) -> tuple[list[ItemRead], list[str]]:
    """(changed, removed): members whose ETag differs from the stored one, and stored ones that
    are no longer members."""
    wanted = sorted(key for key, etag in etags.items() if key not in known or known[key] != etag)
    fetched = _multiget(calendar, wanted, window, tz)
    removed = sorted(known.keys() - etags.keys())
    return fetched, removed


def _multiget(calendar: Any, keys: list[str], window: Interval, tz: ZoneInfo) -> list[ItemRead]:
    """The resources at ``keys`` (paths), fetched ``MULTIGET_BATCH`` at a time."""
    items: list[ItemRead] = []
    for batch in _batches(keys, MULTIGET_BATCH):
        urls = [calendar.url.join(quote(key, safe="/:@")) for key in batch]
        for obj in calendar.multiget(urls):
            if obj.data:
                key = _key(obj.url)
                etag = _clean((obj.props or {}).get(dav.GetEtag.tag))
                items.append(ical_item(key, etag, _text(obj.data), window, tz))
    return items


def _batches(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _expired_token(err: Exception) -> bool:
    """A sync-collection refused for its token (RFC 6578: 403 with DAV:valid-sync-token;
    Xandikos answers 412), not for the account's rights."""
    preconditions = getattr(err, "preconditions", None) or {}
    if dav.ValidSyncToken.tag in preconditions:
        return True
    return getattr(err, "status", None) in (409, 412) or isinstance(err, caldav_error.ReportError)


def _key(url: Any) -> str:
    """A resource's key: its path, unquoted (servers differ in what they percent-encode)."""
    return unquote(urlsplit(str(url)).path)


def _writable(client: DAVClient, access: CalendarAccess) -> Any:
    """The calendar to write to: where a sync found it, else looked up (no PROPFIND for
    change markers, which a write does not need)."""
    if access.calendar_url:
        return client.calendar(url=access.calendar_url)
    return _find(client, access)


def _event_at(client: DAVClient, calendar: Any, uid: str, data: bytes | None = None) -> Any:
    # caldav's lazy exports (``caldav.Event``) are typed as object; its module is not.
    from caldav.calendarobjectresource import Event

    url = calendar.url.join(quote(uid, safe="") + ".ics")
    return Event(client=client, url=url, data=data, parent=calendar, id=uid)


# The origins (scheme, host, port) whose server asked this process for Basic credentials and
# took them: later operations there send them with their first request (the module docstring).
_ASKS_FOR_BASIC: set[str] = set()


@contextmanager
def _client(access: CalendarAccess) -> Iterator[DAVClient]:
    # caldav's lazy exports (``caldav.DAVClient``) are typed as object; its module is not.
    from caldav.davclient import DAVClient

    origin = _origin(access.url)
    unasked = (
        origin in _ASKS_FOR_BASIC and access.username is not None and access.password is not None
    )
    client = DAVClient(
        url=access.url,
        username=access.username,
        password=access.password,
        # Basic from the first request, to a server that asked for it before.
        auth_type="basic" if unasked else None,
        # caldav annotates it as int | None; niquests, which gets it, takes a float.
        timeout=access.timeout,  # type: ignore[arg-type]
        enable_rfc6764=False,  # the URL is given; no DNS discovery
    )
    # Every connection (the URL's, a redirect's, one made again later) resolves its name
    # through the guard, connects to the addresses checked, and to no other, and is shown to
    # the operation's deadline.
    client.session.close()
    client.session = niquests.Session(resolver=_CheckedResolver(access.guard))
    client.session.hooks["response"].append(_refuse_web_pages(_server(access.url)))
    refusals: list[tuple[str, int]] = []
    client.session.hooks["response"].append(_note_refusals(refusals))
    try:
        yield client
    finally:
        _remember_scheme(origin, unasked, client, refusals)
        client.close()


def _note_refusals(refusals: list[tuple[str, int]]) -> Callable[..., None]:
    """A response hook: each 401 or 403, as (its origin, its status)."""

    def note(response: Any, **kwargs: Any) -> None:
        if response.status_code in (401, 403):
            refusals.append((_origin(response.url), response.status_code))

    return note


def _remember_scheme(
    origin: str, unasked: bool, client: DAVClient, refusals: list[tuple[str, int]]
) -> None:
    """After an operation: the server at ``origin`` asked for Basic (it challenged, and caldav
    answered with Basic) and took it (no refusal after): remember it; credentials sent unasked
    and refused there: forget it (its scheme may have changed; the next operation asks)."""
    here = [status for where, status in refusals if where == origin]
    if unasked:
        if 401 in here:
            _ASKS_FOR_BASIC.discard(origin)
    elif here == [401] and isinstance(client.auth, niquests.auth.HTTPBasicAuth):
        _ASKS_FOR_BASIC.add(origin)


def _origin(url: Any) -> str:
    """``scheme://host:port`` of ``url`` (the port spelt out): where credentials are sent."""
    parts = urlsplit(str(url))
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    return f"{scheme}://{(parts.hostname or '').lower()}:{port}"


class _AddressRefused(OSError):
    """A connection the guard refused: its name resolves (now) to an address it may not reach."""


class _CheckedResolver(SystemResolver):
    """``niquests``' resolver for one operation: a name is resolved once, by the guard, and
    the connection is made to one of the addresses it checked. So a redirect to a private
    address, or a name whose DNS answer changed to one since the URL was saved, is refused
    before anything is sent there (``_AddressRefused``, told apart in ``_translated_errors``).
    Every connection's socket is made here (urllib3-future's connections call their
    resolver's ``create_connection``), so here each is shown to the operation's deadline, as
    it is made and before its TLS handshake. urllib3-future's public resolver interface
    (``BaseResolver``: ``getaddrinfo``, ``create_connection``, ``recycle``), given to
    niquests' public ``Session(resolver=)``."""

    def __init__(self, guard: AddressGuard) -> None:
        super().__init__()
        self._guard = guard

    def recycle(self) -> _CheckedResolver:
        return self

    def create_connection(self, address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        sock = super().create_connection(address, *args, **kwargs)
        deadline = _DEADLINE.get()
        if deadline is not None:
            try:
                deadline.watch(sock)
            except BaseException:
                sock.close()
                raise
        return sock

    def getaddrinfo(
        self,
        host: bytes | str | None,
        port: str | int | None,
        family: socket.AddressFamily,
        type: socket.SocketKind,
        proto: int = 0,
        flags: int = 0,
        *,
        quic_upgrade_via_dns_rr: bool = False,
    ) -> list[Any]:
        name = host.decode("ascii") if isinstance(host, bytes) else (host or "localhost")
        number = int(port or 0)
        try:
            addresses = self._guard.addresses(name.strip("[]"), number)
        except UnsafeUrl as err:
            raise _AddressRefused(err.message) from None
        records = []
        for address in addresses:  # as numbers: nothing is resolved a second time
            with suppress(socket.gaierror):  # an address of a family not asked for
                records += socket.getaddrinfo(
                    address, number, family, type, proto, flags | socket.AI_NUMERICHOST
                )
        if not records:
            raise socket.gaierror(socket.EAI_ADDRFAMILY, f"{name} has no usable address")
        return records


def _open(
    client: DAVClient, access: CalendarAccess, remembered: str | None
) -> tuple[Any, str | None, _Markers]:
    """The calendar, its name and markers; a remembered URL that is gone is looked up again."""
    if remembered:
        calendar = client.calendar(url=remembered)
        try:
            return calendar, *_markers(calendar, access)
        except (CalendarNotFound, caldav_error.NotFoundError):
            pass
    calendar = _find(client, access)
    return calendar, *_markers(calendar, access)


def _find(client: DAVClient, access: CalendarAccess) -> Any:
    ref = access.calendar
    if ref and _is_url(ref):
        return client.calendar(url=urljoin(access.url, ref))
    calendars = client.principal().get_calendars()
    names = [c.get_display_name() for c in calendars]
    if ref:
        matches = [c for c, name in zip(calendars, names, strict=True) if name == ref]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise CalendarNotFound(f"{len(matches)} calendars are named {ref!r}; give its URL")
        raise CalendarNotFound(f"no calendar named {ref!r} (found: {_listing(names)})")
    if len(calendars) == 1:
        return calendars[0]
    at_url = [c for c in calendars if _same_url(str(c.url), access.url)]
    if at_url:
        return at_url[0]
    if not calendars:
        raise CalendarNotFound("the account has no calendars")
    raise CalendarNotFound(
        f"the account has {len(calendars)} calendars ({_listing(names)}); name one in 'calendar'"
    )


# The change markers asked for, most standard first (module attributes so a test can ask for
# properties no server has, to exercise the ETag fallback against a real server).
SYNC_TOKEN: type[BaseElement] = dav.SyncToken
CTAG: type[BaseElement] = GetCtag


def _markers(calendar: Any, access: CalendarAccess) -> tuple[str | None, _Markers]:
    try:
        props = calendar.get_properties([SYNC_TOKEN(), CTAG(), dav.DisplayName()])
    except caldav_error.NotFoundError:
        raise CalendarNotFound(f"no calendar at {calendar.url} (HTTP 404)") from None
    if not props:
        raise CalendarNotFound(f"no calendar at {calendar.url}")
    name = _clean(props.get(dav.DisplayName.tag))
    if access.calendar and not _is_url(access.calendar) and name != access.calendar:
        # Renamed since the URL was remembered: look the name up again.
        raise CalendarNotFound(f"the calendar at {calendar.url} is no longer {access.calendar!r}")
    sync_token = _clean(props.get(SYNC_TOKEN.tag))
    ctag = _clean(props.get(CTAG.tag))
    etags = None
    if sync_token is None and ctag is None:
        etags = _member_etags(calendar)
        lines = sorted(f"{key} {etag}" for key, etag in etags.items())
        ctag = "etags:" + hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return name, _Markers(sync_token, ctag, etags)


def _member_etags(calendar: Any) -> dict[str, str | None]:
    """Every member resource's ETag, by key (one depth-1 PROPFIND)."""
    with _patient(calendar.client):
        response = calendar.get_properties([dav.GetEtag()], depth=1, parse_response_xml=False)
    found = response.expand_simple_props([dav.GetEtag()])
    own = _key(calendar.url)
    return {
        key: _clean(props.get(dav.GetEtag.tag))
        for href, props in found.items()
        for key in [_key(calendar.url.join(href))]
        if key.rstrip("/") != own.rstrip("/")
    }


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _text(data: Any) -> str:
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)


def _is_url(ref: str) -> bool:
    return ref.startswith("/") or "://" in ref


def _same_url(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.hostname, pa.port, pa.path.rstrip("/")) == (
        pb.hostname,
        pb.port,
        pb.path.rstrip("/"),
    )


def _listing(names: list[str | None]) -> str:
    shown = ", ".join(repr(n) if n else "(unnamed)" for n in names[:10])
    return shown + (", …" if len(names) > 10 else "")


@contextmanager
def _translated_errors(access: CalendarAccess) -> Iterator[None]:
    """The library's and the HTTP client's exceptions as ``CalendarSyncError``s, with short
    messages that name the server and never the password."""
    server = _server(access.url)
    try:
        yield
    except CalendarSyncError:
        raise
    except niquests.exceptions.RequestException as err:
        if _refused_address(err):
            raise _refusal(server, access) from None
        if isinstance(err, niquests.exceptions.Timeout):
            raise ServerTimeout(f"{server} did not answer within {access.timeout:g} s") from None
        if isinstance(err, niquests.exceptions.ConnectionError):
            raise ServerUnreachable(f"cannot connect to {server}: {_os_reason(err)}") from None
        raise ServerUnreachable(f"{server}: {type(err).__name__}") from None
    except caldav_error.AuthorizationError as err:
        if err.status == 403 or "forbidden" in str(err.reason).lower():
            raise AuthenticationFailed(
                f"{server} refused access (HTTP 403): check the user's rights"
            ) from None
        raise AuthenticationFailed(
            f"{server} rejected the username or password (HTTP 401)"
        ) from None
    except caldav_error.NotFoundError:
        raise CalendarNotFound(f"{server} has nothing at the URL asked for (HTTP 404)") from None
    except caldav_error.RateLimitError:
        raise ServerError(f"{server} is rate limiting requests (HTTP 429/503)") from None
    except caldav_error.DAVError as err:
        if _refused_address(err):
            raise _refusal(server, access) from None
        status = f"HTTP {err.status}" if err.status else _short(err.reason)
        raise ServerError(f"{server} answered {type(err).__name__} ({status})") from None
    except etree.LxmlError as err:
        limit = _lxml_limit(err)
        if limit:
            raise ItemTooLarge(
                f"{server}'s answer holds {limit}: an event with a large attachment? It cannot"
                " be read until it is made smaller"
            ) from None
        raise ServerError(f"{server} sent a response that is not valid XML") from None
    except OSError as err:
        if _refused_address(err):
            raise _refusal(server, access) from None
        raise


def _refusal(server: str, access: CalendarAccess) -> AddressRefused:
    """The guard's refusal as the connection shows it: which address (or which redirect) it
    was is not said, so that errors cannot be used to map what answers where."""
    return AddressRefused(
        f"{server} leads to an address that is not public (itself, through a redirect or by a"
        f" changed DNS answer), so nothing was sent there: check the URL (set"
        f" {access.guard.setting}=1 to allow private addresses, for tests)"
    )


def _refused_address(err: BaseException) -> bool:
    """Whether ``err`` (or what it was raised from) is the guard's refusal."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, _AddressRefused):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _lxml_limit(err: Exception) -> str | None:
    """Which of libxml2's limits (those ``huge_tree`` lifts) an answer broke, if one did."""
    text = str(err)
    if getattr(err, "code", None) != etree.ErrorTypes.ERR_RESOURCE_LIMIT and (
        "XML_PARSE_HUGE" not in text and "huge" not in text.lower()
    ):
        return None
    if "text node" in text.lower():
        return "an item larger than 10 MB (lxml's limit for one text node)"
    return f"more than lxml reads ({_short(text)})"


def _short(text: object, limit: int = 120) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _server(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"\)]+)")


def _os_reason(err: Exception) -> str:
    found = _ERRNO.search(str(err))
    return found.group(1).strip() if found else type(err).__name__
