"""API keys remembered per process for a second (``app.api.key_cache``): most requests
authenticate without SQL, yet a deactivation takes effect within a second in every process
and expiry at its instant."""

from __future__ import annotations

import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
import time_machine
from sqlalchemy import event, select

from app.api import key_cache
from app.extensions import db
from app.models import ApiKey
from app.models.types import utcnow
from tests.factories import book_through_api, next_monday, ny
from tests.servers import gunicorn, status_of

BOOKINGS = "/v1/api/calendar/bookings"


@contextmanager
def statements_seen():
    seen: list[str] = []

    def record(conn, cursor, statement, *args):
        seen.append(statement)

    engine = db.engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def key_named(name: str) -> ApiKey:
    return db.session.scalar(select(ApiKey).where(ApiKey.name == name))


class CacheClock:
    """The cache's clock (``time.monotonic`` in ``app.api.key_cache``), moved by the
    test: how old a kept key is does not depend on how long the requests take."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def cache_clock(monkeypatch) -> CacheClock:
    clock = CacheClock()
    monkeypatch.setattr(key_cache, "time", clock)
    return clock


def test_a_key_used_again_within_a_second_is_not_read_again(client, tenant, cache_clock):
    assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    cache_clock.now += 0.999
    with statements_seen() as seen:
        assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    assert seen and not [s for s in seen if "api_keys" in s], seen


def test_a_kept_key_is_read_again_after_a_second(client, tenant, cache_clock):
    assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    cache_clock.now += 1.0
    with statements_seen() as seen:
        assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    assert [s for s in seen if "FROM api_keys" in s], seen


def test_a_change_in_this_process_is_seen_at_once(client, tenant):
    assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    key_named("all").permissions = ["canBook"]
    db.session.commit()
    response = client.get(BOOKINGS, headers=tenant.headers())
    assert response.status_code == 403


def test_a_kept_key_expires_at_its_instant(client, tenant):
    key = key_named("all")
    key.expires_at = utcnow().replace(microsecond=0) + timedelta(seconds=30)
    db.session.commit()
    expiry = key.expires_at
    with time_machine.travel(expiry - timedelta(milliseconds=200), tick=False):
        assert client.get(BOOKINGS, headers=tenant.headers()).status_code == 200
    with time_machine.travel(expiry, tick=False):
        response = client.get(BOOKINGS, headers=tenant.headers())
    assert response.status_code == 401
    assert response.json["message"] == "API key has expired"


def test_the_cache_can_be_turned_off(make_app, tenants):
    app = make_app(API_KEY_CACHE_SECONDS=0)
    with app.app_context():
        tenant = tenants.create()
        client = app.test_client()
        client.get(BOOKINGS, headers=tenant.headers())
        with statements_seen() as seen:
            client.get(BOOKINGS, headers=tenant.headers())
    assert [s for s in seen if "FROM api_keys" in s], seen


@pytest.mark.slow
def test_a_key_deactivated_elsewhere_is_refused_within_a_second_by_every_process(
    database_url, tenant
):
    plain = tenant.keys["all"]
    with gunicorn(database_url, workers=2) as first, gunicorn(database_url) as second:
        urls = [first + BOOKINGS, second + BOOKINGS]
        # Every worker process of both servers answers (and keeps the key) many times over.
        assert {status_of(url, plain) for url in urls * 20} == {200}
        key = key_named("all")
        key.active = False
        db.session.commit()
        deactivated = time.monotonic()
        time.sleep(1.0)
        statuses = {status_of(url, plain) for url in urls * 20}
        elapsed = time.monotonic() - deactivated
    assert statuses == {401}, f"still accepted {elapsed:.2f} s after the deactivation"


@pytest.mark.date_sensitive
def test_writes_of_bookings_do_not_make_the_process_forget_keys(client, tenant):
    assert book_through_api(client, tenant, ny(next_monday(), 10)).status_code == 201
    with statements_seen() as seen:
        assert book_through_api(client, tenant, ny(next_monday(), 11)).status_code == 201
    assert not [s for s in seen if "FROM api_keys" in s], seen
