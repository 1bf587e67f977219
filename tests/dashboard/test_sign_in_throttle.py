"""Sign-in throttling slows the guesser and never locks the owner out: failures are counted per
address, per address and account, and per account (a much higher ceiling, against guessing
spread over many addresses); the right password from an address that has not been failing is
always checked."""

from __future__ import annotations

import os
import re
import uuid

import httpx
import pytest

from tests.dashboard_users import PASSWORD, csrf_token, owner_email
from tests.servers import MACHINE_REDIS, gunicorn, migrate_and_run_demo


def client_at(app, address: str):
    """A browser at ``address`` (loopback addresses: only the WSGI environ says them)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return client


def attempt(client, email: str, password: str) -> int:
    token = csrf_token(client, "/login")
    data = {"email": email, "password": password, "csrf_token": token}
    return client.post("/login", data=data).status_code


def test_a_guesser_is_refused_after_five_failures_on_one_account(app, tenant):
    guesser = client_at(app, "127.0.0.2")
    owner = owner_email(tenant)
    assert [attempt(guesser, owner, "wrong") for _ in range(5)] == [200] * 5
    assert attempt(guesser, owner, "wrong") == 429
    assert attempt(guesser, owner, PASSWORD) == 429  # not even checked


def test_the_owner_signs_in_from_elsewhere_while_a_guesser_is_refused(app, tenant):
    guesser, home = client_at(app, "127.0.0.2"), client_at(app, "127.0.0.3")
    owner = owner_email(tenant)
    for _ in range(6):
        attempt(guesser, owner, "wrong")
    assert attempt(guesser, owner, "wrong") == 429
    assert attempt(home, owner, PASSWORD) == 302


def test_a_guesser_at_many_accounts_is_refused_on_every_account(app, tenants):
    guesser = client_at(app, "127.0.0.2")
    for n in range(20):
        attempt(guesser, f"nobody{n}@example.test", "wrong")
    other = owner_email(tenants.create())
    assert attempt(guesser, other, PASSWORD) == 429
    assert attempt(client_at(app, "127.0.0.3"), other, PASSWORD) == 302


@pytest.fixture
def low_account_ceiling(make_app):
    """An app whose per-account ceiling is 6 failures an hour, so a spread guess reaches it."""
    app = make_app(SIGN_IN_LIMIT_PER_ACCOUNT="6/hour")
    with app.app_context():
        yield app


def test_over_the_account_ceiling_failing_addresses_are_refused(low_account_ceiling, tenants):
    app = low_account_ceiling
    owner = owner_email(tenants.create())
    spread = [client_at(app, f"127.0.1.{n}") for n in range(1, 7)]
    assert [attempt(guesser, owner, "wrong") for guesser in spread] == [200] * 6
    assert attempt(spread[0], owner, PASSWORD) == 429


def test_over_the_account_ceiling_a_fresh_address_with_the_right_password_gets_in(
    low_account_ceiling, tenants
):
    app = low_account_ceiling
    owner = owner_email(tenants.create())
    for n in range(1, 7):
        attempt(client_at(app, f"127.0.1.{n}"), owner, "wrong")
    assert attempt(client_at(app, "127.0.2.1"), owner, PASSWORD) == 302


def test_over_the_account_ceiling_a_fresh_address_gets_one_guess(low_account_ceiling, tenants):
    app = low_account_ceiling
    owner = owner_email(tenants.create())
    for n in range(1, 7):
        attempt(client_at(app, f"127.0.1.{n}"), owner, "wrong")
    newcomer = client_at(app, "127.0.2.2")
    assert attempt(newcomer, owner, "wrong") == 200
    assert attempt(newcomer, owner, PASSWORD) == 429


def test_failures_on_other_accounts_do_not_count_against_the_owners_ceiling(
    low_account_ceiling, tenants
):
    app = low_account_ceiling
    owner = owner_email(tenants.create())
    for n in range(1, 7):
        attempt(client_at(app, f"127.0.1.{n}"), f"someone{n}@example.test", "wrong")
    assert attempt(client_at(app, "127.0.1.1"), owner, PASSWORD) == 302


@pytest.mark.slow
def test_over_real_http_the_owner_gets_in_while_another_address_is_refused(postgres_database):
    """gunicorn (two workers sharing the counts in Redis), clients on two loopback addresses."""
    database_url = postgres_database()
    demo = migrate_and_run_demo({**os.environ, "DATABASE_URL": database_url, "SECRET_KEY": "t"})
    with gunicorn(database_url, workers=2) as base:
        guesser = [sign_in_over_http(base, "127.0.0.2", demo.email, "wrong") for _ in range(6)]
        refused = sign_in_over_http(base, "127.0.0.2", demo.email, demo.password)
        owner = sign_in_over_http(base, "127.0.0.3", demo.email, demo.password)
    assert guesser == [200] * 5 + [429]
    assert refused == 429
    assert owner == 302


def sign_in_over_http(base: str, source: str, email: str, password: str) -> int:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=base, transport=transport, timeout=10) as browser:
        page = browser.get("/login").text
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page).group(1)
        data = {"email": email, "password": password, "csrf_token": token}
        return browser.post("/login", data=data).status_code


def test_deployments_sharing_one_redis_keep_their_counts_apart(make_app, tenants):
    first, second = (
        make_app(REDIS_URL=MACHINE_REDIS, RATELIMIT_KEY_PREFIX=f"throttle-{uuid.uuid4().hex}")
        for _ in range(2)
    )
    with first.app_context():
        owner = owner_email(tenants.create())
        guesser = client_at(first, "127.0.0.2")
        assert [attempt(guesser, owner, "wrong") for _ in range(6)][-1] == 429
    with second.app_context():
        assert attempt(client_at(second, "127.0.0.2"), owner, PASSWORD) == 302
