"""The typed client (``app.client``) against the live API on loopback: every operation, every
error type with its code, the slots suggested instead of a refused time, slot holds, 429s and
503s retried within bounds, a create whose answer was lost retried into one booking, and a
hold whose answer was lost not retried."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.client import (
    AuthenticationFailed,
    AvailabilityDay,
    CalendarClient,
    CalendarUnreachable,
    Hold,
    InvalidRequest,
    NewAttendee,
    NotFound,
    PermissionDenied,
    RateLimited,
    ReleasedHold,
    ServiceUnavailable,
    Slot,
    SlotUnavailable,
)
from app.client.errors import error_for
from tests.factories import next_monday, ny
from tests.live_api import live_api
from tests.lossy_proxy import first_create_lost, lossy_proxy
from tests.servers import free_port, gunicorn

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # bookings on next Monday, in New York time
    pytest.mark.one_shifted_clock,  # retries and waits over HTTP; the dates only pick slots
]

MONDAY = next_monday()
PAT = NewAttendee(email="pat@example.test", name="Pat Doe")


@pytest.fixture
def tenant(live):
    return live.tenant()


@pytest.fixture
def client(live, tenant):
    with CalendarClient(live.base_url, tenant.keys["all"]) as calendar:
        yield calendar


def book(client, tenant, hour: int, **fields):
    return client.create_booking(
        tenant.event_types["Cleaning"],
        start_time=ny(MONDAY, hour),
        end_time=ny(MONDAY, hour, 30),
        attendees=[PAT],
        **fields,
    )


def slots_at(*starts: tuple[int, int]) -> list[Slot]:
    """Cleaning slots (30 minutes) starting at these New York (hour, minute)s of MONDAY."""
    return [Slot(ny(MONDAY, h, m), ny(MONDAY, h, m) + timedelta(minutes=30)) for h, m in starts]


# The open Cleaning slots nearest to 10:00 when 10:00-10:30 is taken (with its 10 minutes'
# buffer after, up to 10:40): 9:30 and 10:30 would overlap it; 9:00 and 11:00 are as near,
# the earlier first.
NEAREST_TO_TEN = slots_at((9, 0), (11, 0), (11, 30), (12, 0), (12, 30))


def test_availability_comes_as_typed_days_of_aware_slots(client, tenant):
    days = client.availability(
        ny(MONDAY, 0), ny(MONDAY, 23), event_type_id=tenant.event_types["Cleaning"]
    )
    assert all(isinstance(day, AvailabilityDay) for day in days)
    slots = [slot for day in days for slot in day.slots]
    assert slots and slots[0].start == ny(MONDAY, 9)
    assert all(s.end - s.start == timedelta(minutes=30) for s in slots)


def test_a_repeated_availability_question_is_answered_304_and_returns_the_kept_answer(live, tenant):
    seen: list[tuple[int, str | None]] = []
    http = httpx.Client(
        timeout=10,
        event_hooks={
            "response": [
                lambda r: seen.append((r.status_code, r.request.headers.get("If-None-Match")))
            ]
        },
    )
    with CalendarClient(live.base_url, tenant.keys["all"], http=http) as calendar:
        ask = lambda: calendar.availability(  # noqa: E731
            ny(MONDAY, 0), ny(MONDAY, 23), event_type_id=tenant.event_types["Cleaning"]
        )
        first = ask()
        again = ask()
        assert again == first
        assert [status for status, _ in seen] == [200, 304]
        assert seen[0][1] is None and seen[1][1].startswith('W/"')
        # A booking changes the calendar: the next question gets the new answer.
        book(calendar, tenant, 10)
        after = ask()
        assert seen[-1][0] == 200
        assert ny(MONDAY, 10) not in [slot.start for day in after for slot in day.slots]
    http.close()


def test_a_created_booking_is_pending_with_a_uid_and_can_be_read_back(client, tenant):
    created = book(client, tenant, 10, title="Cleaning", metadata={"source": "client"})
    assert (created.status, created.start_time, created.end_time) == (
        "pending",
        ny(MONDAY, 10),
        ny(MONDAY, 10, 30),
    )
    assert created.uid and created.metadata == {"source": "client"}
    assert created.attendees[0].email == PAT.email and created.attendees[0].name == "Pat Doe"
    fetched = client.get_booking(created.id)
    assert (fetched.id, fetched.start_time) == (created.id, created.start_time)


def test_bookings_are_listed_with_their_total(client, tenant):
    first, second = book(client, tenant, 10), book(client, tenant, 11)
    page = client.list_bookings(email=PAT.email, limit=1)
    assert (page.total, page.limit, page.offset, len(page.bookings)) == (2, 1, 0, 1)
    everything = client.list_bookings(start_date=ny(MONDAY, 0), end_date=ny(MONDAY, 23))
    assert {b.id for b in everything.bookings} == {first.id, second.id}


def test_an_update_moves_the_booking_and_answers_the_reduced_form(client, tenant):
    created = book(client, tenant, 10)
    moved = client.update_booking(
        tenant.event_types["Cleaning"],
        created.id,
        start_time=ny(MONDAY, 14),
        end_time=ny(MONDAY, 14, 30),
    )
    assert (moved.id, moved.start_time, moved.end_time) == (
        created.id,
        ny(MONDAY, 14),
        ny(MONDAY, 14, 30),
    )
    assert moved.uid is None  # not part of the update's answer
    assert client.get_booking(created.id).start_time == ny(MONDAY, 14)


def test_a_cancel_answers_the_cancellation_with_its_reason(client, tenant):
    created = book(client, tenant, 10)
    cancelled = client.cancel_booking(created.id, reason="Patient is ill")
    assert (cancelled.id, cancelled.status, cancelled.cancellation_reason) == (
        created.id,
        "cancelled",
        "Patient is ill",
    )
    assert cancelled.cancelled_at.tzinfo is not None


def test_the_same_idempotency_key_gives_back_the_same_booking(client, tenant):
    first = book(client, tenant, 10, idempotency_key="agent-run-7")
    again = book(client, tenant, 10, idempotency_key="agent-run-7")
    assert again.id == first.id
    assert client.list_bookings(email=PAT.email).total == 1


def test_a_taken_slot_is_a_slot_unavailable_error_with_the_nearest_open_slots(client, tenant):
    book(client, tenant, 10)
    with pytest.raises(SlotUnavailable) as refused:
        book(client, tenant, 10)
    assert (refused.value.status_code, refused.value.message, refused.value.code) == (
        400,
        "Time slot conflicts with an existing booking",
        "slot_taken",
    )
    assert refused.value.suggested_slots == NEAREST_TO_TEN
    assert all(slot.start.tzinfo is not None for slot in refused.value.suggested_slots)


def test_a_time_outside_the_hours_is_slot_unavailable_with_the_days_first_slots(client, tenant):
    with pytest.raises(SlotUnavailable) as refused:
        book(client, tenant, 7)
    assert (refused.value.message, refused.value.code) == (
        "Time slot is outside available hours",
        "outside_hours",
    )
    assert refused.value.suggested_slots == slots_at((9, 0), (9, 30), (10, 0), (10, 30), (11, 0))


def test_a_move_into_a_taken_slot_gets_suggestions_too(client, tenant):
    book(client, tenant, 10)
    later = book(client, tenant, 14)
    with pytest.raises(SlotUnavailable) as refused:
        client.update_booking(
            tenant.event_types["Cleaning"],
            later.id,
            start_time=ny(MONDAY, 10),
            end_time=ny(MONDAY, 10, 30),
        )
    assert refused.value.code == "slot_taken"
    assert refused.value.suggested_slots == NEAREST_TO_TEN


def test_a_400_without_a_code_is_told_apart_by_its_message():
    """From a server older than codes: the conflicts' message, no code, no suggestions."""
    taken = error_for(400, "Time slot conflicts with an existing booking", None)
    other = error_for(400, "endTime must be after startTime", None)
    assert isinstance(taken, SlotUnavailable) and taken.code is None
    assert taken.suggested_slots == []
    assert type(other) is InvalidRequest and other.code is None


def test_an_invalid_request_carries_the_api_message(client, tenant):
    with pytest.raises(InvalidRequest) as refused:
        client.create_booking(
            tenant.event_types["Cleaning"],
            start_time=ny(MONDAY, 10),
            end_time=ny(MONDAY, 9),
            attendees=[PAT],
        )
    assert not isinstance(refused.value, SlotUnavailable)
    assert refused.value.message == "endTime must be after startTime"
    assert refused.value.code == "invalid_time_range"


def test_a_reused_idempotency_key_is_an_invalid_request_with_its_code(client, tenant):
    book(client, tenant, 10, idempotency_key="agent-run-8")
    with pytest.raises(InvalidRequest) as refused:
        book(client, tenant, 11, idempotency_key="agent-run-8")
    assert not isinstance(refused.value, SlotUnavailable)
    assert refused.value.code == "idempotency_mismatch"


def test_a_key_without_the_permission_names_it(live, tenant):
    calendar = CalendarClient(live.base_url, tenant.keys["without-canBook"])
    with calendar, pytest.raises(PermissionDenied) as refused:
        book(calendar, tenant, 10)
    assert refused.value.status_code == 403
    assert refused.value.permission == "canBook"
    assert refused.value.message == "API key does not have 'canBook' permission"
    assert refused.value.code == "permission_denied"


@pytest.mark.parametrize(
    "key, message, code",
    [
        ("inactive", "Invalid or inactive API key", "invalid_api_key"),
        ("expired", "API key has expired", "api_key_expired"),
    ],
)
def test_an_unusable_key_is_an_authentication_error(live, tenant, key, message, code):
    calendar = CalendarClient(live.base_url, tenant.keys[key])
    with calendar, pytest.raises(AuthenticationFailed) as refused:
        calendar.list_bookings()
    assert (refused.value.status_code, refused.value.message) == (401, message)
    assert refused.value.code == code


def test_a_missing_booking_is_not_found(client):
    with pytest.raises(NotFound) as refused:
        client.get_booking(999_999)
    assert (refused.value.status_code, refused.value.code) == (404, "not_found")


def test_a_naive_datetime_is_refused_before_sending(client, tenant):
    with pytest.raises(ValueError, match="no timezone"):
        client.availability(datetime(2030, 1, 1), datetime(2030, 1, 2))


def test_a_429_is_waited_out_as_retry_after_says_and_then_succeeds(migrated_postgres_database):
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    with live_api(migrated_postgres_database(), RATE_LIMIT="2 per 2 seconds") as live:
        tenant = live.tenant()
        with CalendarClient(live.base_url, tenant.keys["all"], sleep=sleep) as calendar:
            pages = [calendar.list_bookings() for _ in range(3)]
            with (
                CalendarClient(live.base_url, tenant.keys["all"], max_attempts=1) as impatient,
                pytest.raises(RateLimited) as refused,
            ):
                for _ in range(3):
                    impatient.list_bookings()
    assert [page.total for page in pages] == [0, 0, 0]
    assert len(waits) == 1 and 1 <= waits[0] <= 2  # the server's Retry-After
    assert refused.value.status_code == 429 and refused.value.retry_after >= 1
    assert refused.value.code == "rate_limited"


def test_a_wait_longer_than_allowed_is_not_waited(migrated_postgres_database):
    with live_api(migrated_postgres_database(), RATE_LIMIT="1/minute") as live:
        tenant = live.tenant()
        with CalendarClient(live.base_url, tenant.keys["all"], max_wait=5) as calendar:
            calendar.list_bookings()
            started = time.monotonic()
            with pytest.raises(RateLimited) as refused:
                calendar.list_bookings()
            refused_after = time.monotonic() - started  # not the server's stop below
    assert refused.value.retry_after > 5
    assert refused_after < 5


def test_a_503_is_retried_then_raised_when_the_database_stays_away():
    dead = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    with gunicorn(dead, workers=1, env={"REDIS_URL": ""}) as base:
        calendar = CalendarClient(f"{base}/v1/api", "cbk_whatever", max_attempts=2)
        started = time.monotonic()
        with calendar, pytest.raises(ServiceUnavailable) as refused:
            calendar.list_bookings()
    assert refused.value.status_code == 503 and refused.value.retry_after == 1
    assert refused.value.code == "service_unavailable"
    assert time.monotonic() - started >= 1  # it waited once, as told


def test_no_server_at_all_is_calendar_unreachable():
    with (
        CalendarClient(
            f"http://127.0.0.1:{free_port()}/v1/api", "cbk_x", max_attempts=2, sleep=lambda s: None
        ) as calendar,
        pytest.raises(CalendarUnreachable),
    ):
        calendar.list_bookings()


def test_a_create_whose_answer_was_lost_is_retried_into_one_booking(live, tenant):
    """The server committed the booking, then the connection dropped before the answer came
    back; the client's retry carries the same idempotency key and gets that booking."""
    with lossy_proxy(live.port, first_create_lost()) as proxy:
        http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=10)
        with CalendarClient(f"{proxy.url}/v1/api", tenant.keys["all"], http=http) as calendar:
            created = book(calendar, tenant, 10)
        http.close()
    assert len(proxy.lost) == 1  # the first answer was lost, after the server had answered 201
    with CalendarClient(live.base_url, tenant.keys["all"]) as direct:
        page = direct.list_bookings(email=PAT.email)
    assert page.total == 1 and page.bookings[0].id == created.id


def test_every_create_carries_an_idempotency_key_of_its_own(live, tenant):
    sent: list[bytes] = []
    http = httpx.Client(
        event_hooks={"request": [lambda request: sent.append(request.read())]}, timeout=10
    )
    with CalendarClient(live.base_url, tenant.keys["all"], http=http) as calendar:
        book(calendar, tenant, 10)
        book(calendar, tenant, 11)
    http.close()
    keys = [json.loads(body)["idempotencyKey"] for body in sent]
    assert len(set(keys)) == 2 and all(keys)


# --- slot holds ----------------------------------------------------------------------------


def hold(client, tenant, hour: int, **options) -> Hold:
    return client.hold_slot(
        tenant.event_types["Cleaning"], ny(MONDAY, hour), ny(MONDAY, hour, 30), **options
    )


def open_starts(client, tenant) -> list[datetime]:
    days = client.availability(
        ny(MONDAY, 0), ny(MONDAY, 23), event_type_id=tenant.event_types["Cleaning"]
    )
    return [slot.start for day in days for slot in day.slots]


def test_a_hold_answers_its_token_and_expiry(client, tenant):
    before = datetime.now(UTC)
    held = hold(client, tenant, 10, ttl_seconds=30, timezone="America/New_York")
    after = datetime.now(UTC)
    assert isinstance(held, Hold) and held.id > 0
    assert (held.event_type_id, held.start_time, held.end_time) == (
        tenant.event_types["Cleaning"],
        ny(MONDAY, 10),
        ny(MONDAY, 10, 30),
    )
    assert held.hold_token.startswith("hold_")
    # 30 s from the server's now, rounded up to the second.
    assert before + timedelta(seconds=29) <= held.expires_at <= after + timedelta(seconds=31)
    default = hold(client, tenant, 14)
    assert timedelta(seconds=115) <= default.expires_at - after <= timedelta(seconds=125)


def test_a_hold_longer_than_allowed_is_an_invalid_request(client, tenant):
    with pytest.raises(InvalidRequest) as refused:
        hold(client, tenant, 10, ttl_seconds=601)
    assert not isinstance(refused.value, SlotUnavailable)
    assert refused.value.code == "invalid_request"


def test_a_held_slot_is_refused_to_others_and_booked_once_with_its_token(live, client, tenant):
    held = hold(client, tenant, 10)
    assert ny(MONDAY, 10) not in open_starts(client, tenant)
    with (
        CalendarClient(live.base_url, tenant.keys["without-canCancel"]) as other,
        pytest.raises(SlotUnavailable) as refused,
    ):
        book(other, tenant, 10)
    assert (refused.value.message, refused.value.code) == (
        "Time slot is held for another booking",
        "slot_held",
    )
    assert refused.value.suggested_slots == NEAREST_TO_TEN
    with pytest.raises(SlotUnavailable) as without_token:
        book(client, tenant, 10)  # the key that holds it, too, needs the token
    assert without_token.value.code == "slot_held"

    booked = book(client, tenant, 10, hold_token=held.hold_token)
    assert (booked.status, booked.start_time) == ("pending", ny(MONDAY, 10))
    with pytest.raises(SlotUnavailable) as again:
        book(client, tenant, 10, hold_token=held.hold_token)  # consumed: it holds nothing
    assert again.value.code == "slot_taken"
    page = client.list_bookings(start_date=ny(MONDAY, 0), end_date=ny(MONDAY, 23))
    assert [b.id for b in page.bookings] == [booked.id]


def test_a_booking_moves_into_a_held_slot_with_the_token(client, tenant):
    booking = book(client, tenant, 10)
    held = hold(client, tenant, 14)
    cleaning = tenant.event_types["Cleaning"]
    with pytest.raises(SlotUnavailable) as refused:
        client.update_booking(
            cleaning, booking.id, start_time=ny(MONDAY, 14), end_time=ny(MONDAY, 14, 30)
        )
    assert refused.value.code == "slot_held"
    moved = client.update_booking(
        cleaning,
        booking.id,
        start_time=ny(MONDAY, 14),
        end_time=ny(MONDAY, 14, 30),
        hold_token=held.hold_token,
    )
    assert moved.start_time == ny(MONDAY, 14)
    with pytest.raises(NotFound):
        client.release_hold(cleaning, held.id)  # consumed by the move


def test_a_released_hold_frees_its_time_at_once(live, client, tenant):
    held = hold(client, tenant, 10)
    released = client.release_hold(tenant.event_types["Cleaning"], held.id)
    assert isinstance(released, ReleasedHold)
    assert (released.id, released.status) == (held.id, "released")
    assert released.released_at.tzinfo is not None
    assert ny(MONDAY, 10) in open_starts(client, tenant)
    with CalendarClient(live.base_url, tenant.keys["without-canCancel"]) as other:
        assert book(other, tenant, 10).start_time == ny(MONDAY, 10)
    with pytest.raises(NotFound) as refused:
        client.release_hold(tenant.event_types["Cleaning"], held.id)
    assert (refused.value.message, refused.value.code) == ("Hold not found", "not_found")


def test_a_time_that_cannot_be_held_is_refused_like_a_create(client, tenant):
    book(client, tenant, 10)
    with pytest.raises(SlotUnavailable) as refused:
        hold(client, tenant, 10)
    assert refused.value.code == "slot_taken"
    assert refused.value.suggested_slots == NEAREST_TO_TEN


def test_a_hold_whose_answer_was_lost_is_not_retried(live, tenant):
    """The server placed the hold, then the answer was lost: a retry would be refused by that
    very hold (slot_held), whose token went with the answer, so the client does not retry."""
    posts: list[bytes] = []
    lose_first = first_create_lost()

    def lose(request: bytes) -> bool:
        if request.startswith(b"POST"):
            posts.append(request)
        return lose_first(request)

    with lossy_proxy(live.port, lose) as proxy:
        http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=10)
        with (
            CalendarClient(f"{proxy.url}/v1/api", tenant.keys["all"], http=http) as calendar,
            pytest.raises(CalendarUnreachable),
        ):
            hold(calendar, tenant, 10)
        http.close()
    assert len(posts) == 1 and len(proxy.lost) == 1
    with (
        CalendarClient(live.base_url, tenant.keys["all"]) as direct,
        pytest.raises(SlotUnavailable) as refused,
    ):
        hold(direct, tenant, 10)
    assert refused.value.code == "slot_held"  # what a retry would have met


def test_the_event_types_are_typed_with_their_questions_and_answers_are_sent(live):
    asking = live.tenant(
        eventTypes=[
            {
                "name": "Intake",
                "duration": 30,
                "questions": [
                    {"key": "dob", "label": "Date of birth", "type": "text", "required": True}
                ],
            }
        ]
    )
    with CalendarClient(live.base_url, asking.keys["all"]) as calendar:
        (intake,) = calendar.list_event_types()
        assert (intake.name, intake.duration, intake.slot_interval) == ("Intake", 30, 30)
        assert intake.timezone == "America/New_York" and intake.assignment == "single"
        assert intake.questions["required"] == ["dob"]
        with pytest.raises(InvalidRequest) as refused:
            calendar.create_booking(
                intake.id,
                start_time=ny(MONDAY, 9),
                end_time=ny(MONDAY, 9, 30),
                attendees=[PAT],
            )
        assert refused.value.code == "invalid_responses"
        booked = calendar.create_booking(
            intake.id,
            start_time=ny(MONDAY, 9),
            end_time=ny(MONDAY, 9, 30),
            attendees=[PAT],
            responses={"dob": "1980-02-01"},
        )
    assert booked.responses == {"dob": "1980-02-01"}
