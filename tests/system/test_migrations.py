"""Migrations as an operator runs them: upgrade on every start (``make run``, the Procfile's
``release``), downgrade and upgrade again, and the data migrations of single revisions."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from alembic.script import ScriptDirectory
from flask_migrate import downgrade, stamp, upgrade
from sqlalchemy import Connection, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from app import MIGRATIONS_DIR, create_app
from app.celery_app import BROKER_TABLES
from app.extensions import db
from tests.servers import BIN, ROOT

HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


@pytest.fixture
def fresh_database_url(postgres_database: Callable[[], str]) -> str:
    """An empty database of its own (no tables)."""
    return postgres_database()


def run(url: str, command: Callable[..., None], *args: str) -> None:
    """One Flask-Migrate command in an app of its own, as ``flask db …`` would run it."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test"})
    with app.app_context():
        command(*args)
        db.engine.dispose()


def recorded_revisions(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("alembic_version"):
                return []
            return list(connection.scalars(text("SELECT version_num FROM alembic_version")))
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_records_the_head_revision(fresh_database_url):
    run(fresh_database_url, upgrade)
    assert recorded_revisions(fresh_database_url) == [HEAD]


def test_upgrading_twice_is_a_no_op(fresh_database_url):
    run(fresh_database_url, upgrade)
    run(fresh_database_url, upgrade)
    assert recorded_revisions(fresh_database_url) == [HEAD]


def test_downgrade_to_base_then_upgrade_again(fresh_database_url):
    run(fresh_database_url, upgrade)
    run(fresh_database_url, downgrade, None, "base")
    assert recorded_revisions(fresh_database_url) == []
    assert table_names(fresh_database_url) <= {"alembic_version", *BROKER_TABLES}
    run(fresh_database_url, upgrade)
    assert recorded_revisions(fresh_database_url) == [HEAD]
    assert "bookings" in table_names(fresh_database_url)


def test_stamp_writes_the_revision(fresh_database_url):
    run(fresh_database_url, stamp)
    assert recorded_revisions(fresh_database_url) == [HEAD]


def test_0004_keeps_calendar_connections_and_their_busy_time(fresh_database_url):
    """Connections from before 0004 get a name, keep their last sync time (as
    last_success_at) and error (as last_error), and keep their external blocked times; the
    downgrade gives the old columns back."""
    url = fresh_database_url
    run(url, upgrade, None, "0003")
    synced = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as connection:
        for statement in (
            "INSERT INTO agencies (id, name, created_at) VALUES (1, 'A', :at)",
            "INSERT INTO sub_accounts (id, agency_id, name, active, created_at)"
            " VALUES (1, 1, 'S', true, :at)",
            "INSERT INTO calendar_connections (id, sub_account_id, provider, url, active,"
            " last_synced_at, last_sync_status, last_sync_error, created_at)"
            " VALUES (7, 1, 'caldav', 'https://dav.test/', true, :at, 'error', 'boom', :at)",
            "INSERT INTO blocked_times (sub_account_id, start_at, end_at, source,"
            " calendar_connection_id, external_uid, created_at)"
            " VALUES (1, :at, :end, 'external', 7, 'uid-1', :at)",
        ):
            connection.execute(text(statement), {"at": synced, "end": synced + timedelta(hours=1)})
    engine.dispose()

    run(url, upgrade, None, "0004")
    engine = create_engine(url)
    with engine.connect() as connection:
        row = connection.execute(
            text(
                "SELECT name, calendar, write_back, last_success_at, last_error,"
                " consecutive_failures, busy_count FROM calendar_connections"
            )
        ).one()
        busy = connection.scalars(text("SELECT external_uid FROM blocked_times")).all()
        columns = {c["name"] for c in inspect(connection).get_columns("calendar_connections")}
    engine.dispose()
    assert (row.name, row.calendar, row.write_back, row.last_error) == (
        "connection-7",
        None,
        True,
        "boom",
    )
    assert (row.consecutive_failures, row.busy_count) == (0, 0)
    assert row.last_success_at is not None
    assert busy == ["uid-1"]
    assert "last_sync_status" not in columns and "last_synced_at" not in columns

    run(url, downgrade, None, "0003")
    engine = create_engine(url)
    with engine.connect() as connection:
        old = connection.execute(
            text("SELECT url, last_synced_at, last_sync_error FROM calendar_connections")
        ).one()
        busy = connection.scalars(text("SELECT external_uid FROM blocked_times")).all()
    engine.dispose()
    assert (old.url, old.last_sync_error, busy) == ("https://dav.test/", "boom", ["uid-1"])
    assert old.last_synced_at is not None


def insert_agency(connection: Connection, created: datetime) -> None:
    """Agency 1, as a migration test's first row."""
    connection.execute(
        text("INSERT INTO agencies (id, name, created_at) VALUES (1, 'A', :at)"), {"at": created}
    )


def insert_sub_account(connection: Connection, created: datetime, sub_account_id: int = 1) -> None:
    """Sub account ``sub_account_id`` of agency 1, as the columns every revision has."""
    connection.execute(
        text(
            "INSERT INTO sub_accounts (id, agency_id, name, active, created_at)"
            " VALUES (:id, 1, 'S', true, :at)"
        ),
        {"id": sub_account_id, "at": created},
    )


def insert_booking_7(connection: Connection, created: datetime) -> None:
    """Event type 1 of sub account 1, and its confirmed booking 7 (2030-01-03 10:00 UTC, 30
    minutes), as the columns every revision since 0001 has."""
    connection.execute(
        text(
            "INSERT INTO event_types (id, sub_account_id, name, duration, buffer_before,"
            " buffer_after, active, created_at, updated_at)"
            " VALUES (1, 1, 'E', 30, 0, 0, true, :at, :at)"
        ),
        {"at": created},
    )
    start, end = datetime(2030, 1, 3, 10, tzinfo=UTC), datetime(2030, 1, 3, 10, 30, tzinfo=UTC)
    connection.execute(
        text(
            "INSERT INTO bookings (id, uid, sub_account_id, event_type_id, status, title,"
            " timezone, metadata, start_at, end_at, occupied_start, occupied_end,"
            " created_at, updated_at) VALUES (7, 'u7', 1, 1, 'confirmed', 'T', 'UTC', '{}',"
            " :start, :end, :start, :end, :at, :at)"
        ),
        {"start": start, "end": end, "at": created},
    )


def test_0014_has_connections_that_write_back_write_their_earlier_bookings(fresh_database_url):
    """Active write-back connections from before 0014 ask for the bookings made before they
    were connected; feeds, inactive ones and those not writing back do not; the downgrade drops
    the new columns."""
    url = fresh_database_url
    run(url, upgrade, None, "0013")
    created = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as connection:
        insert_agency(connection, created)
        insert_sub_account(connection, created)
        for id_, kind, write_back, active in (
            (1, "caldav", True, True),
            (2, "google", True, True),
            (3, "ics", False, True),
            (4, "caldav", False, True),
            (5, "microsoft", True, False),
        ):
            connection.execute(
                text(
                    "INSERT INTO calendar_connections (id, sub_account_id, name, kind, url,"
                    " write_back, active, consecutive_failures, busy_count, skipped_count,"
                    " created_at) VALUES (:id, 1, :name, :kind, 'https://dav.test/',"
                    " :write_back, :active, 0, 0, 0, :at)"
                ),
                {
                    "id": id_,
                    "name": f"c{id_}",
                    "kind": kind,
                    "write_back": write_back,
                    "active": active,
                    "at": created,
                },
            )
    engine.dispose()

    run(url, upgrade, None, "0014")
    engine = create_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT id, write_existing_pending, write_existing_after, needs_action,"
                " action_mailed_at FROM calendar_connections ORDER BY id"
            )
        ).all()
    engine.dispose()
    assert [(row.id, row.write_existing_pending) for row in rows] == [
        (1, True),
        (2, True),
        (3, False),
        (4, False),
        (5, False),
    ]
    assert {(r.write_existing_after, r.needs_action, r.action_mailed_at) for r in rows} == {
        (None, None, None)
    }

    run(url, downgrade, None, "0013")
    engine = create_engine(url)
    with engine.connect() as connection:
        columns = {c["name"] for c in inspect(connection).get_columns("calendar_connections")}
        count = connection.scalar(text("SELECT count(*) FROM calendar_connections"))
    engine.dispose()
    assert count == 5
    assert not columns & {
        "write_existing_pending",
        "write_existing_after",
        "needs_action",
        "action_mailed_at",
    }


def checks_and_triggers(url: str) -> dict[str, list]:
    """The CHECK constraints of ``bookings`` and ``users``, and the triggers on ``bookings``."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            tables = inspect(connection)
            shape: dict[str, list] = {
                table: sorted(
                    (c["name"], c["sqltext"]) for c in tables.get_check_constraints(table)
                )
                for table in ("bookings", "users")
            }
            triggers = text(
                "SELECT tgname, tgenabled FROM pg_trigger"
                " WHERE tgrelid = 'bookings'::regclass AND NOT tgisinternal"
            )
            shape["triggers"] = sorted(tuple(row) for row in connection.execute(triggers))
            return shape
    finally:
        engine.dispose()


def test_0019_swaps_the_status_and_role_checks_for_the_enums_identical_ones(fresh_database_url):
    """The hand-written CHECKs of bookings.status and users.role give way to the Enums' (and come
    back in the downgrade): the same names and SQL, the rows kept, an unknown role still
    refused, and the triggers on bookings untouched."""
    url = fresh_database_url
    run(url, upgrade, None, "0018")
    created = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as connection:
        insert_agency(connection, created)
        connection.execute(
            text(
                "INSERT INTO users (agency_id, email, password_hash, role, active, created_at)"
                " VALUES (1, 'owner@example.test', 'x', 'agency_owner', true, :at)"
            ),
            {"at": created},
        )
    engine.dispose()
    before = checks_and_triggers(url)
    assert [name for name, _ in before["users"]] == ["ck_users_role"]
    assert "ck_bookings_status" in {name for name, _ in before["bookings"]}
    assert before["triggers"]

    for command, revision in ((upgrade, "0019"), (downgrade, "0018"), (upgrade, "0019")):
        run(url, command, None, revision)
        assert recorded_revisions(url) == [revision]
        assert checks_and_triggers(url) == before
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                assert connection.scalars(text("SELECT role FROM users")).all() == ["agency_owner"]
                with pytest.raises(IntegrityError):
                    connection.execute(text("UPDATE users SET role = 'admin'"))
        finally:
            engine.dispose()


def test_a_release_waiting_behind_a_long_transaction_gives_up_and_succeeds_when_run_again(
    postgres_database,
):
    """While a migration waits for a table's lock, every request on that table queues behind
    it; so it waits at most DB_MIGRATION_LOCK_TIMEOUT_MS, then fails, leaving nothing half
    done."""
    url = postgres_database()
    run(url, upgrade, None, "0005")
    env = {**os.environ, "DATABASE_URL": url, "DB_MIGRATION_LOCK_TIMEOUT_MS": "1000"}
    release = [str(BIN / "flask"), "--app", "wsgi", "db", "upgrade"]
    engine = create_engine(url)
    try:
        with engine.connect() as long_transaction:
            long_transaction.execute(text("SELECT count(*) FROM bookings"))  # holds its lock
            refused = subprocess.run(
                release, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
            )
    finally:
        engine.dispose()
    assert refused.returncode != 0
    assert "lock timeout" in refused.stderr
    assert recorded_revisions(url) == ["0005"]
    subprocess.run(release, cwd=ROOT, env=env, capture_output=True, check=True, timeout=60)
    assert recorded_revisions(url) == [HEAD]


def test_0021_moves_the_reminder_minutes_into_the_list_and_keeps_sent_ones_sent(
    fresh_database_url,
):
    """``reminder_minutes_before`` becomes the one attendee-mail reminder it was, and the
    reminders the earlier code mailed become decided rows, so the new sweep sends none again;
    the downgrade brings the column back with its value."""
    url = fresh_database_url
    run(url, upgrade, None, "0020")
    created = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as connection:
        insert_agency(connection, created)
        for sub_account_id, minutes in ((1, 90), (2, None)):
            insert_sub_account(connection, created, sub_account_id)
            connection.execute(
                text(
                    "INSERT INTO calendar_settings (sub_account_id, timezone, default_duration,"
                    " minimum_notice_minutes, booking_horizon_days, notify_on_booking,"
                    " reminder_minutes_before, auto_complete_bookings)"
                    " VALUES (:id, 'UTC', 30, 0, 60, true, :minutes, false)"
                ),
                {"id": sub_account_id, "minutes": minutes},
            )
        insert_booking_7(connection, created)
        for booking_id in (7, 8):  # 8: deleted since (its mail keeps no booking)
            connection.execute(
                text(
                    "INSERT INTO mail_messages (dedupe_key, sub_account_id, kind, recipient,"
                    " subject, message_id, text_body, html_body, status, created_at) VALUES"
                    " (:key, 1, 'booking.reminder', 'pat@example.test', 's', 'm', 't', 'h',"
                    " 'sent', :at)"
                ),
                {
                    "key": f"reminder:{booking_id}:2030-01-03T10:00:00Z:pat@example.test",
                    "at": created,
                },
            )
    engine.dispose()

    run(url, upgrade, None, "0021")
    engine = create_engine(url)
    with engine.connect() as connection:
        lists = connection.execute(
            text("SELECT sub_account_id, reminders FROM calendar_settings ORDER BY 1")
        ).all()
        decided = connection.execute(
            text("SELECT booking_id, minutes_before, status FROM booking_reminders")
        ).all()
    engine.dispose()
    assert lists == [(1, [{"minutesBefore": 90, "channels": ["attendeeEmail"]}]), (2, [])]
    assert decided == [(7, 90, "sent")]

    run(url, downgrade, None, "0020")
    engine = create_engine(url)
    with engine.connect() as connection:
        minutes = (
            connection.execute(
                text(
                    "SELECT reminder_minutes_before FROM calendar_settings ORDER BY sub_account_id"
                )
            )
            .scalars()
            .all()
        )
    engine.dispose()
    assert minutes == [90, None]


def test_0027_gives_each_booking_its_history_from_the_outbox_rows_there_are(fresh_database_url):
    """``booking_changes`` is filled from the outbox, in order, an actor not recorded then
    being the business; the downgrade drops it and leaves the outbox as it was."""
    url = fresh_database_url
    run(url, upgrade, None, "0026")
    created = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as connection:
        insert_agency(connection, created)
        insert_sub_account(connection, created)
        insert_booking_7(connection, created)
        for minutes, kind, actor, changed in (
            (0, "booking.created", None, "[]"),
            (5, "booking.rescheduled", "attendee", '["startTime", "endTime"]'),
            (9, "booking.cancelled", "business", "[]"),
        ):
            connection.execute(
                text(
                    "INSERT INTO outbox_events (kind, sub_account_id, booking_id, changed, actor,"
                    " occurred_at, delivered_at) VALUES (:kind, 1, 7, :changed, :actor, :at, :at)"
                ),
                {
                    "kind": kind,
                    "changed": changed,
                    "actor": actor,
                    "at": created + timedelta(minutes=minutes),
                },
            )
    engine.dispose()

    run(url, upgrade, None, "0027")
    engine = create_engine(url)
    with engine.connect() as connection:
        history = connection.execute(
            text(
                "SELECT booking_id, kind, actor, changed, occurred_at FROM booking_changes"
                " ORDER BY id"
            )
        ).all()
    engine.dispose()
    assert history == [
        (7, "booking.created", "business", [], created),
        (
            7,
            "booking.rescheduled",
            "attendee",
            ["startTime", "endTime"],
            created + timedelta(minutes=5),
        ),
        (7, "booking.cancelled", "business", [], created + timedelta(minutes=9)),
    ]

    run(url, downgrade, None, "0026")
    assert "booking_changes" not in table_names(url)
    assert "outbox_events" in table_names(url)


def test_0029_to_0031_give_every_sub_account_one_host_and_move_what_it_has_onto_it(
    fresh_database_url,
):
    """Each sub account gets one host, named after it, with its notification email; its
    bookings and connections become that host's, its blocked time everyone's; the downgrade
    puts the sub-account-wide rules back and drops the hosts."""
    url = fresh_database_url
    run(url, upgrade, None, "0028")
    created = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    engine = create_engine(url)
    with engine.begin() as connection:
        insert_agency(connection, created)
        insert_sub_account(connection, created)
        insert_sub_account(connection, created, sub_account_id=2)
        connection.execute(
            text(
                "INSERT INTO calendar_settings (sub_account_id, timezone, default_duration,"
                " minimum_notice_minutes, booking_horizon_days, notify_on_booking,"
                " auto_complete_bookings, notification_email)"
                " VALUES (1, 'UTC', 30, 0, 60, true, false, 'desk@clinic.test')"
            )
        )
        insert_booking_7(connection, created)
        connection.execute(
            text(
                "INSERT INTO calendar_connections (id, sub_account_id, name, kind, url, active,"
                " created_at) VALUES (3, 1, 'C', 'ics', 'https://x.test/a.ics', true, :at)"
            ),
            {"at": created},
        )
        connection.execute(
            text(
                "INSERT INTO blocked_times (sub_account_id, start_at, end_at, source, created_at)"
                " VALUES (1, :at, :at + interval '1 hour', 'manual', :at)"
            ),
            {"at": created},
        )
        connection.execute(
            text(
                "INSERT INTO blocked_times (sub_account_id, start_at, end_at, source,"
                " calendar_connection_id, created_at)"
                " VALUES (1, :at, :at + interval '1 hour', 'external', 3, :at)"
            ),
            {"at": created},
        )
    engine.dispose()

    run(url, upgrade, None, "0029")
    engine = create_engine(url)
    with engine.connect() as connection:
        hosts = connection.execute(
            text("SELECT id, sub_account_id, name, email FROM hosts ORDER BY sub_account_id")
        ).all()
        assert [tuple(h)[1:] for h in hosts] == [(1, "S", "desk@clinic.test"), (2, "S", None)]
        first = hosts[0][0]
        assert connection.scalar(text("SELECT host_id FROM bookings WHERE id = 7")) == first
        assert connection.scalar(text("SELECT host_id FROM calendar_connections")) == first
        assert connection.scalars(text("SELECT host_id FROM blocked_times")).all() == [None, None]
    engine.dispose()

    # 0030: the connected calendar's busy time becomes its host's; hand-made stays everyone's.
    run(url, upgrade, None, "0030")
    engine = create_engine(url)
    with engine.connect() as connection:
        by_source = dict(
            connection.execute(text("SELECT source, host_id FROM blocked_times")).all()
        )
    engine.dispose()
    assert by_source == {"manual": None, "external": first}

    # 0031: every event type is its sub account's first host's.
    run(url, upgrade, None, "0031")
    engine = create_engine(url)
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT host_id FROM event_types WHERE id = 1")) == first
    engine.dispose()

    run(url, downgrade, None, "0028")
    assert "hosts" not in table_names(url)


def test_upgrade_creates_the_embedded_brokers_tables_before_any_process_starts(fresh_database_url):
    run(fresh_database_url, upgrade)
    assert table_names(fresh_database_url) >= BROKER_TABLES
