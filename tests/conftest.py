"""Fixtures: an app per test on PostgreSQL, a clean database per test, and factories for
provisioned tenants, API keys and bookings.

The PostgreSQL server is the one ``DATABASE_URL`` names (CI: the machine's), else an embedded
server (``app.embedded_database``) this run starts in a temporary folder and stops at its end,
so a machine with only Python runs the whole suite.

``--clock INSTANT`` (or ``TEST_CLOCK``) runs the session on a shifted clock: from the start of
the session "now" is ``INSTANT`` (e.g. ``2027-07-15T14:00:00Z``) and ticks on in real time, for
this process (time-machine) and for the servers ``tests.servers.gunicorn`` starts, which keep
the same clock. ``make test`` runs the tests marked ``date_sensitive`` this way on a summer
day and on both New York DST-change days.
"""

from __future__ import annotations

import contextvars
import os
import tempfile
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
from limits.storage import MemoryStorage
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app import create_app
from app.config import database_url_from_env, settings_of
from app.embedded_database import server_database_url
from app.extensions import db
from app.services.accounts import passwords
from app.services.availability.cache import availability_store
from app.services.integrations.registry import app_registry
from tests.browser_pages import layout_lines
from tests.dashboard_users import owner_email, sign_in
from tests.database_templates import TEMPLATES, create_database
from tests.factories import NEW_YORK, Tenant, TenantFactory
from tests.google_servers import FakeGoogle
from tests.live_api import LiveApi, live_api
from tests.microsoft_servers import FakeMicrosoft
from tests.oauth_fakes import ACCOUNT_EMAIL

# The PostgreSQL server the run makes its throw-away databases on: ``DATABASE_URL`` (any
# database of that server; the suite connects to it to create and drop its own), else an embedded
# server the session starts in a temporary folder (``pytest_configure``). Taken out of the
# environment, so that no app or server a test starts finds it by accident; the processes of one
# run (pytest-xdist's workers) get it through ``RUN_SERVER``.
RUN_SERVER = "CALENDAR_TESTS_POSTGRES_URL"
GIVEN_SERVER = os.environ.pop("DATABASE_URL", None)
# argon2id at production cost takes ~0.1 s a hash; tests hash many owners, so they use the
# cheapest parameters (the hash format records them, so verification is unaffected).
passwords._hasher = PasswordHasher.from_parameters(profiles.CHEAPEST)

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


# The shifted clock
def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--time-per-folder",
        action="store_true",
        help="at the end, the seconds the tests of each folder took (set-up and teardown too)",
    )
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


# The fixtures that start a CalDAV server process (Radicale, Xandikos) for their tests: those
# tests are marked ``slow`` here; a test that starts one in its body, or through a fixture of
# another name, is marked where it is written.
CALDAV_SERVER_FIXTURES = frozenset({"radicale", "own_radicale", "xandikos", "own_xandikos"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.name in ABOUT_DATES and item.get_closest_marker("date_sensitive"):
            item.add_marker(pytest.mark.about_dates)
        if CALDAV_SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


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
    if RUN_SERVER not in os.environ:  # the run's first process: xdist's workers inherit it
        os.environ[RUN_SERVER] = GIVEN_SERVER or _embedded_server()
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
    if terminalreporter.config.getoption("--time-per-folder"):
        seconds: dict[str, float] = {}
        for reports in terminalreporter.stats.values():
            for report in reports:
                nodeid = getattr(report, "nodeid", "")
                if nodeid and hasattr(report, "duration"):
                    folder = "/".join(nodeid.split("/")[:2])
                    seconds[folder] = seconds.get(folder, 0.0) + report.duration
        terminalreporter.write_sep("-", "seconds per folder (the tests' own time, all processes)")
        for folder, spent in sorted(seconds.items()):
            terminalreporter.write_line(f"{folder}: {spent:.0f} s")


def backend_unavailable(reason: str) -> None:
    """Skip locally, fail in CI: with CI set no backend may be skipped."""
    if IN_CI:
        pytest.fail(f"{reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(reason)


def _embedded_server() -> str:
    """Starts an embedded PostgreSQL for this run, in a folder of its own (so two runs never
    share one); the wheel stops it and removes the folder when this process exits."""
    folder = Path(tempfile.mkdtemp(prefix="calendar-tests-postgres-"))
    return server_database_url(folder, "postgres", remove_at_exit=True)


def _migrated(url: str) -> None:
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test"})
    with app.app_context():
        upgrade()
        db.engine.dispose()


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    url = os.environ[RUN_SERVER]
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError as err:
        pytest.fail(f"PostgreSQL not reachable at {url}: {err}")
    return url


@pytest.fixture(scope="session")
def postgres_database(postgres_admin_url: str) -> Iterator[Callable[[], str]]:
    """Creates throw-away PostgreSQL databases (``tests.database_templates.create_database``);
    drops them, and the templates copied into them, at the end of the run."""
    created: list[str] = []
    TEMPLATES.use_server(postgres_admin_url)

    def create() -> str:
        name = f"calbook_test_{uuid.uuid4().hex[:12]}"
        create_database(postgres_admin_url, name)
        created.append(name)
        return (
            make_url(database_url_from_env(postgres_admin_url))
            .set(database=name)
            .render_as_string(hide_password=False)
        )

    yield create
    with psycopg.connect(postgres_admin_url, autocommit=True) as conn:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    TEMPLATES.drop_all()


@pytest.fixture(scope="session")
def migrated_postgres_database(postgres_database: Callable[[], str]) -> Callable[[], str]:
    """Creates throw-away PostgreSQL databases at the migrations' head (copies of one this
    process migrated: ``tests.database_templates``)."""

    def create() -> str:
        url = postgres_database()
        TEMPLATES.fill(url, "migrated", _migrated)
        return url

    return create


@pytest.fixture(scope="module")
def live(migrated_postgres_database: Callable[[], str]) -> Iterator[LiveApi]:
    """The API served by a real gunicorn on loopback, on a database of its own, for the
    module's tests (``tests.live_api``)."""
    with live_api(migrated_postgres_database()) as server:
        yield server


@pytest.fixture(scope="session")
def database_url(migrated_postgres_database: Callable[[], str]) -> str:
    """A migrated database for the whole run (of this process)."""
    return migrated_postgres_database()


# The sequences of the schema's tables back to 1, so each test's ids start as on a new database
# (not the embedded broker's, whose messages outlive a test).
_RESTART_SEQUENCES = text(
    "SELECT setval(pg_get_serial_sequence(name, 'id'), 1, false) FROM unnest(CAST(:tables AS text[])) AS name"
    " WHERE pg_get_serial_sequence(name, 'id') IS NOT NULL"
)


def _empty_all_tables() -> None:
    """DELETE, not TRUNCATE, all in one round trip: a test leaves a few rows, and TRUNCATE's
    fixed cost (new files for each of the ~34 tables) is about 100 ms a test, a DELETE per
    statement 23 ms, one multi-statement string 6 ms (measured 2026-11-29)."""
    deletes = "; ".join(
        f'DELETE FROM "{table.name}"' for table in reversed(db.metadata.sorted_tables)
    )
    tables = [table.name for table in db.metadata.sorted_tables if "id" in table.columns]
    connection = db.session.connection()
    connection.exec_driver_sql(deletes)
    connection.execute(_RESTART_SEQUENCES, {"tables": tables})
    db.session.commit()


class IsolatedClient(FlaskClient):
    """Runs each request in a fresh context, as a server would: its own app context, ``g``
    and database session, never the test's (Flask would otherwise reuse the app context the
    test holds, and with it ``g`` and the session, across requests)."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        return contextvars.Context().run(super().open, *args, **kwargs)


def _test_config(database_url: str, overrides: dict[str, Any]) -> dict[str, Any]:
    return {
        "TESTING": True,
        "SQLALCHEMY_DATABASE_URI": database_url,
        "SECRET_KEY": "test-secret-key",
        # No worker consumes what these apps would enqueue (tests/worker/test_worker*.py turn it on).
        "OUTBOX_DISPATCH": False,
        # A test here checks what an answer says, not how long PostgreSQL may take: under a
        # loaded CI a request's first connection took over the 1.5 s budget and answered 503
        # (2026-11-29). The budget itself is tested against servers (tests/system).
        "DB_REQUEST_WAIT_S": 10,
        **overrides,
    }


def _built(config: dict[str, Any]) -> Flask:
    app = create_app(config)
    app.test_client_class = IsolatedClient
    return app


# Override values an app may be reused for: plain data compares by value, so two tests asking
# for the same plain settings get the same app. Anything else (a fake server's object, a
# callable) builds an app of its own.
_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    return isinstance(value, _PLAIN)


class ReusedApps:
    """The test apps of this process, built once for each set of settings and handed from
    test to test. Building an app costs about 0.2 s (its routes compiled, its OpenAPI document
    built): 597 builds took 118 s of ``tests/api``'s 310 s, and ``make_app`` with the same
    settings in each test of a module as much again (measured 2026-11-29).

    A test gets an app that nothing else in the same test holds, built with the same settings
    and environment. After the test the app's caches are new (the availability cache, API keys,
    rate-limit counts), as a new app's would be. An app the test changed itself (its config,
    its extensions, its listeners, its routes or hooks), or one counting rate limits outside
    the process (Redis, which other processes share), is let go: the next test builds another. At most ``KEPT`` apps wait at a time,
    each with its pooled database connections."""

    KEPT = 6

    def __init__(self, database_url: str) -> None:
        self._database_url = database_url
        self._idle: list[tuple[str, Flask, tuple[Any, ...]]] = []
        self._lent: list[tuple[str, Flask, tuple[Any, ...]]] = []

    def take(self, overrides: dict[str, Any], *, fresh: bool = False) -> Flask:
        """An app with ``overrides`` on the test configuration; ``fresh``: one built now, that
        has answered no request yet (a test adding a route needs one), and is let go after."""
        key = self._key(overrides) if _plain(overrides) and not fresh else ""
        for index, (idle_key, app, _) in enumerate(self._idle):
            if key and idle_key == key:
                self._lent.append(self._idle.pop(index))
                return app
        app = _built(_test_config(self._database_url, overrides))
        if key and self._counts_in_memory(app):
            self._lent.append((key, app, self._fingerprint(app)))
        else:  # "": let go after the test
            self._lent.append(("", app, ()))
        return app

    def any_app(self) -> Flask:
        """The default app: the test's, if it had it."""
        default = self._key({})
        for key, app, _ in self._lent:
            if key == default:
                return app
        return self.take({})

    def give_back(self) -> None:
        """After a test: renew the caches of the apps it had, or let them go."""
        lent, self._lent = self._lent, []
        for key, app, as_built in lent:
            with app.app_context():
                db.session.remove()
            if not key or self._fingerprint(app) != as_built:
                self._close(app)
                continue
            configured = settings_of(app)
            app.extensions["availability_store"] = availability_store(configured)
            app.extensions["api_key_cache"].forget_all()
            for limiter in app.extensions["limiter"]:
                limiter.storage.reset()  # (Limiter.reset would log a line each test)
            self._idle.insert(0, (key, app, as_built))
        for _, app, _ in self._idle[self.KEPT :]:
            self._close(app)
        del self._idle[self.KEPT :]

    def close(self) -> None:
        """Let every app and its connections go."""
        self.give_back()
        for _, app, _ in self._idle:
            self._close(app)
        self._idle.clear()

    @staticmethod
    def _key(overrides: dict[str, Any]) -> str:
        """The overrides and the environment (settings are read from both when an app is
        built), but not pytest's own variables, which name the running test."""
        environment = {
            name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")
        }
        return repr((sorted(overrides.items()), sorted(environment.items())))

    @staticmethod
    def _close(app: Flask) -> None:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()

    @staticmethod
    def _counts_in_memory(app: Flask) -> bool:
        return all(
            isinstance(limiter.storage, MemoryStorage) for limiter in app.extensions["limiter"]
        )

    @staticmethod
    def _fingerprint(app: Flask) -> tuple[Any, ...]:
        """What a test could change of an app, by value (config) or by identity."""
        registry = app_registry(app)
        hooks = (
            app.before_request_funcs,
            app.after_request_funcs,
            app.teardown_request_funcs,
            app.url_value_preprocessors,
            app.url_default_functions,
            app.template_context_processors,
        )
        return (
            dict(app.config),
            {
                name: id(value)
                for name, value in app.extensions.items()
                if name != "availability_store"
            },
            dict(app.view_functions),
            tuple(rule.rule for rule in app.url_map.iter_rules()),
            tuple({key: tuple(funcs) for key, funcs in hook.items()} for hook in hooks),
            {  # (Flask adds empty entries as it looks handlers up)
                (name, code): tuple(handlers.items())
                for name, codes in app.error_handler_spec.items()
                for code, handlers in codes.items()
                if handlers
            },
            tuple(registry.subscribers),
            dict(registry.handlers),
            tuple(registry.dispatchers),
            tuple(registry.task_dispatchers),
            app.test_client_class,
        )


@pytest.fixture(scope="session")
def reused_apps(database_url: str) -> Iterator[ReusedApps]:
    reused = ReusedApps(database_url)
    yield reused
    reused.close()


@pytest.fixture
def make_app(reused_apps: ReusedApps) -> Iterator[Callable[..., Flask]]:
    """Apps on this run's database (``ReusedApps``; ``make_app(fresh=True, …)`` for one built
    now); the database is emptied after the test."""

    def make(*, fresh: bool = False, **overrides: Any) -> Flask:
        return reused_apps.take(overrides, fresh=fresh)

    yield make
    with reused_apps.any_app().app_context():
        db.session.remove()
        _empty_all_tables()
    reused_apps.give_back()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Iterator[Flask]:
    """The default app (``ReusedApps``: the same object test after test, its caches new)."""
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
