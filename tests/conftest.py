"""Fixtures: an app per test on each database backend, a clean database per test, and
factories for provisioned tenants, API keys and bookings.

Every test that uses ``app`` runs twice: on SQLite and on PostgreSQL. PostgreSQL is found at
``TEST_POSTGRES_URL`` (default: the machine's 127.0.0.1:5432, user postgres). When it is not
reachable the PostgreSQL runs are skipped, except with ``CI`` set, where they fail.

``--clock INSTANT`` (or ``TEST_CLOCK``) runs the session on a shifted clock: from the start of
the session "now" is ``INSTANT`` (e.g. ``2027-07-15T14:00:00Z``) and ticks on in real time, for
this process (time-machine) and for the servers ``tests.servers.gunicorn`` starts, which keep
the same clock. ``make test`` runs the tests marked ``date_sensitive`` this way on a summer
day and on both New York DST-change days.
"""

from __future__ import annotations

import contextvars
import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import time_machine
from argon2 import PasswordHasher, profiles
from flask import Flask
from flask.testing import FlaskClient
from flask_migrate import upgrade
from sqlalchemy import text

from app import create_app
from app.extensions import db
from app.services.accounts import passwords
from tests.browser_pages import layout_lines
from tests.dashboard_users import owner_email, sign_in
from tests.factories import NEW_YORK, Tenant, TenantFactory
from tests.google_servers import FakeGoogle
from tests.live_api import LiveApi, live_api
from tests.microsoft_servers import FakeMicrosoft
from tests.oauth_fakes import ACCOUNT_EMAIL

POSTGRES_ADMIN_URL = os.environ.get(
    "TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
# argon2id at production cost takes ~0.1 s a hash; tests hash many owners, so they use the
# cheapest parameters (the hash format records them, so verification is unaffected).
passwords._hasher = PasswordHasher.from_parameters(profiles.CHEAPEST)

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# The shifted clock
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--clock",
        default=os.environ.get("TEST_CLOCK") or None,
        metavar="INSTANT",
        help="run on a clock that starts at INSTANT (ISO 8601 with an offset or Z, e.g. "
        "2027-07-15T14:00:00Z) and ticks, here and in test servers (default: $TEST_CLOCK, "
        "else the real clock)",
    )


# The modules whose subject is time itself: DST, minimum notice, the horizon, working hours and
# date overrides, slots and suggestions, a reminder's due time, the dashboard's days. Their
# date_sensitive tests are marked ``about_dates`` and run again on the shifted clocks (``make
# test``); elsewhere a test's dates only pick slots to book, and it runs on the real clock alone.
ABOUT_DATES = frozenset(
    {
        "test_api_availability.py",
        "test_api_booking_create.py",
        "test_api_booking_update.py",
        "test_suggested_slots.py",
        "test_input_edges.py",
        "test_dashboard_availability.py",
        "test_dashboard_reschedule.py",
        "test_dashboard_everyday.py",
        "test_event_type_and_availability_services.py",
        "test_notifications.py",
        "test_worker_messages.py",
        "test_calendar_sync.py",
    }
)


# The modules whose subject is not how data is stored or locked: HTTP input and output, the
# dashboard's pages and forms, feeds' and providers' protocols, the CLI's output, rate limits,
# the docs' examples. They run on the one database named, not on both: what they store goes
# through services whose own tests (tests/services, the API's writes and reads, the worker's
# jobs, the system tests' races and faults) run on SQLite and PostgreSQL. SQLite unless said.
# The shifted clocks choose their database themselves and keep these on it.
_DASHBOARD_PAGES = "pages and forms over services tested on both"
ONE_DATABASE: dict[str, tuple[str, str]] = {
    # The API's edges
    "test_fuzz.py": ("postgresql", "fuzzed strings meet PostgreSQL's stricter text (NUL)"),
    "test_hostile_input.py": ("sqlite", "input refused before any query"),
    "test_input_edges.py": ("sqlite", "validation at the edge"),
    "test_security_headers.py": ("sqlite", "response headers"),
    "test_errors.py": ("sqlite", "the error envelope"),
    "test_error_codes.py": ("sqlite", "the error codes"),
    "test_request_ids_and_logs.py": ("sqlite", "request ids and log lines"),
    "test_openapi.py": ("sqlite", "the OpenAPI document"),
    "test_client_models.py": ("sqlite", "the client's models of answers"),
    "test_smoke.py": ("sqlite", "the operations answer at all"),
    "test_api_auth.py": ("sqlite", "the 401 and 403 answers"),
    "test_rate_limit.py": ("sqlite", "counts kept in Redis or memory"),
    # Reading other people's calendars
    "test_private_addresses.py": ("sqlite", "address checks"),
    "test_calendar_quirks.py": ("sqlite", "parsing calendars"),
    "test_feed_quirks.py": ("sqlite", "parsing feeds"),
    "test_caldav_hostile_servers.py": ("sqlite", "hostile servers' bytes and timing"),
    "test_feed_sync.py": ("sqlite", "fetching feeds"),
    "test_google_sync.py": ("sqlite", "Google's protocol"),
    "test_microsoft_sync.py": ("sqlite", "Microsoft Graph's protocol"),
    "test_connection_address_guard.py": ("sqlite", "address checks"),
    "test_webhook_payload.py": ("sqlite", "a payload's shape"),
    # Operators' and newcomers' views
    "test_connections_cli.py": ("sqlite", "the CLI's output"),
    "test_metrics.py": ("sqlite", "the metrics' exposition"),
    "test_public_url.py": ("sqlite", "links built from PUBLIC_URL"),
    "test_demo.py": ("sqlite", "the demo workspace"),
    # The dashboard
    **{
        name: ("sqlite", _DASHBOARD_PAGES)
        for name in (
            "test_dashboard_access.py",
            "test_dashboard_api_keys.py",
            "test_dashboard_availability.py",
            "test_dashboard_basics.py",
            "test_dashboard_bookings.py",
            "test_dashboard_calendar.py",
            "test_dashboard_calendar_accounts.py",
            "test_dashboard_connections.py",
            "test_dashboard_contacts.py",
            "test_dashboard_event_types.py",
            "test_dashboard_notifications.py",
            "test_dashboard_reschedule.py",
            "test_dashboard_sessions.py",
            "test_dashboard_settings.py",
            "test_dashboard_team.py",
            "test_sign_in_throttle.py",
        )
    },
}


def database_of(item: pytest.Item) -> str | None:
    """The database a test runs on (its ``database_url`` parameter), if it has one."""
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("database_url") if callspec is not None else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in ABOUT_DATES and item.get_closest_marker("date_sensitive"):
            item.add_marker(pytest.mark.about_dates)
    if config.getoption("--clock"):
        return
    kept, elsewhere = [], []
    on_a_database, listed = set(), set()
    for item in items:
        database = database_of(item)
        chosen = ONE_DATABASE.get(item.path.name)
        if chosen:
            listed.add(item.path.name)
            on_a_database |= {item.path.name} if database else set()
        (elsewhere if database and chosen and database != chosen[0] else kept).append(item)
    if listed - on_a_database:
        raise pytest.UsageError(
            f"ONE_DATABASE lists modules whose tests take no database: {sorted(listed - on_a_database)}"
        )
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        items[:] = kept


def read_clock(text: str) -> datetime:
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        raise pytest.UsageError(
            f"--clock {text!r}: give an ISO 8601 instant with an offset, e.g. 2027-07-15T14:00:00Z"
        )
    return instant.astimezone(UTC)


_CLOCK = pytest.StashKey[time_machine.travel]()


def pytest_configure(config: pytest.Config) -> None:
    # Before collection: test modules compute their dates (next_monday()) when imported.
    text = config.getoption("--clock")
    if text:
        travel = time_machine.travel(read_clock(text), tick=True)
        travel.start()
        config.stash[_CLOCK] = travel
        config.add_cleanup(travel.stop)


def pytest_report_header(config: pytest.Config) -> str | None:
    if _CLOCK not in config.stash:
        return None
    now = datetime.now(UTC)
    return (
        f"clock: shifted, now {now:%Y-%m-%dT%H:%M:%SZ}"
        f" ({now.astimezone(NEW_YORK):%a %Y-%m-%d %H:%M %Z} in New York)"
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """At the end of the output: what the stateful fuzz run did
    (``tests/api/test_fuzz_stateful.py``), by operation and status; and the dashboard pages'
    layout at laptop and phone widths (``tests/browser_pages.py``)."""
    layout: list[dict] = []
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get(
        "failed", []
    ):
        for name, value in getattr(report, "user_properties", []):
            if name == "outcomes" and report.when == "call":
                terminalreporter.write_sep("-", "stateful fuzz: answers by operation and status")
                terminalreporter.write_line(", ".join(f"{k} ×{n}" for k, n in value.items()))
            if name == "page_layout" and report.when == "call":
                layout += value
    if layout:
        terminalreporter.write_sep("-", "dashboard pages: content width, header height, axe")
        for line in layout_lines(layout):
            terminalreporter.write_line(line)


def backend_unavailable(reason: str) -> None:
    """Skip locally, fail in CI: with CI set no backend may be skipped."""
    if IN_CI:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _migrated(url: str) -> None:
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test"})
    with app.app_context():
        upgrade()
        db.engine.dispose()


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    try:
        psycopg.connect(POSTGRES_ADMIN_URL, connect_timeout=3).close()
    except psycopg.OperationalError as err:
        backend_unavailable(f"PostgreSQL not reachable at {POSTGRES_ADMIN_URL}: {err}")
    return POSTGRES_ADMIN_URL


@pytest.fixture(scope="session")
def postgres_database(postgres_admin_url: str) -> Callable[[], str]:
    """Creates throw-away PostgreSQL databases; drops them at the end of the run."""
    created: list[str] = []

    def create() -> str:
        name = f"calbook_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        base = postgres_admin_url.rsplit("/", 1)[0]
        return f"postgresql+psycopg://{base.split('://', 1)[1]}/{name}"

    yield create
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def migrated_postgres_database(postgres_database: Callable[[], str]) -> Callable[[], str]:
    """Creates throw-away PostgreSQL databases at the migrations' head."""

    def create() -> str:
        url = postgres_database()
        _migrated(url)
        return url

    return create


@pytest.fixture(scope="module")
def live(migrated_postgres_database: Callable[[], str]) -> Iterator[LiveApi]:
    """The API served by a real gunicorn on loopback, on a database of its own, for the
    module's tests (``tests.live_api``)."""
    with live_api(migrated_postgres_database()) as server:
        yield server


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database for the whole run, per backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'test.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_database")()
    _migrated(url)
    return url


def _empty_all_tables() -> None:
    tables = list(reversed(db.metadata.sorted_tables))
    if db.engine.dialect.name == "postgresql":
        names = ", ".join(f'"{t.name}"' for t in tables)
        db.session.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    else:
        for table in tables:
            db.session.execute(table.delete())
    db.session.commit()


class IsolatedClient(FlaskClient):
    """Runs each request in a fresh context, as a server would: its own app context, ``g``
    and database session, never the test's (Flask would otherwise reuse the app context the
    test holds, and with it ``g`` and the session, across requests)."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        return contextvars.Context().run(super().open, *args, **kwargs)


@pytest.fixture
def make_app(database_url: str, tmp_path: Path) -> Iterator[Callable[..., Flask]]:
    """Builds apps on this run's database; the database is emptied after the test."""
    apps: list[Flask] = []

    def make(**overrides: Any) -> Flask:
        config = {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": database_url,
            "SECRET_KEY": "test-secret-key",
            # No worker consumes what these apps would enqueue (tests/worker/test_worker*.py turn it on).
            "OUTBOX_DISPATCH": False,
            **overrides,
        }
        app = create_app(config)
        app.test_client_class = IsolatedClient
        apps.append(app)
        return app

    yield make
    if apps:
        with apps[0].app_context():
            db.session.remove()
            _empty_all_tables()
            db.engine.dispose()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Iterator[Flask]:
    app = make_app()
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def private_allowed(make_app: Callable[..., Flask]) -> Iterator[Flask]:
    """An app that may fetch from loopback addresses (a test's own feed or CalDAV server)."""
    app = make_app(CALDAV_ALLOW_PRIVATE=True)
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def tenants(app: Flask) -> TenantFactory:
    return TenantFactory()


@pytest.fixture
def signed_in(client: FlaskClient, tenant: Tenant) -> FlaskClient:
    """The test client, signed in to the dashboard as the tenant's agency owner."""
    sign_in(client, owner_email(tenant))
    return client


@pytest.fixture
def tenant(tenants: TenantFactory) -> dict[str, Any]:
    """One provisioned agency with one sub account and a key per permission set."""
    return tenants.create()


@pytest.fixture
def google() -> Iterator[FakeGoogle]:
    """The loopback fake of Google's OAuth server and Calendar API, with one account
    (``ACCOUNT_EMAIL``); ``google.app_settings()`` points an app at it."""
    with FakeGoogle() as fake:
        fake.add_account(ACCOUNT_EMAIL)
        yield fake


@pytest.fixture
def microsoft() -> Iterator[FakeMicrosoft]:
    """The loopback fake of the Microsoft identity platform and Graph, with one account
    (``ACCOUNT_EMAIL``); ``microsoft.app_settings()`` points an app at it."""
    with FakeMicrosoft() as fake:
        fake.add_account(ACCOUNT_EMAIL)
        yield fake
