"""What the loopback fakes of Google and Microsoft 365 share (``tests.google_servers``,
``tests.microsoft_servers``).

The app connects people's Google and Microsoft calendars with OAuth 2.0 (authorization code
with PKCE), then reads and writes events through Google Calendar API v3 and Microsoft Graph
v1.0. Neither service can be reached from here, so each fake is a real HTTP server on a free
loopback port, in the test process, that answers the documented endpoints with the documented
shapes. This module is the one home of what both need:

* the server: a threaded werkzeug server started and stopped by ``with``; handlers are routed
  by the ``route`` decorator and run one at a time under the fake's lock, so a test may change
  the fake's state between (or during) the app's requests;
* the authorization server: registered clients, a consent page at the authorize URL (the
  signed-in account's email, a form with the buttons "Allow" and "Deny"), single-use,
  short-lived codes bound to their client, redirect URI and PKCE challenge, access tokens that
  expire, refresh tokens that a test can expire or revoke (``invalid_grant``), bearer checks;
* what tests see and steer: the record of requests, the clock (``advance_clock``), the page
  size, the invalidation of sync tokens;
* the machinery of listing: answers cut into pages under opaque tokens, and sync tokens that
  remember what the client was last told, so that the next round answers only what changed
  (``compare``);
* recurrence: the instances of a series within a window, bounded (``expand``);
* push messages (Google's channel messages, Graph's change and lifecycle notifications): each
  provider decides what to send and to whom; the courier here POSTs them on a thread of its
  own, one at a time in the order queued, outside the fake's lock (a slow receiver never holds
  up the API), each with a short timeout and no retries, and records every attempt in
  ``pushes`` (``Push``: to whom, what, and the receiver's status or the error). Tests wait for
  them (``wait_for_pushes``), prove that nothing more was sent (``flush_pushes``: everything
  queued so far has been delivered), and turn them off (``push_enabled``). The courier posts
  only to loopback addresses: anything else is recorded as not sent, never contacted;
* a slow provider: ``stall`` makes the API's requests (never the OAuth endpoints) wait before
  the fake takes them up, outside its lock, so the fake answers other requests meanwhile.

Each provider supplies its paths, its error bodies and its token-answer details (hooks named
below); nothing else is written twice. The clock is the ``clock`` the fake is given
(``time.time`` by default, shifted by ``advance_clock``): token and code expiries are durations
after "now", the same on any day and on the tests' shifted clock, which time-machine applies
to ``time.time`` itself.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import html
import ipaddress
import json
import queue
import re
import secrets
import signal
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from dateutil.rrule import rruleset
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from tests.servers import free_port, serve_in_thread

# The account the tests connect (the conftest's ``google`` and ``microsoft`` fixtures make it).
ACCOUNT_EMAIL = "dentist@example.com"

CODE_LIFETIME = 600.0  # seconds; both providers' codes last about ten minutes
ACCESS_TOKEN_LIFETIME = 3599  # expires_in of both providers' token answers
HORIZON = timedelta(days=730)  # how far a series is expanded when nothing else bounds it
MAX_INSTANCES = 1000  # instances of one series in one answer, at most
MAX_PAGE = 2500  # the largest page any answer has
PUSH_TIMEOUT = 5.0  # seconds a receiver has to answer a push message
NOT_LOOPBACK = "not sent: the fake posts to loopback addresses only"


# Errors and routing
class Refusal(Exception):
    """An HTTP answer other than success, in the provider's own error shape."""

    def __init__(
        self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(status, body)
        self.status = status
        self.body = body
        self.headers = headers or {}


class Invalid(ValueError):
    """A resource the provider would refuse (400); ``reason`` names why, in the provider's
    words where it has one."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class UnknownToken(KeyError):
    """A page or sync token this fake never handed out."""


class TokenGone(KeyError):
    """A sync token the fake handed out but no longer honours (invalidated, or too old)."""


def route(rule: str, *methods: str) -> Callable[[Callable], Callable]:
    """Serve the decorated handler at ``rule`` (werkzeug syntax) for ``methods`` (GET by
    default); a handler may carry several routes."""

    def mark(handler: Callable) -> Callable:
        handler.routes = [*getattr(handler, "routes", []), (rule, methods or ("GET",))]
        return handler

    return mark


def unlocked(handler: Callable) -> Callable:
    """Run the decorated handler without the fake's lock: it takes the lock itself around what
    touches the fake's state, because it also waits on the network (Graph's validation
    handshake), and the fake must go on answering meanwhile (the receiver may call it)."""
    handler.unlocked = True
    return handler


def locked(method: Callable) -> Callable:
    """Run a control method under the fake's lock, as the server runs its handlers."""

    @functools.wraps(method)
    def run(self: OAuthFake, *args: Any, **kwargs: Any) -> Any:
        with self.lock:
            return method(self, *args, **kwargs)

    return run


class QuietHandler(WSGIRequestHandler):
    """werkzeug's request handler without its access log (the fake keeps its own record)."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


# What the fake keeps
@dataclass(frozen=True)
class Recorded:
    """One request the fake received: what tests assert about ("one small request")."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


@dataclass
class Account:
    """A person's account: the consent page shows ``email``; ``id`` is the provider's."""

    email: str
    name: str
    id: str
    time_zone: str


@dataclass
class Client:
    """An app registered with the authorization server."""

    id: str
    secret: str
    redirect_uris: tuple[str, ...] | None  # None: any redirect URI


@dataclass
class Grant:
    """What one consent (or ``issue_refresh_token``) gave one client over one account."""

    account: Account
    client_id: str
    scope: str
    offline: bool
    revoked: bool = False


@dataclass
class AccessToken:
    """What a bearer token stands for, until ``expires_at`` (on the fake's clock)."""

    grant: Grant
    expires_at: float


@dataclass
class RefreshToken:
    """What a refresh token stands for; ``expired`` when a test made it so."""

    grant: Grant
    expired: bool = False


@dataclass
class Consent:
    """An authorize request waiting for the person's decision on the consent page."""

    client: Client
    account: Account
    redirect_uri: str
    state: str | None
    scope: str
    challenge: str | None
    method: str
    offline: bool
    expires_at: float


@dataclass
class Code:
    """An authorization code: single use, until ``expires_at``."""

    consent: Consent
    expires_at: float
    used: bool = False


@dataclass(frozen=True)
class Push:
    """One delivery attempt of a push message, as ``fake.pushes`` keeps it: to whom (``target``:
    the Google channel's or the Graph subscription's id; ``address``), what (``state``: Google's
    resource state, Graph's change type or lifecycle event; the headers and body sent) and how it
    went (the receiver's ``status``, or the ``error`` that kept it from answering)."""

    target: str
    address: str
    state: str
    headers: dict[str, str]
    body: bytes = b""
    status: int | None = None
    error: str | None = None

    @property
    def json(self) -> Any:
        """The body read as JSON (None when empty)."""
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class Stall:
    """What ``stall`` asked: how long matching requests wait, and until ``released``."""

    seconds: float
    path_contains: str | None
    released: threading.Event


def is_loopback(url: str) -> bool:
    """Whether ``url`` names this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def deliver(client: httpx.Client, push: Push) -> Push:
    """POST ``push`` with ``client``; the attempt as recorded (status, or error)."""
    if not is_loopback(push.address):
        return replace(push, error=NOT_LOOPBACK)
    try:
        answer = client.post(push.address, content=push.body, headers=push.headers)
    except httpx.HTTPError as err:
        return replace(push, error=f"{type(err).__name__}: {err}")
    return replace(push, status=answer.status_code)


# Listing: pages and sync tokens
Snapshot = dict[str, tuple[str, dict[str, Any]]]  # id -> (fingerprint, what a removal says)


def fingerprint(item: dict[str, Any]) -> str:
    """What tells two versions of an item apart (any field that changed)."""
    return hashlib.sha1(json.dumps(item, sort_keys=True, default=str).encode()).hexdigest()


def compare(
    before: Snapshot, items: list[dict[str, Any]], removal: Callable[[dict[str, Any]], dict]
) -> tuple[list[dict[str, Any]], Snapshot]:
    """What a client that was told ``before`` must be told now that the answer is ``items``:
    the new and changed items, then what ``removal`` says for each item it knew that is gone;
    and the snapshot to remember for the next round."""
    after: Snapshot = {item["id"]: (fingerprint(item), removal(item)) for item in items}
    changed = [item for item in items if before.get(item["id"], ("",))[0] != after[item["id"]][0]]
    removed = [stub for key, (_, stub) in before.items() if key not in after]
    return changed + removed, after


@dataclass
class SyncState:
    """What a sync token stands for: the calendar, the parameters of its first request (its
    window, time zone, expansion) and what the client was told."""

    calendar_id: str
    params: dict[str, Any]
    snapshot: Snapshot


class SyncStates:
    """The sync tokens handed out. A calendar keeps its ``keep`` newest; older ones, and all
    of an invalidated calendar's, are gone (the providers' 410)."""

    def __init__(self, keep: int = 50) -> None:
        self.keep = keep
        self.states: OrderedDict[str, SyncState] = OrderedDict()
        self.gone: set[str] = set()

    def issue(self, state: SyncState) -> str:
        token = secrets.token_urlsafe(24)
        self.states[token] = state
        mine = [key for key, held in self.states.items() if held.calendar_id == state.calendar_id]
        for old in mine[: -self.keep]:
            self.gone.add(old)
            del self.states[old]
        return token

    def find(self, token: str) -> SyncState:
        if token in self.gone:
            raise TokenGone(token)
        if token not in self.states:
            raise UnknownToken(token)
        return self.states[token]

    def invalidate(self, calendar_id: str | None = None) -> None:
        for token, state in list(self.states.items()):
            if calendar_id is None or state.calendar_id == calendar_id:
                self.gone.add(token)
                del self.states[token]


@dataclass
class Round:
    """One listing's answer, computed at its first request and handed out page by page; the
    last page carries ``finish`` (the next sync token), if any."""

    items: list[dict[str, Any]]
    finish: str | None


class Rounds:
    """Rounds under page tokens: each page has its own token, which stays valid (a client may
    retry a page); the oldest are forgotten past ``keep``."""

    def __init__(self, keep: int = 5000) -> None:
        self.keep = keep
        self.pages: OrderedDict[str, tuple[Round, int]] = OrderedDict()

    def begin(self, items: list[dict[str, Any]], finish: str | None) -> str:
        return self._hold(Round(items, finish), 0)

    def take(self, token: str, size: int) -> tuple[list[dict[str, Any]], str | None, str | None]:
        """The page under ``token``: its items, the next page's token or else the round's
        ``finish``."""
        if token not in self.pages:
            raise UnknownToken(token)
        held, offset = self.pages[token]
        end = offset + size
        if end < len(held.items):
            return held.items[offset:end], self._hold(held, end), None
        return held.items[offset:], None, held.finish

    def _hold(self, held: Round, offset: int) -> str:
        token = secrets.token_urlsafe(24)
        self.pages[token] = (held, offset)
        while len(self.pages) > self.keep:
            self.pages.popitem(last=False)
        return token


# Time
def parse_instant(text: str, naive_zone: tzinfo | None = None) -> datetime:
    """An ISO 8601 instant (``Z`` or an offset; up to 7 fractional digits, as Graph writes);
    one without an offset is in ``naive_zone``, or refused when there is none."""
    instant = datetime.fromisoformat(text.strip())
    if instant.tzinfo is None:
        if naive_zone is None:
            raise ValueError(f"{text!r} has no time zone offset")
        instant = instant.replace(tzinfo=naive_zone)
    return instant


def iana_zone(name: str) -> tzinfo:
    """The IANA time zone ``name`` (``UTC`` too); ValueError for any other name."""
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"unknown time zone {name!r}") from err


def midnight(day: date, zone: tzinfo) -> datetime:
    """Where an all-day date begins in ``zone``."""
    return datetime(day.year, day.month, day.day, tzinfo=zone)


def expand(rules: rruleset, duration: timedelta, start: datetime, end: datetime) -> list[datetime]:
    """The starts of a series' instances that overlap [``start``, ``end``), at most
    ``MAX_INSTANCES``. ``rules`` and the bounds agree on awareness: all-day series run on naive
    midnights, timed ones on aware wall times in the series' zone (so DST keeps the hour)."""
    starts = rules.between(start - duration, end, inc=True)
    return [begin for begin in starts if begin + duration > start and begin < end][:MAX_INSTANCES]


@dataclass
class Window:
    """The span a listing covers: ``start``/``end`` None when open on that side."""

    start: datetime | None = None
    end: datetime | None = None

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return (self.start is None or end > self.start) and (self.end is None or start < self.end)

    def bounds(self, first: datetime) -> tuple[datetime, datetime]:
        """Where a series that starts at ``first`` is expanded: the window, closed by
        ``HORIZON`` on an open side."""
        start = self.start or first
        return start, self.end or start + HORIZON


def unsigned_jwt(claims: dict[str, Any]) -> str:
    """An ID token with ``alg: none``: the app may read it, not verify it (the fakes have no
    keys to publish)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."


def with_query(url: str, params: dict[str, str]) -> str:
    """``url`` with ``params`` added to its query (what it already has is kept)."""
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query, keep_blank_values=True), *params.items()]
    return urlunsplit(parts._replace(query=urlencode(query)))


CONSENT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in - {title}</title></head>
<body>
<h1>{title}</h1>
<p>Signed in as <strong id="account">{email}</strong></p>
<p>The application <strong>{client}</strong> asks for: <code>{scope}</code></p>
<form method="post" action="{action}">
<input type="hidden" name="consent" value="{consent}">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>
</body></html>
"""

ERROR_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Error - {title}</title></head>
<body><h1>{title}</h1><p id="error">{code}</p><p>{message}</p></body></html>
"""

# Why an authorize request is refused with a page rather than a redirect: the redirect URI
# cannot be trusted (or the request has expired).
AUTHORIZE_PAGE_ERRORS = {
    "invalid_client": (401, "The OAuth client was not found."),
    "redirect_uri_mismatch": (400, "The redirect URI does not match a registered one."),
    "invalid_request": (400, "The consent request is unknown or has expired."),
}


class OAuthFake:
    """A provider's authorization server and API on one loopback port.

    ``FakeGoogle(client_id, client_secret)`` / ``FakeMicrosoft(…)``: a client is registered
    with that id and secret (any redirect URI, unless ``register_client`` names them).
    ``require_pkce`` refuses an authorize request without ``code_challenge`` (both providers
    would accept it, but the app must always use PKCE). Start it with ``with``.
    """

    # What a provider supplies
    title: ClassVar[str]
    authorize_rule: ClassVar[str]  # werkzeug rule of the authorize endpoint
    token_rule: ClassVar[str]
    authorize_path: ClassVar[str]  # the authorize endpoint the app is given
    token_path: ClassVar[str]
    scope_word: ClassVar[str]  # what a granted scope must contain for the calendar API
    rotates_refresh_tokens: ClassVar[bool]
    revocation_ends_access_tokens: ClassVar[bool]  # or do they live until they expire
    prefixes: ClassVar[tuple[str, str, str]] = ("", "", "")  # of codes, access, refresh tokens
    default_page_size: ClassVar[int] = 100
    api_prefix: ClassVar[str]  # where the API's paths begin (what ``stall`` may hold up)

    def __init__(
        self,
        client_id: str = "test-client-id",
        client_secret: str = "test-client-secret",
        *,
        port: int | None = None,
        clock: Callable[[], float] = time.time,
        require_pkce: bool = True,
    ) -> None:
        self.port = port or free_port()
        self.clock = clock
        self.offset = 0.0
        self.require_pkce = require_pkce
        self.lock = threading.RLock()
        self.clients: dict[str, Client] = {}
        self.accounts: dict[str, Account] = {}
        self.calendars: dict[str, Any] = {}  # the provider's calendars by id
        self.signed_in: str | None = None
        self.consents: dict[str, Consent] = {}
        self.codes: dict[str, Code] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self.requests: list[Recorded] = []
        self.page_size: int | None = None
        self.code_lifetime = CODE_LIFETIME
        self.access_token_lifetime = ACCESS_TOKEN_LIFETIME
        self.sync_states = SyncStates()
        self.rounds = Rounds()
        self.versions = 0
        # Push messages: the courier's queue (None stops it; a None push is a barrier), and
        # what it delivered.
        self.push_enabled = True
        self.pushes: list[Push] = []
        self.pushed = threading.Condition()
        self.outbox: queue.SimpleQueue[tuple[Push | None, Future] | None] = queue.SimpleQueue()
        self.courier: threading.Thread | None = None
        self.stalled: Stall | None = None
        self.stalling = threading.Condition()  # counts the requests waiting in a stall
        self.waiting = 0
        self.server: BaseWSGIServer | None = None
        self.thread: threading.Thread | None = None
        self.register_client(client_id, client_secret)
        self.url_map = Map(self._rules())

    # Serving
    @property
    def url(self) -> str:
        """The fake's base URL, ``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def authorize_url(self) -> str:
        return self.url + self.authorize_path

    @property
    def token_url(self) -> str:
        return self.url + self.token_path

    def start(self) -> None:
        """Serve, in a daemon thread, until ``stop``."""
        self.server = make_server(
            "127.0.0.1", self.port, self.wsgi, threaded=True, request_handler=QuietHandler
        )
        self.thread = serve_in_thread(self.server)

    def stop(self) -> None:
        self.unstall()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        with self.pushed:
            courier, self.courier = self.courier, None
            outbox = self.outbox
        if courier is not None:
            outbox.put(None)
            courier.join(timeout=1.0)  # a receiver that hangs keeps only the daemon thread

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _rules(self) -> list[Rule]:
        rules = [
            Rule(self.authorize_rule, endpoint="authorize", methods=["GET", "POST"]),
            Rule(self.token_rule, endpoint="token", methods=["POST"]),
        ]
        for name in dir(type(self)):
            for rule, methods in getattr(getattr(type(self), name), "routes", []):
                rules.append(Rule(rule, endpoint=name, methods=list(methods)))
        return rules

    def wsgi(self, environ: dict[str, Any], start_response: Callable) -> Iterator[bytes]:
        """Wait out a stall, if one holds this request; record the request, then answer it
        under the lock (an ``unlocked`` handler takes the lock itself)."""
        request = Request(environ)
        self._wait_if_stalled(request)
        with self.lock:
            self.requests.append(
                Recorded(
                    request.method,
                    request.path,
                    request.args.to_dict(),
                    {key.lower(): value for key, value in request.headers.items()},
                )
            )
            response = self._handle(environ, request, unlocked=False)
        if response is None:
            response = self._handle(environ, request, unlocked=True)
        return response(environ, start_response)

    def _handle(self, environ: dict[str, Any], request: Request, *, unlocked: bool) -> Any:
        """The answer of the request's handler, if it is ``unlocked`` or not as asked (else
        None); a refusal or an unknown path in the provider's error shape."""
        try:
            endpoint, arguments = self.url_map.bind_to_environ(environ).match()
            handler = getattr(self, endpoint)
            if getattr(handler, "unlocked", False) != unlocked:
                return None
            return handler(request, **arguments)
        except Refusal as refusal:
            return self.refusal_response(refusal)
        except (NotFound, MethodNotAllowed) as err:
            return self.refusal_response(self.no_such_path(err))

    def refusal_response(self, refusal: Refusal) -> Response:
        if isinstance(refusal.body, str):
            return Response(refusal.body, refusal.status, refusal.headers, mimetype="text/html")
        return self.answer(refusal.body, refusal.status, refusal.headers)

    def answer(
        self, body: dict[str, Any] | None, status: int = 200, headers: dict[str, str] | None = None
    ) -> Response:
        """A JSON answer (an empty one when ``body`` is None)."""
        text = "" if body is None else json.dumps(body, indent=1)
        content_type = "application/json; charset=UTF-8"
        return Response(text, status, headers or {}, content_type=content_type)

    def json_body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object; what the provider says (``unreadable``) when it is none."""
        try:
            body = json.loads(request.get_data(as_text=True) or "null")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise self.unreadable()
        return body

    # The clock
    def current_time(self) -> float:
        """Now, on the fake's clock (seconds since the epoch)."""
        return self.clock() + self.offset

    def current_datetime(self) -> datetime:
        return datetime.fromtimestamp(self.current_time(), UTC)

    @locked
    def advance_clock(self, seconds: float) -> None:
        """Move the fake's clock ``seconds`` on (codes and access tokens expire by it)."""
        self.offset += seconds

    # A client of the fake's API
    def api_client(self, email: str) -> httpx.Client:
        """An HTTP client of the calendar API (its base URL) as ``email``'s account, with a
        fresh access token; use it with ``with``."""
        headers = {"Authorization": f"Bearer {self.issue_access_token(email)}"}
        return httpx.Client(base_url=self.url + self.api_prefix, headers=headers, verify=False)

    # A slow provider
    def stall(self, seconds: float, path_contains: str | None = None) -> None:
        """From now until ``unstall``, each API request (never the OAuth endpoints) whose path
        contains ``path_contains`` (any, when None) waits ``seconds`` before the fake takes it
        up, then is answered as usual. It waits outside the fake's lock, so the fake answers
        other requests meanwhile: a provider slow to answer one call, for the app's timeouts
        and live checks."""
        self.unstall()
        self.stalled = Stall(seconds, path_contains, threading.Event())

    def unstall(self) -> None:
        """No more stalls; the requests waiting in one are taken up at once."""
        stall, self.stalled = self.stalled, None
        if stall is not None:
            stall.released.set()

    def wait_until_stalled(self, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until ``count`` requests are waiting in the stall (the app's call is in
        flight, and held)."""
        with self.stalling:
            if not self.stalling.wait_for(lambda: self.waiting >= count, timeout):
                raise AssertionError(f"expected {count} stalled requests, got {self.waiting}")

    def _wait_if_stalled(self, request: Request) -> None:
        stall = self.stalled
        path = request.path
        if stall is None or not (path == self.api_prefix or path.startswith(self.api_prefix + "/")):
            return
        if stall.path_contains is not None and stall.path_contains not in path:
            return
        with self.stalling:
            self.waiting += 1
            self.stalling.notify_all()
        try:
            stall.released.wait(stall.seconds)
        finally:
            with self.stalling:
                self.waiting -= 1
                self.stalling.notify_all()

    # Push messages
    def send_push(self, push: Push) -> Future[Push] | None:
        """Queue ``push`` for the courier; its recorded attempt, once delivered, is the
        future's result. None while ``push_enabled`` is off: nothing is sent or recorded."""
        if not self.push_enabled:
            return None
        return self._queue(push)

    def _queue(self, push: Push | None) -> Future[Push]:
        done: Future[Push] = Future()
        with self.pushed:
            if self.courier is None or not self.courier.is_alive():
                self.outbox = queue.SimpleQueue()  # its own: a stopped courier's stays behind
                self.courier = threading.Thread(
                    target=self._deliver_forever, args=(self.outbox,), daemon=True
                )
                self.courier.start()
            self.outbox.put((push, done))
        return done

    def _deliver_forever(self, outbox: queue.SimpleQueue) -> None:
        """The courier: POST each queued message in turn, record it, until told to stop."""
        with httpx.Client(timeout=PUSH_TIMEOUT, trust_env=False, verify=False) as client:
            while (item := outbox.get()) is not None:
                push, done = item
                if push is not None:
                    push = deliver(client, push)
                    with self.pushed:
                        self.pushes.append(push)
                        self.pushed.notify_all()
                done.set_result(push)

    def wait_for_pushes(self, count: int, timeout: float = 10.0) -> list[Push]:
        """Wait until ``count`` push messages have been delivered (or have failed); all those
        recorded then, in order."""
        with self.pushed:
            if not self.pushed.wait_for(lambda: len(self.pushes) >= count, timeout):
                raise AssertionError(f"expected {count} push messages, got {self.pushes}")
            return list(self.pushes)

    def flush_pushes(self, timeout: float = 10.0) -> list[Push]:
        """Wait until every push message queued so far has been delivered (or has failed);
        all those recorded then. The courier keeps order, so this proves what was not sent
        without sleeping."""
        self._queue(None).result(timeout)
        with self.pushed:
            return list(self.pushes)

    def next_version(self) -> int:
        """A number greater than every earlier one (etags, change keys)."""
        self.versions += 1
        return self.versions

    # Control: clients, accounts, tokens
    @locked
    def register_client(
        self, client_id: str, client_secret: str, redirect_uris: list[str] | None = None
    ) -> None:
        """A client the authorization server knows; ``redirect_uris``: the only ones it
        accepts (None: any)."""
        uris = tuple(redirect_uris) if redirect_uris is not None else None
        self.clients[client_id] = Client(client_id, client_secret, uris)

    @locked
    def add_account(self, email: str, *, name: str | None = None, time_zone: str = "UTC") -> str:
        """An account with its primary calendar (in ``time_zone``); returns that calendar's
        id. The first account added is the one signed in on the consent page."""
        account = Account(
            email, name or email.split("@")[0].title(), self.new_account_id(), time_zone
        )
        self.accounts[email] = account
        return self.new_primary_calendar(account)

    @locked
    def sign_in(self, email: str) -> None:
        """The account the consent page shows (as if the browser were signed in to it)."""
        self.signed_in = self.accounts[email].email

    @locked
    def issue_refresh_token(
        self, email: str, *, scope: str | None = None, client_id: str | None = None
    ) -> str:
        """A refresh token of ``email`` for the client (the first registered by default), as
        if the person had consented: for provisioning a connection without a browser."""
        return self._new_refresh_token(self._direct_grant(email, scope, client_id))

    @locked
    def issue_access_token(
        self, email: str, *, scope: str | None = None, client_id: str | None = None
    ) -> str:
        """An access token of ``email`` that the API accepts until it expires."""
        return self._new_access_token(self._direct_grant(email, scope, client_id))

    def _direct_grant(self, email: str, scope: str | None, client_id: str | None) -> Grant:
        client = client_id or next(iter(self.clients))
        return Grant(self.accounts[email], client, scope or self.full_scope, offline=True)

    @locked
    def delete_calendar(self, calendar_id: str) -> None:
        """The calendar is gone: its URLs answer 404 and its sync tokens 410."""
        del self.calendars[calendar_id]
        self.sync_states.invalidate(calendar_id)

    @locked
    def update_event(
        self, calendar_id: str, event_id: str, *, time_zone: str | None = None, **fields: Any
    ) -> None:
        """Change an event as a person would (patch semantics; on Microsoft, an occurrence's
        id makes it an exception); ``start``/``end`` may be datetimes or dates, as for
        ``add_event`` (in ``time_zone``), the other ``fields`` as the API writes them."""
        for key in ("start", "end"):
            if isinstance(fields.get(key), date):
                fields[key] = self.time_field(fields[key], time_zone)
        self.change_event(self.calendars[calendar_id], event_id, fields)

    @locked
    def delete_event(self, calendar_id: str, event_id: str) -> None:
        """Delete an event as a person would: on Google it becomes ``status: cancelled``; on
        Microsoft it is gone (a series, or one occurrence of it)."""
        self.remove_event(self.calendars[calendar_id], event_id)

    @locked
    def expire_access_tokens(self) -> None:
        """Every access token handed out so far is expired from now on (the API answers 401;
        a refresh gets a new one)."""
        for token in self.access_tokens.values():
            token.expires_at = min(token.expires_at, self.current_time() - 1)

    @locked
    def expire_refresh_token(self, refresh_token: str) -> None:
        """``refresh_token`` no longer refreshes (``invalid_grant``, as after long disuse)."""
        self.refresh_tokens[refresh_token].expired = True

    @locked
    def revoke_grants(self, email: str | None = None) -> None:
        """The person (``email``, or everyone) withdraws the app's access: its refresh tokens
        get ``invalid_grant``; its access tokens get 401 at once on Google, and only once
        they expire on Microsoft (``expire_access_tokens``)."""
        for token in [*self.refresh_tokens.values(), *self.access_tokens.values()]:
            if email is None or token.grant.account.email == email:
                token.grant.revoked = True

    @locked
    def set_page_size(self, size: int | None) -> None:
        """The most items a page of any listing carries (None: the provider's own limits)."""
        self.page_size = size

    @locked
    def invalidate_sync_tokens(self, calendar_id: str | None = None) -> None:
        """The sync tokens handed out so far (for ``calendar_id``, or all) are refused from
        now on: the provider's 410, after which a client must sync in full again."""
        self.sync_states.invalidate(calendar_id)

    def requests_to(self, fragment: str, method: str | None = None) -> list[Recorded]:
        """The requests received whose path contains ``fragment`` (and of ``method``)."""
        with self.lock:
            return [
                r
                for r in self.requests
                if fragment in r.path and (method is None or r.method == method.upper())
            ]

    @locked
    def clear_requests(self) -> None:
        self.requests.clear()

    def consent(self, authorize_url: str, *, allow: bool = True) -> str:
        """What a person's browser does with ``authorize_url``: open the consent page and
        press Allow (or Deny); returns where the provider sends it (the ``Location``)."""
        with httpx.Client(timeout=10, verify=False) as browser:  # plain HTTP: no certificates
            page = browser.get(authorize_url)
            if page.status_code in (302, 303):
                return page.headers["location"]
            page.raise_for_status()
            action = re.search(r'<form method="post" action="([^"]+)"', page.text).group(1)
            consent = re.search(r'name="consent" value="([^"]+)"', page.text).group(1)
            decision = "allow" if allow else "deny"
            answer = browser.post(
                urljoin(authorize_url, html.unescape(action)),
                data={"consent": consent, "decision": decision},
            )
            return answer.headers["location"]

    # The authorization server
    def authorize(self, request: Request, **_path: str) -> Response:
        """The authorize endpoint: the consent page (GET), its form (POST)."""
        if request.method == "POST":
            return self._decide(request)
        args = request.args
        client = self.clients.get(args.get("client_id", ""))
        if client is None:
            return self.error_page("invalid_client")
        redirect_uri = args.get("redirect_uri", "")
        if not redirect_uri or (
            client.redirect_uris is not None and redirect_uri not in client.redirect_uris
        ):
            return self.error_page("redirect_uri_mismatch")
        state = args.get("state")
        challenge = args.get("code_challenge")
        method = args.get("code_challenge_method", "plain")
        problem = None
        if args.get("response_type") != "code":
            problem = "unsupported_response_type"
        elif not args.get("scope") or method not in ("S256", "plain"):
            problem = "invalid_request"
        elif challenge is None and self.require_pkce:
            problem = "invalid_request"  # the providers would accept it; the app must not ask
        account = self._signed_in_account(args.get("login_hint"))
        if problem or account is None:
            return self._back(redirect_uri, state, error=problem or "access_denied")
        consent = Consent(
            client,
            account,
            redirect_uri,
            state,
            args["scope"],
            challenge,
            method,
            self.offline(args),
            self.current_time() + self.code_lifetime,
        )
        key = secrets.token_urlsafe(16)
        self.consents[key] = consent
        page = CONSENT_PAGE.format(
            title=html.escape(self.title),
            email=html.escape(account.email),
            client=html.escape(client.id),
            scope=html.escape(consent.scope),
            action=html.escape(request.path),
            consent=key,
        )
        return Response(page, 200, mimetype="text/html")

    def _decide(self, request: Request) -> Response:
        consent = self.consents.pop(request.form.get("consent", ""), None)
        if consent is None or consent.expires_at < self.current_time():
            return self.error_page("invalid_request")
        if request.form.get("decision") != "allow":
            return self._back(consent.redirect_uri, consent.state, error="access_denied")
        code = self.prefixes[0] + secrets.token_urlsafe(32)
        self.codes[code] = Code(consent, self.current_time() + self.code_lifetime)
        return self._back(consent.redirect_uri, consent.state, code=code)

    def _back(self, redirect_uri: str, state: str | None, **params: str) -> Response:
        if state is not None:
            params["state"] = state
        return Response("", 302, {"Location": with_query(redirect_uri, params)})

    def _signed_in_account(self, login_hint: str | None) -> Account | None:
        email = self.signed_in or (login_hint if login_hint in self.accounts else None)
        if email is None and self.accounts:
            email = next(iter(self.accounts))
        return self.accounts.get(email) if email else None

    def error_page(self, code: str) -> Response:
        status, message = AUTHORIZE_PAGE_ERRORS[code]
        page = ERROR_PAGE.format(title=html.escape(self.title), code=code, message=message)
        return Response(page, status, mimetype="text/html")

    def token(self, request: Request, **_path: str) -> Response:
        """The token endpoint: the authorization_code and refresh_token grants."""
        form = request.form
        client = self._authenticated_client(request)
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            grant = self._redeem(form, client)
            refresh = self._new_refresh_token(grant) if grant.offline else None
        elif grant_type == "refresh_token":
            grant = self._refreshed(form.get("refresh_token", ""), client)
            refresh = self._new_refresh_token(grant) if self.rotates_refresh_tokens else None
        else:
            raise self.oauth_refusal("unsupported_grant_type")
        body: dict[str, Any] = {
            "access_token": self._new_access_token(grant),
            "token_type": "Bearer",
            "expires_in": self.access_token_lifetime,
            "scope": grant.scope,
            **self.token_fields(),
        }
        if refresh is not None:
            body["refresh_token"] = refresh
        if "openid" in grant.scope.split():
            issued = int(self.current_time())
            claims = {"aud": grant.client_id, "iat": issued, "exp": issued + 3600}
            body["id_token"] = unsigned_jwt({**claims, **self.id_claims(grant.account)})
        return self.answer(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})

    def _authenticated_client(self, request: Request) -> Client:
        basic = request.authorization
        if basic is not None and basic.type == "basic":
            client_id, secret = basic.username, basic.password
        else:
            client_id, secret = request.form.get("client_id"), request.form.get("client_secret")
        client = self.clients.get(client_id or "")
        if client is None or not secrets.compare_digest(client.secret, secret or ""):
            raise self.oauth_refusal("invalid_client")
        return client

    def _redeem(self, form: Any, client: Client) -> Grant:
        code = self.codes.get(form.get("code", ""))
        if code is None or code.consent.client.id != client.id:
            raise self.oauth_refusal("code_invalid")
        if code.used:
            raise self.oauth_refusal("code_used")
        if code.expires_at < self.current_time():
            raise self.oauth_refusal("code_expired")
        consent = code.consent
        if form.get("redirect_uri") != consent.redirect_uri:
            raise self.oauth_refusal("redirect_mismatch")
        if consent.challenge is not None:
            verifier = form.get("code_verifier")
            if not verifier:
                raise self.oauth_refusal("verifier_missing")
            if not secrets.compare_digest(
                pkce_challenge(verifier, consent.method), consent.challenge
            ):
                raise self.oauth_refusal("verifier_mismatch")
        code.used = True
        return Grant(consent.account, client.id, consent.scope, consent.offline)

    def _refreshed(self, token: str, client: Client) -> Grant:
        held = self.refresh_tokens.get(token)
        if held is None or held.grant.client_id != client.id:
            raise self.oauth_refusal("refresh_invalid")
        if held.grant.revoked:
            raise self.oauth_refusal("grant_revoked")
        if held.expired:
            raise self.oauth_refusal("refresh_expired")
        return held.grant

    def _new_access_token(self, grant: Grant) -> str:
        token = self.prefixes[1] + secrets.token_urlsafe(32)
        expires_at = self.current_time() + self.access_token_lifetime
        self.access_tokens[token] = AccessToken(grant, expires_at)
        return token

    def _new_refresh_token(self, grant: Grant) -> str:
        token = self.prefixes[2] + secrets.token_urlsafe(40)
        self.refresh_tokens[token] = RefreshToken(grant)
        return token

    def grant_of(self, request: Request, *, calendar: bool = True) -> Grant:
        """The grant behind the request's bearer token; the provider's 401 otherwise (or 403
        when ``calendar`` is asked for and the scope has none)."""
        header = request.headers.get("Authorization", "")
        if not header.lower().startswith("bearer ") or not header[7:].strip():
            raise self.unauthenticated("missing")
        held = self.access_tokens.get(header[7:].strip())
        if held is None:
            raise self.unauthenticated("malformed")
        if held.grant.revoked and self.revocation_ends_access_tokens:
            raise self.unauthenticated("revoked")
        if held.expires_at <= self.current_time():
            raise self.unauthenticated("expired")
        if calendar and self.scope_word not in held.grant.scope:
            raise self.unauthenticated("scope")
        return held.grant

    def revoke_token(self, token: str) -> bool:
        """Revoke the grant behind an access or refresh token; False if there is none."""
        held = self.access_tokens.get(token) or self.refresh_tokens.get(token)
        if held is None or held.grant.revoked:
            return False
        held.grant.revoked = True
        return True

    # Listing
    def page_of(
        self, token: str, requested: int | None
    ) -> tuple[list[dict[str, Any]], str | None, str | None]:
        """A page of the round under ``token``, of the size the client asked for (else the
        provider's default), never more than the fake's ``page_size``."""
        return self.rounds.take(token, self.page_size_for(requested))

    def page_size_for(self, requested: int | None) -> int:
        """The size of a page when the client asks for ``requested`` items (None: the
        provider's default): never more than the fake's ``page_size``, nor less than one."""
        size = min(requested or self.default_page_size, self.page_size or MAX_PAGE, MAX_PAGE)
        return max(size, 1)

    def begin_round(
        self,
        calendar_id: str,
        params: dict[str, Any],
        known: list[dict[str, Any]],
        *,
        told: Snapshot | None = None,
        shown: list[dict[str, Any]] | None = None,
    ) -> str:
        """Start a listing; returns the token of its first page. A full listing (``told``
        None) answers ``shown`` (default: ``known``); an incremental one answers what changed
        from ``told`` to ``known``. Its last page hands out a sync token that remembers
        ``known``, what the client is now up to date with."""
        answer, after = compare(told or {}, known, self.removal)
        if told is None:
            answer = known if shown is None else shown
        finish = self.sync_states.issue(SyncState(calendar_id, params, after))
        return self.rounds.begin(answer, finish)

    # What a provider supplies
    @property
    def full_scope(self) -> str:
        """The scope of a grant made without consent (``issue_refresh_token``)."""
        raise NotImplementedError

    def new_account_id(self) -> str:
        """The provider's id of a new account."""
        return str(uuid.uuid4())

    def new_primary_calendar(self, account: Account) -> str:
        """Make the account's primary calendar; its id."""
        raise NotImplementedError

    def offline(self, args: Any) -> bool:
        """Whether this authorize request's grant includes a refresh token."""
        raise NotImplementedError

    def token_fields(self) -> dict[str, Any]:
        """What the provider's token answers carry beyond the standard fields."""
        return {}

    def id_claims(self, account: Account) -> dict[str, Any]:
        """The provider's claims about ``account`` in an ID token."""
        raise NotImplementedError

    def oauth_refusal(self, kind: str) -> Refusal:
        """The token endpoint's error for ``kind``: invalid_client, unsupported_grant_type,
        code_invalid, code_used, code_expired, redirect_mismatch, verifier_missing,
        verifier_mismatch, refresh_invalid, refresh_expired or grant_revoked."""
        raise NotImplementedError

    def unauthenticated(self, kind: str) -> Refusal:
        """The API's error for a bearer token that is missing, malformed, revoked, expired,
        or without the calendar ``scope``."""
        raise NotImplementedError

    def unreadable(self) -> Refusal:
        """The API's error for a body that is not a JSON object."""
        raise NotImplementedError

    def no_such_path(self, err: HTTPException) -> Refusal:
        """The API's error for a path it does not serve (or a method it does not allow)."""
        raise NotImplementedError

    def removal(self, item: dict[str, Any]) -> dict[str, Any]:
        """What a sync answer says of ``item`` once it is gone."""
        raise NotImplementedError

    def time_field(self, value: date, time_zone: str | None) -> dict[str, str]:
        """An event's start or end as the provider writes it, from a datetime or a date."""
        raise NotImplementedError

    def change_event(self, calendar: Any, event_id: str, fields: dict[str, Any]) -> Any:
        """Patch a stored event with ``fields`` (the API's PATCH)."""
        raise NotImplementedError

    def remove_event(self, calendar: Any, event_id: str) -> None:
        """Delete a stored event (the API's DELETE)."""
        raise NotImplementedError


def pkce_challenge(verifier: str, method: str) -> str:
    """The code challenge of ``verifier`` (RFC 7636): S256 or plain."""
    if method == "plain":
        return verifier
    digest = hashlib.sha256(verifier.encode("ascii", "replace")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def serve_from_command_line(fake_class: type[OAuthFake], argv: list[str] | None = None) -> int:
    """``python -m tests.google_servers --port N`` (or microsoft_servers): serve a fake in its
    own process for benchmarks and manual tries, until SIGTERM or Ctrl-C. It registers the
    client given, seeds one account with a primary calendar, and prints its base URL on the
    first line, then the account, calendar and a refresh token for it."""
    parser = argparse.ArgumentParser(description=fake_class.__doc__)
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--client-id", default="test-client-id")
    parser.add_argument("--client-secret", default="test-client-secret")
    parser.add_argument("--email", default="someone@example.com", help="the seeded account")
    parser.add_argument("--time-zone", default="UTC", help="the seeded account's zone")
    options = parser.parse_args(argv)
    fake = fake_class(options.client_id, options.client_secret, port=options.port or None)
    calendar_id = fake.add_account(options.email, time_zone=options.time_zone)
    refresh_token = fake.issue_refresh_token(options.email)
    done = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: done.set())
    with fake:
        print(fake.url, flush=True)
        print(f"account: {options.email}", flush=True)
        print(f"calendar: {calendar_id}", flush=True)
        print(f"refresh token: {refresh_token}", flush=True)
        done.wait()
    return 0
