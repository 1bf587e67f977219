"""``CalendarClient``: one method per API operation, over httpx.

Retries, within bounds:

* 429 and 503 are answered before anything is written (the rate limit refuses before the
  operation runs; a 503 means the transaction did not commit), so every operation is retried
  after the server's ``Retry-After`` (else an exponential backoff), as long as that wait is at
  most ``max_wait`` seconds and attempts remain.
* Availability is asked conditionally: the client keeps each answer with its ``ETag``
  (``KeptAnswers``) and sends ``If-None-Match`` when it asks the same question again; a ``304``
  returns the cached answer without a body crossing the network or being parsed again.
* A lost answer (connection refused, dropped or timed out) is retried for reads, and for
  creates: each create carries an ``idempotencyKey`` (a fresh one unless given), so the retry
  of a create the server had committed returns that booking instead of booking twice. Updates
  and cancels are not retried after a lost answer: whether they happened is for the caller to
  find out (``get_booking``). Neither are holds (a retried hold would meet its own hold, see
  ``hold_slot``) nor hold releases.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

import httpx

from app.client.errors import CalendarApiError, CalendarUnreachable, error_for
from app.client.models import (
    AvailabilityDay,
    Booking,
    BookingPage,
    Cancellation,
    EventType,
    Hold,
    NewAttendee,
    ReleasedHold,
    Slot,
    without_none,
)

RETRIED_STATUSES = (429, 503)
API_KEY_HEADER = "x-calendar-api-key"

Instant = datetime | str
Attendees = Sequence[NewAttendee | Mapping[str, Any]]


def _instant(value: Instant | date | None) -> str | None:
    """An ISO 8601 string (``None`` stays ``None``: not sent); datetimes must carry their
    timezone (the API would otherwise read them in UTC, which is rarely what a caller meant)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{value!r} has no timezone; give an aware datetime")
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def _attendees(attendees: Attendees) -> list[dict[str, Any]]:
    return [a.to_json() if isinstance(a, NewAttendee) else dict(a) for a in attendees]


class KeptAnswers:
    """Availability answers with their ETags, by API key and question: the last ``size`` of
    them. One may serve many clients (the MCP server makes a client per call); each key's
    answers are kept apart under a digest of the key, never the key itself."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._kept: OrderedDict[tuple[str, tuple], tuple[str, list[AvailabilityDay]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def get(self, api_key: str, question: tuple) -> tuple[str, list[AvailabilityDay]] | None:
        with self._lock:
            found = self._kept.get((_digest(api_key), question))
            if found is not None:
                self._kept.move_to_end((_digest(api_key), question))
            return found

    def keep(self, api_key: str, question: tuple, etag: str, days: list[AvailabilityDay]) -> None:
        with self._lock:
            self._kept[(_digest(api_key), question)] = (etag, days)
            self._kept.move_to_end((_digest(api_key), question))
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)


def _digest(api_key: str) -> str:
    return hashlib.sha256(api_key.encode()).hexdigest()


class CalendarClient:
    """A client of one API key's calendar. ``base_url`` ends with ``/v1/api``. Instead of an
    API key, an OAuth access token (``access_token``) of an agent connected with OAuth 2.1:
    it is sent as ``Authorization: Bearer`` and acts as the key its owner's consent made."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        access_token: str | None = None,
        timeout: float = 10.0,
        max_attempts: int = 4,
        max_wait: float = 60.0,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        kept_answers: KeptAnswers | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_attempts = max_attempts
        self.max_wait = max_wait
        if not (api_key or access_token):
            raise ValueError("an API key or an access token is needed")
        self._api_key = api_key or f"Bearer {access_token}"
        self._auth_headers = (
            {API_KEY_HEADER: api_key} if api_key else {"Authorization": f"Bearer {access_token}"}
        )
        self._own_http = http is None
        self._http = http or httpx.Client(timeout=timeout)
        self._sleep = sleep
        self.kept_answers = kept_answers if kept_answers is not None else KeptAnswers()

    @property
    def credential_digest(self) -> str:
        """A SHA-256 of the key or token this client sends: to keep things per caller without
        keeping the credential."""
        return _digest(self._api_key)

    def __enter__(self) -> CalendarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    # --- the operations ------------------------------------------------------------------------

    def availability(
        self,
        start_date: Instant | date,
        end_date: Instant | date,
        *,
        event_type_id: int | None = None,
        duration: int | None = None,
        timezone: str | None = None,
        host_id: int | None = None,
    ) -> list[AvailabilityDay]:
        """Open slots per day between ``start_date`` and ``end_date`` (``host_id``: one host's
        of the event type). Asked again, the same question is sent with the last answer's
        ``ETag``; a ``304`` returns that answer."""
        params = without_none(
            {
                "startDate": _instant(start_date),
                "endDate": _instant(end_date),
                "eventTypeId": event_type_id,
                "duration": duration,
                "timezone": timezone,
                "hostId": host_id,
            }
        )
        question = tuple(sorted(params.items()))
        kept = self.kept_answers.get(self._api_key, question)
        response = self._send(
            "GET",
            "/calendar/availability",
            params=params,
            retry_lost=True,
            headers={"If-None-Match": kept[0]} if kept else None,
        )
        if response.status_code == 304 and kept is not None:
            return list(kept[1])
        days = [AvailabilityDay.from_json(day) for day in response.json()]
        if etag := response.headers.get("ETag"):
            self.kept_answers.keep(self._api_key, question, etag, days)
        return list(days)

    def list_event_types(self) -> list[EventType]:
        """The event types that take bookings now, by name, each with what a booking of it
        must answer (``EventType.questions``)."""
        offered = self._call("GET", "/calendar/event-types", retry_lost=True)
        return [EventType.from_json(item) for item in offered]

    def list_bookings(
        self,
        *,
        start_date: Instant | date | None = None,
        end_date: Instant | date | None = None,
        status: str | None = None,
        event_type_id: int | None = None,
        email: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> BookingPage:
        params = without_none(
            {
                "startDate": _instant(start_date),
                "endDate": _instant(end_date),
                "status": status,
                "eventTypeId": event_type_id,
                "email": email,
                "limit": limit,
                "offset": offset,
            }
        )
        page = self._call("GET", "/calendar/bookings", params=params, retry_lost=True)
        return BookingPage.from_json(page)

    def get_booking(self, booking_id: int) -> Booking:
        return Booking.from_json(
            self._call("GET", f"/calendar/bookings/{int(booking_id)}", retry_lost=True)
        )

    def create_booking(
        self,
        event_type_id: int,
        *,
        start_time: Instant,
        end_time: Instant,
        attendees: Attendees,
        timezone: str | None = None,
        title: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        hold_token: str | None = None,
        host_id: int | None = None,
        responses: Mapping[str, Any] | None = None,
    ) -> Booking:
        """Book; safe to call again with the same ``idempotency_key`` (one is made when none is
        given, and every retry of this call reuses it).

        ``hold_token``: a ``Hold``'s (``hold_slot``) to book the time it holds; the hold is
        consumed. A token of no live hold of this event type (expired, consumed, released)
        holds nothing: the time is then booked only if it is free.

        ``host_id``: one of the event type's hosts, to book that host (``SlotUnavailable``
        with code ``host_unavailable`` and that host's suggested slots when not free); without
        it a round-robin type chooses, and the booking's ``assignment_reason`` says why.

        ``responses``: the answers to the event type's questions, by key (``EventType.questions``
        is their JSON Schema); a missing or malformed one is a ``CalendarApiError`` with code
        ``invalid_responses`` and ``errors`` naming each."""
        body = without_none(
            {
                "startTime": _instant(start_time),
                "endTime": _instant(end_time),
                "attendees": _attendees(attendees),
                "timezone": timezone,
                "title": title,
                "description": description,
                "metadata": None if metadata is None else dict(metadata),
                "idempotencyKey": idempotency_key or str(uuid.uuid4()),
                "holdToken": hold_token,
                "hostId": host_id,
                "responses": None if responses is None else dict(responses),
            }
        )
        path = f"/calendar/event-types/{int(event_type_id)}/bookings"
        return Booking.from_json(self._call("POST", path, body=body, retry_lost=True))

    def update_booking(
        self,
        event_type_id: int,
        booking_id: int,
        *,
        start_time: Instant | None = None,
        end_time: Instant | None = None,
        attendees: Attendees | None = None,
        timezone: str | None = None,
        title: str | None = None,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        hold_token: str | None = None,
        host_id: int | None = None,
    ) -> Booking:
        """Change only what is given; the answer is the API's reduced booking.

        ``hold_token``: a ``Hold``'s, to move the booking into the time it holds (consumed by
        the move); as with ``create_booking``, a token of no live hold holds nothing.
        ``host_id``: move the booking to that host (when free at the booking's time)."""
        body = without_none(
            {
                "startTime": _instant(start_time),
                "endTime": _instant(end_time),
                "attendees": None if attendees is None else _attendees(attendees),
                "timezone": timezone,
                "title": title,
                "description": description,
                "metadata": None if metadata is None else dict(metadata),
                "holdToken": hold_token,
                "hostId": host_id,
            }
        )
        path = f"/calendar/event-types/{int(event_type_id)}/bookings/{int(booking_id)}"
        return Booking.from_json(self._call("PUT", path, body=body))

    def cancel_booking(self, booking_id: int, *, reason: str | None = None) -> Cancellation:
        body = without_none({"reason": reason})
        path = f"/calendar/bookings/{int(booking_id)}"
        return Cancellation.from_json(self._call("DELETE", path, body=body))

    def hold_slot(
        self,
        event_type_id: int,
        start: Instant,
        end: Instant,
        *,
        timezone: str | None = None,
        ttl_seconds: int | None = None,
        host_id: int | None = None,
    ) -> Hold:
        """Hold ``start``–``end`` on the event type for ``ttl_seconds`` (1 to 600; the server's
        default is 120) while the booking's details are collected. Until the hold's
        ``expires_at`` the time is busy for everybody else (``availability`` leaves it out, other
        writes get ``SlotUnavailable`` with code ``slot_held``); book it with
        ``create_booking(…, hold_token=hold.hold_token)``, or free it with ``release_hold``.
        A time that cannot be held raises ``SlotUnavailable`` with ``suggested_slots``, as a
        create would. ``timezone``: the IANA zone of "the same day" for the suggestions (and
        of a time given without an offset).

        Not retried after a lost answer (429 and 503 are): a hold the server had placed before
        the answer was lost would meet the retry as busy time, so the retry would be refused
        (``slot_held``) by the caller's own hold, whose token was lost with the answer. Instead
        this raises ``CalendarUnreachable``; the time may then stay held until that hold
        expires (at most ``ttl_seconds``)."""
        body = without_none(
            {
                "startTime": _instant(start),
                "endTime": _instant(end),
                "timezone": timezone,
                "ttlSeconds": ttl_seconds,
                "hostId": host_id,
            }
        )
        path = f"/calendar/event-types/{int(event_type_id)}/holds"
        return Hold.from_json(self._call("POST", path, body=body))

    def release_hold(self, event_type_id: int, hold_id: int) -> ReleasedHold:
        """Free a live hold's time at once. An expired, consumed or released hold raises
        ``NotFound`` (there is nothing left to release). Not retried after a lost answer: the
        retry of a release that happened would be that ``NotFound``."""
        path = f"/calendar/event-types/{int(event_type_id)}/holds/{int(hold_id)}"
        return ReleasedHold.from_json(self._call("DELETE", path))

    # --- one request, with its retries ---------------------------------------------------------

    def _call(self, method: str, path: str, **options: Any) -> Any:
        """``_send``'s answer, read as JSON."""
        return self._send(method, path, **options).json()

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        retry_lost: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The request's answer below 400 (a 304 included), after the retries above."""
        for attempt in range(1, self.max_attempts + 1):
            last = attempt == self.max_attempts
            try:
                response = self._http.request(
                    method,
                    self.base_url + path,
                    params=params,
                    json=body,
                    headers={**self._auth_headers, **(headers or {})},
                )
            except httpx.TransportError as err:
                if not retry_lost or last:
                    raise CalendarUnreachable(f"{method} {path}: {err!r}") from err
                self._sleep(self._backoff(attempt))
                continue
            if response.status_code < 400:
                return response
            error = self._error(response)
            if response.status_code in RETRIED_STATUSES and not last:
                wait = self._backoff(attempt) if error.retry_after is None else error.retry_after
                if wait <= self.max_wait:
                    self._sleep(wait)
                    continue
            raise error
        raise AssertionError("unreachable")  # the loop returns or raises

    def _backoff(self, attempt: int) -> float:
        """0.5 s, 1 s, 2 s, … (at most ``max_wait``), each with up to half of it off at random
        so that many clients do not come back at once."""
        return min(self.max_wait, 0.5 * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)

    @staticmethod
    def _error(response: httpx.Response) -> CalendarApiError:
        try:
            envelope = response.json()
        except ValueError:
            envelope = None
        if isinstance(envelope, dict):
            message = str(envelope.get("message", ""))
            code = envelope.get("code")
            code = str(code) if code is not None else None
            suggested = _slots(envelope.get("suggestedSlots"))
        else:
            message, code, suggested = response.text[:200], None, []
        header = response.headers.get("Retry-After")
        try:
            retry_after = float(header) if header is not None else None
        except ValueError:
            retry_after = None
        return error_for(
            response.status_code, message, retry_after, code=code, suggested_slots=suggested
        )


def _slots(value: Any) -> list[Slot]:
    """An error's ``suggestedSlots`` as slots; what is not a well-formed slot is left out (a
    malformed suggestion must not hide the error it came with)."""
    slots = []
    for item in value if isinstance(value, list) else []:
        try:
            slots.append(Slot.from_json(item))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return slots
