"""Rate limits: 60 requests per sliding minute per API key, 30 per address without a usable
key, shared through Redis by every process, and surviving a Redis outage."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from tests.conftest import backend_unavailable
from tests.servers import free_port, gunicorn

BOOKINGS = "/v1/api/calendar/bookings"
MACHINE_REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


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
    }
    assert 0 < int(response.headers["Retry-After"]) <= 60
    assert response.headers["X-RateLimit-Remaining"] == "0"


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
    env = {
        "REDIS_URL": machine_redis,
        "RATE_LIMIT": "60 per 10 seconds",
        "RATELIMIT_KEY_PREFIX": f"test-{uuid.uuid4().hex}",
    }
    with (
        gunicorn(database_url, threads=4, env=env) as first,
        gunicorn(database_url, threads=4, env=env) as second,
    ):
        urls = [(first if i % 2 else second) + BOOKINGS for i in range(70)]
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(lambda url: fetch(url, tenant.headers()), urls))
        assert time.monotonic() - started < 10, "sending took longer than the window"
        statuses = [status for status, _ in results]
        assert statuses.count(200) == 60 and statuses.count(429) == 10
        assert all(0 < int(h["Retry-After"]) <= 10 for status, h in results if status == 429)

        assert fetch(first + BOOKINGS, tenant.headers("without-canCancel"))[0] == 200  # other key
        time.sleep(10.5)  # the window slides past the burst
        assert fetch(second + BOOKINGS, tenant.headers())[0] == 200


# A Redis outage
@pytest.fixture
def own_redis(tmp_path):
    """A Redis of the test's own on a free port, which the test may stop and start again."""
    binary = shutil.which("redis-server")
    if binary is None:
        backend_unavailable("redis-server is not installed")
    port = free_port()

    def start():
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(tmp_path),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                return process
            except redis.ConnectionError:
                time.sleep(0.05)
        raise TimeoutError("own redis did not start")

    state = {"process": start()}

    class Handle:
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis(port=port)

        def stop(self):
            state["process"].terminate()
            state["process"].wait(timeout=10)

        def start(self):
            state["process"] = start()

    yield Handle()
    if state["process"].poll() is None:
        state["process"].terminate()
        state["process"].wait(timeout=10)


def test_redis_outage_falls_back_to_memory_and_recovers(make_app, tenants, own_redis, caplog):
    app = make_app(REDIS_URL=own_redis.url)
    with app.app_context():
        tenant = tenants.create()
    client = app.test_client()

    assert get(client, tenant.headers()).status_code == 200
    assert own_redis.client.keys("*"), "the count should live in Redis"

    own_redis.stop()
    with caplog.at_level(logging.WARNING):
        started = time.monotonic()
        responses = [get(client, tenant.headers()) for _ in range(5)]
        elapsed = time.monotonic() - started
    assert [r.status_code for r in responses] == [200] * 5
    assert all("X-RateLimit-Limit" in r.headers for r in responses)
    assert "falling back to in-memory storage" in caplog.text
    assert elapsed < 5, "an unreachable Redis must not stall requests"

    # Limits still hold while Redis is away (in this process's memory).
    statuses = [get(client, tenant.headers()).status_code for _ in range(70)]
    assert 429 in statuses

    # Flask-Limiter re-checks a dead storage with exponential backoff (1, 2, 4, … 32 s).
    own_redis.start()
    deadline = time.monotonic() + 45
    with caplog.at_level(logging.INFO):
        while time.monotonic() < deadline and not own_redis.client.keys("*"):
            get(client, {"x-calendar-api-key": "guess"}, REMOTE_ADDR="10.1.1.1")
            time.sleep(0.2)
    assert own_redis.client.keys("*"), "counting should return to Redis"
    assert "Rate limit storage recovered" in caplog.text
