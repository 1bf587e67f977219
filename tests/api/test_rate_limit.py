"""Rate limits: 60 requests per sliding minute per API key, 30 per address without a usable
key, shared through Redis by every process, and surviving a Redis outage."""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
import time_machine
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.conftest import backend_unavailable
from tests.redis_servers import own_redis_server
from tests.servers import MACHINE_REDIS, gunicorn

BOOKINGS = "/v1/api/calendar/bookings"
# How long a test keeps its Redis frozen at least while it waits for an answer.
FROZEN_FOR_AT_LEAST_S = 10


def get(client, headers=None, path=BOOKINGS, **environ):
    return client.get(path, headers=headers or {}, environ_overrides=environ)


def test_every_api_response_carries_the_limit_headers(client, tenant):
    first = get(client, tenant.headers())
    second = get(client, tenant.headers())
    assert first.headers["X-RateLimit-Limit"] == "60"
    assert (
        int(first.headers["X-RateLimit-Remaining"]),
        int(second.headers["X-RateLimit-Remaining"]),
    ) == (59, 58)
    assert int(first.headers["X-RateLimit-Reset"]) >= int(time.time())


def test_error_responses_carry_the_headers_too(client, tenant):
    response = get(client, tenant.headers("none"))
    assert response.status_code == 403 and response.headers["X-RateLimit-Limit"] == "60"


def test_retry_after_is_only_on_429(client, tenant):
    assert "Retry-After" not in get(client, tenant.headers()).headers
    assert "Retry-After" not in get(client, tenant.headers("none")).headers


@pytest.mark.parametrize(
    "method, path",
    [
        ("patch", BOOKINGS),
        ("get", f"{BOOKINGS}/99999999999"),
        ("get", f"{BOOKINGS}/abc"),
        ("post", "/v1/api/calendar/event-types/0/bookings"),
    ],
)
def test_agent_paths_that_match_no_operation_are_counted_too(client, tenant, method, path):
    response = getattr(client, method)(path, headers=tenant.headers())
    assert response.status_code in (404, 405) and response.is_json
    assert response.headers["X-RateLimit-Remaining"] == "59"
    assert get(client, tenant.headers()).headers["X-RateLimit-Remaining"] == "58"


def test_the_61st_request_in_a_minute_is_429(client, tenant):
    for _ in range(60):
        assert get(client, tenant.headers()).status_code == 200
    response = get(client, tenant.headers())
    assert response.status_code == 429
    assert response.json == {
        "statusCode": 429,
        "message": "Rate limit exceeded: 60 requests per minute",
        "code": "rate_limited",
    }
    assert 0 < int(response.headers["Retry-After"]) <= 60
    assert response.headers["X-RateLimit-Remaining"] == "0"


def test_retry_after_rounds_up_so_waiting_it_out_is_enough(make_app, tenants):
    """Flask-Limiter alone says ``Retry-After: 0`` in the last fraction of a second the window
    is still full; a client that waits that long is refused again."""
    app = make_app(RATE_LIMIT="1 per 2 seconds")
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()
    start = datetime(2031, 1, 6, 12, 0, 0, 500_000, tzinfo=UTC)
    with time_machine.travel(start, tick=False):
        assert get(client, tenant.headers()).status_code == 200
    with time_machine.travel(start + timedelta(seconds=1.8), tick=False) as clock:
        refused = get(client, tenant.headers())
        assert refused.status_code == 429
        assert refused.headers["Retry-After"] == "1"
        clock.shift(int(refused.headers["Retry-After"]))
        assert get(client, tenant.headers()).status_code == 200


def test_one_limit_spans_every_endpoint(client, tenant):
    for _ in range(30):
        get(client, tenant.headers())
        get(client, tenant.headers(), path=f"{BOOKINGS}/1")
    assert get(client, tenant.headers(), path="/v1/api/calendar/availability").status_code == 429


def test_another_key_is_not_slowed(client, tenant):
    for _ in range(61):
        get(client, tenant.headers())
    assert get(client, tenant.headers("without-canCancel")).status_code == 200


def test_requests_without_a_usable_key_are_limited_per_address(client, tenant):
    for _ in range(30):
        response = get(client, {"x-calendar-api-key": f"guess-{uuid.uuid4()}"})
        assert response.status_code == 401
    response = get(client, {"x-calendar-api-key": f"guess-{uuid.uuid4()}"})
    assert response.status_code == 429
    assert response.json["message"] == "Rate limit exceeded: 30 requests per minute"
    assert get(client, {}, REMOTE_ADDR="10.9.8.7").status_code == 401  # another address


def test_a_valid_key_is_not_slowed_by_guessing_from_its_address(client, tenant):
    for _ in range(31):
        get(client, {"x-calendar-api-key": "guess"})
    assert get(client, tenant.headers()).status_code == 200


def test_valid_key_requests_do_not_count_against_the_address(client, tenant):
    for _ in range(40):
        get(client, tenant.headers())
    assert get(client, {"x-calendar-api-key": "guess"}).status_code == 401


@pytest.mark.parametrize("key", ["expired", "inactive", "agency-level"])
def test_unusable_keys_count_against_the_address(client, tenant, key):
    for _ in range(30):
        get(client, tenant.headers(key))
    assert get(client, {}).status_code == 429


def test_documentation_is_not_limited(client):
    for _ in range(40):
        assert client.get("/v1/api/openapi.json").status_code == 200


def test_limit_is_configurable(make_app, tenants):
    app = make_app(RATE_LIMIT="5 per 10 seconds")
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()
    statuses = [get(client, tenant.headers()).status_code for _ in range(6)]
    assert statuses == [200] * 5 + [429]
    assert (
        get(client, tenant.headers()).json["message"]
        == "Rate limit exceeded: 5 requests per 10 seconds"
    )


# Shared by every process through Redis
@pytest.fixture(scope="session")
def machine_redis():
    try:
        redis.Redis.from_url(MACHINE_REDIS, socket_connect_timeout=2).ping()
    except redis.RedisError as err:
        backend_unavailable(f"Redis not reachable at {MACHINE_REDIS}: {err}")
    return MACHINE_REDIS


def fetch(url, headers):
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_processes_share_one_count_through_redis(database_url, machine_redis, tenant):
    # An hour's window: the split below cannot depend on how fast the requests are sent.
    env = {
        "REDIS_URL": machine_redis,
        "RATE_LIMIT": "60 per 1 hour",
        "RATELIMIT_KEY_PREFIX": f"test-{uuid.uuid4().hex}",
    }
    with (
        gunicorn(database_url, env=env) as first,
        gunicorn(database_url, env=env) as second,
    ):
        urls = [(first if i % 2 else second) + BOOKINGS for i in range(70)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda url: fetch(url, tenant.headers()), urls))
        statuses = [status for status, _ in results]
        assert statuses.count(200) == 60 and statuses.count(429) == 10
        assert all(0 < int(h["Retry-After"]) <= 3600 for status, h in results if status == 429)
        assert fetch(first + BOOKINGS, tenant.headers("without-canCancel"))[0] == 200  # other key


def test_the_window_slides_in_redis(make_app, tenants, machine_redis):
    app = make_app(
        REDIS_URL=machine_redis,
        RATELIMIT_KEY_PREFIX=f"test-{uuid.uuid4().hex}",
        RATE_LIMIT="2 per 1 second",
    )
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()
    assert [get(client, tenant.headers()).status_code for _ in range(2)] == [200, 200]
    refused = get(client, tenant.headers())
    assert refused.status_code == 429
    assert refused.json["message"] == "Rate limit exceeded: 2 requests per second"
    # Retry-After is whole seconds, rounded down: one more second is past the window for sure.
    time.sleep(int(refused.headers["Retry-After"]) + 1)
    assert get(client, tenant.headers()).status_code == 200


def test_counts_in_redis_give_exact_headers(make_app, tenants, machine_redis):
    app = make_app(
        REDIS_URL=machine_redis,
        RATELIMIT_KEY_PREFIX=f"test-{uuid.uuid4().hex}",
        RATE_LIMIT="3/minute",
    )
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()
    answers = [get(client, tenant.headers()) for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert [a.headers["X-RateLimit-Remaining"] for a in answers] == ["2", "1", "0", "0"]
    first_reset = int(answers[0].headers["X-RateLimit-Reset"])
    assert all(int(a.headers["X-RateLimit-Reset"]) == first_reset for a in answers)
    assert 1 <= int(answers[3].headers["Retry-After"]) <= 60


# A Redis outage
@pytest.fixture
def own_redis(tmp_path):
    """A Redis of the test's own on a free port, which the test may stop and start again."""
    with own_redis_server(tmp_path) as server:
        yield server


@pytest.mark.slow
def test_redis_outage_falls_back_to_memory_and_recovers(make_app, tenants, own_redis, caplog):
    app = make_app(REDIS_URL=own_redis.url)
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()

    assert get(client, tenant.headers()).status_code == 200
    assert own_redis.client.keys("*"), "the count should live in Redis"

    own_redis.stop()
    with caplog.at_level(logging.WARNING):
        responses = [get(client, tenant.headers()) for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert all("X-RateLimit-Limit" in r.headers for r in responses)
    assert "falling back to in-memory storage" in caplog.text

    # Limits still hold while Redis is away (in this process's memory).
    statuses = [get(client, tenant.headers()).status_code for _ in range(70)]
    assert 429 in statuses

    # Back after a short outage: Flask-Limiter re-checks a dead storage with a backoff (1, 2,
    # 4, … 32 s between checks), so counting returns to Redis within the next check or two.
    own_redis.start()
    with caplog.at_level(logging.INFO):
        for _ in polls(within_seconds=40):
            get(client, {"x-calendar-api-key": "guess"}, REMOTE_ADDR="10.1.1.1")
            if own_redis.client.keys("*"):
                break
    assert own_redis.client.keys("*"), "counting should return to Redis"
    assert "Rate limit storage recovered" in caplog.text


def stopped(pid: int) -> bool:
    """Whether a process is stopped (by SIGSTOP), as the kernel says."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.parametrize("connected", [False, True], ids=["new-connection", "open-connection"])
@pytest.mark.slow
def test_an_unreachable_redis_cannot_stall_requests(make_app, tenants, own_redis, connected):
    """A Redis that accepts connections but never answers (frozen with SIGSTOP: the kernel
    still completes TCP handshakes, as for a hung host) delays no request until it answers:
    the request is answered by the in-memory fallback while Redis is still frozen, whether
    the limiter has yet to connect or holds an open connection."""
    app = make_app(REDIS_URL=own_redis.url)
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()
    if connected:
        assert get(client, tenant.headers()).headers["X-RateLimit-Remaining"] == "59"
        assert own_redis.client.keys("*"), "the count should live in Redis"

    answers = []
    request = threading.Thread(
        target=lambda: answers.append(get(client, tenant.headers())), daemon=True
    )
    own_redis.freeze()
    try:
        # A signal is delivered in its own time: wait (bounded) until it has been.
        assert any(stopped(own_redis.process.pid) for _ in polls(within_seconds=5, every=0.01))
        with pytest.raises(redis.TimeoutError):  # it really does not answer
            redis.Redis(port=own_redis.port, socket_timeout=0.5, retry=Retry(NoBackoff(), 0)).ping()
        request.start()
        # Bounds the test, not the request: Redis stays frozen until the request is answered
        # or this wait is over, so an answer here is one given while Redis is frozen.
        request.join(timeout=FROZEN_FOR_AT_LEAST_S)
        answered_while_frozen = not request.is_alive()
        assert stopped(own_redis.process.pid)
    finally:
        own_redis.thaw()
        if request.ident is not None:  # started: let it finish before the app is torn down
            request.join(timeout=30)
    assert answered_while_frozen, f"the request waited for the frozen Redis ({answers})"
    (answer,) = answers
    assert answer.status_code == 200, answer.json
    # Counted afresh in this process's memory, not in Redis (where one request is counted
    # already when connected): the fallback answered.
    assert answer.headers["X-RateLimit-Limit"] == "60"
    assert answer.headers["X-RateLimit-Remaining"] == "59"


def polls(within_seconds: float, every: float = 0.2):
    """Yields until ``within_seconds`` have passed, pausing ``every`` seconds in between: the
    bound of a wait for something that happens on its own time."""
    deadline = time.monotonic() + within_seconds
    while True:
        yield
        if time.monotonic() >= deadline:
            return
        time.sleep(every)
