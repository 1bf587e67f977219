"""Queries that must not read a calendar's whole history: busy time near a window, the email
filter and a bounded date range of the booking list; and that they still find what they must.

The plan tests look at the exact statements the services send (captured from the engine),
explained by PostgreSQL. The calendar first gets a history of realistic volume (thousands of
past bookings, attendees and blocked times, analyzed), so the planner's choice is the one it
makes in production, not an artefact of empty tables.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from psycopg import sql
from sqlalchemy import event, text

from app.extensions import db
from app.models import SubAccount
from app.scheduling.intervals import Interval
from app.scheduling.timezones import InstantInput
from app.services.bookings.queries import BookingListQuery, list_bookings
from app.services.scheduling_inputs import load_busy
from tests.factories import Tenant, make_blocked_time, make_booking, utc

# A window far from today (and from the inserted history), whatever today is.
WINDOW = Interval(utc(2031, 3, 3, 14), utc(2031, 3, 5, 22))
HISTORY_END = utc(2031, 1, 1)
PAST_BOOKINGS = 6_000
PAST_BLOCKED = PAST_BOOKINGS // 6
CLIENTS = 1_000


# --- capturing and explaining statements -----------------------------------------------------


@contextmanager
def statements() -> Iterator[list[tuple[str, Any]]]:
    """The SQL and parameters of every statement sent while the block runs."""
    seen: list[tuple[str, Any]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", capture)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", capture)


def one_statement(seen: list[tuple[str, Any]], table: str) -> tuple[str, Any]:
    matching = [(s, p) for s, p in seen if re.search(rf"\bFROM {table}\b", s)]
    assert len(matching) == 1, matching
    return matching[0]


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from plan_nodes(child)


def pg_plan(statement: str, parameters: Any) -> list[dict[str, Any]]:
    """The plan PostgreSQL makes for the statement with these values (a custom plan)."""
    row = db.session.connection().exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters)
    document = row.scalar_one()
    document = json.loads(document) if isinstance(document, str) else document
    return list(plan_nodes(document[0]["Plan"]))


def pg_generic_plan(statement: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan a prepared statement gets once PostgreSQL switches to its generic plan (psycopg
    prepares a statement from its 5th execution on a connection): parameters unknown."""
    order: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${order.setdefault(match.group(1), len(order) + 1)}"

    numbered = re.sub(r"%\((\w+)\)s", number, statement).replace("%%", "%")
    connection = db.session.connection()
    raw = connection.connection.driver_connection
    values = sql.SQL(", ").join(sql.Literal(parameters[name]) for name in order)
    connection.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
    connection.exec_driver_sql(f"PREPARE history_probe AS {numbered}")
    try:
        query = sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE history_probe ({})").format(values)
        document = connection.exec_driver_sql(query.as_string(raw)).scalar_one()
    finally:
        connection.exec_driver_sql("DEALLOCATE history_probe")
    document = json.loads(document) if isinstance(document, str) else document
    return list(plan_nodes(document[0]["Plan"]))


def indexes_used(nodes: list[dict[str, Any]]) -> set[str]:
    return {n["Index Name"] for n in nodes if "Index Name" in n}


def seq_scanned(nodes: list[dict[str, Any]]) -> set[str]:
    return {n["Relation Name"] for n in nodes if n["Node Type"] == "Seq Scan"}


# --- a history of realistic volume -----------------------------------------------------------


def grow_history(tenant: Tenant) -> None:
    """PAST_BOOKINGS bookings (15 minutes every 20, back from HISTORY_END; half of them still
    confirmed), one attendee each (CLIENTS returning clients), PAST_BLOCKED blocked times;
    then VACUUM ANALYZE, as autovacuum would after such growth."""
    params = {
        "sub": tenant.sub_account_id,
        "et": tenant.event_types["Checkup"],
        "end": HISTORY_END,
        "n": PAST_BOOKINGS,
        "blocked": PAST_BLOCKED,
        "clients": CLIENTS,
    }
    # Holds have no history (expired ones are purged): their table is as on a new database, of
    # unknown size, not one a vacuum after earlier tests' deletes found empty.
    db.session.execute(text("TRUNCATE slot_holds CASCADE"))  # attendees: none yet
    db.session.execute(
        text(
            """
            INSERT INTO bookings (uid, sub_account_id, event_type_id, status, title, timezone,
                metadata, start_at, end_at, occupied_start, occupied_end, created_at, updated_at)
            SELECT 'past-' || n, :sub, :et,
                CASE WHEN n % 2 = 0 THEN 'confirmed' ELSE 'completed' END, 'Past', 'UTC', '{}',
                t, t + interval '15 minutes', t, t + interval '15 minutes', t, t
            FROM generate_series(1, :n) AS n,
                LATERAL (SELECT CAST(:end AS timestamptz) - n * interval '20 minutes') AS s(t)
            """
        ),
        params,
    )
    db.session.execute(
        text(
            """
            INSERT INTO attendees (booking_id, email, name, timezone, is_organizer, created_at,
                updated_at, link_key)
            SELECT id, 'client' || (id % :clients) || '@example.test', 'Client', 'UTC', false,
                created_at, created_at, 'history-' || id
            FROM bookings WHERE sub_account_id = :sub
            """
        ),
        params,
    )
    db.session.execute(
        text(
            """
            INSERT INTO blocked_times (sub_account_id, start_at, end_at, reason, source,
                created_at)
            SELECT :sub, t, t + interval '1 hour', 'Closed', 'manual', t
            FROM generate_series(1, :blocked) AS k,
                LATERAL (SELECT CAST(:end AS timestamptz) - k * interval '2 hours') AS s(t)
            """
        ),
        params,
    )
    db.session.commit()
    # VACUUM too: earlier tests' rows, deleted between tests, would otherwise still sit in the
    # indexes the plans are judged on (VACUUM runs outside a transaction).
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE bookings, attendees, blocked_times")


def busy_statement(tenant: Tenant, **kwargs: Any) -> tuple[str, Any]:
    """The one statement ``load_busy`` sends (bookings, blocked times and holds at once)."""
    with statements() as seen:
        load_busy(tenant.sub_account_id, WINDOW, **kwargs)
    assert len(seen) == 1, seen
    return seen[0]


# --- plans -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_busy_time_is_read_in_one_statement_through_each_tables_range_index(app, tenant):
    grow_history(tenant)
    statement, parameters = busy_statement(tenant, exclude_booking_id=1, exclude_hold_id=1)
    for nodes in (pg_plan(statement, parameters), pg_generic_plan(statement, parameters)):
        # One index of each table: bookings, blocked times, holds.
        assert indexes_used(nodes) == {
            "ex_bookings_no_overlap",
            "ix_blocked_times_sub_account_range",
            "ex_slot_holds_no_overlap",
        }, nodes
        assert not seq_scanned(nodes), nodes


@pytest.mark.slow
def test_busy_lookups_read_only_the_rows_near_the_window(app, tenant):
    """Thousands of past rows, none near the window: the index scans find (and the executor
    discards) nothing."""
    grow_history(tenant)
    statement, parameters = busy_statement(tenant)
    row = db.session.connection().exec_driver_sql(
        "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters
    )
    document = row.scalar_one()
    document = json.loads(document) if isinstance(document, str) else document
    nodes = list(plan_nodes(document[0]["Plan"]))
    scans = [n for n in nodes if "Index Name" in n]
    assert len(scans) == 3, nodes  # bookings, blocked times, holds
    assert all(n["Actual Rows"] == 0 for n in scans), nodes
    assert all(n.get("Rows Removed by Filter", 0) == 0 for n in nodes), nodes
    assert all(n.get("Rows Removed by Index Recheck", 0) == 0 for n in nodes), nodes


def email_statements(tenant: Tenant, email: str) -> list[tuple[str, Any]]:
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    with statements() as seen:
        list_bookings(sub_account, BookingListQuery(email=email, limit=5))
    # The count and the page; not the attendees' eager load of the page's bookings.
    return [(s, p) for s, p in seen if re.match(r"\s*SELECT (count|bookings\.)", s)]


@pytest.mark.slow
def test_email_filter_starts_from_the_attendees_email_index(app, tenant):
    grow_history(tenant)
    found = email_statements(tenant, "  Client7@Example.TEST ")
    assert len(found) == 2, found  # count and page
    for statement, parameters in found:
        values = parameters.values() if isinstance(parameters, dict) else parameters
        assert "client7@example.test" in values  # the parameter is lower-cased, not the column
        assert "lower(" not in statement.lower()
        nodes = pg_plan(statement, parameters)
        assert "ix_attendees_email" in indexes_used(nodes), nodes
        assert not seq_scanned(nodes), nodes
        bookings = [n for n in nodes if n.get("Relation Name") == "bookings"]
        assert [n["Index Name"] for n in bookings] == ["pk_bookings"], nodes


@pytest.mark.slow
def test_a_date_range_of_the_list_is_bounded_on_both_ends_of_the_index(app, tenant):
    """``endDate`` bounds ``end_at``; as ``start_at < end_at`` always holds, the index on
    ``start_at`` can stop there too instead of reading on to the end of the history."""
    grow_history(tenant)
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    query = BookingListQuery(
        start_date=InstantInput(utc(2030, 12, 1)),
        end_date=InstantInput(utc(2030, 12, 8)),
    )
    with statements() as seen:
        list_bookings(sub_account, query)
    found = [(s, p) for s, p in seen if re.match(r"\s*SELECT (count|bookings\.)", s)]
    assert len(found) == 2, found
    for statement, parameters in found:
        nodes = pg_plan(statement, parameters)
        assert not seq_scanned(nodes), nodes
        conditions = [n.get("Index Cond", "") for n in nodes if "Index Name" in n]
        assert any("start_at >=" in c and "start_at <" in c for c in conditions), nodes


# --- what the lookups must still find --------------------------------------------------------


def occupied(booking) -> Interval:
    return Interval(booking.occupied_start, booking.occupied_end)


def test_a_long_blocked_interval_that_began_long_before_the_window_still_blocks(app, tenant):
    sabbatical = Interval(utc(2029, 1, 1), utc(2031, 6, 30))
    make_blocked_time(tenant, sabbatical.start, sabbatical.end)
    for days in range(1, 40):  # short past intervals in between, none near the window
        start = WINDOW.start - timedelta(days=days * 3)
        make_blocked_time(tenant, start, start + timedelta(hours=1))
    busy = load_busy(tenant.sub_account_id, WINDOW)
    assert busy.blocked == [sabbatical]
    assert busy.bookings == busy.external == []


def test_a_long_external_interval_around_the_window_is_external_busy_time(app, tenant):
    around = Interval(WINDOW.start - timedelta(days=400), WINDOW.end + timedelta(days=1))
    make_blocked_time(tenant, around.start, around.end, source="external")
    busy = load_busy(tenant.sub_account_id, WINDOW)
    assert busy.external == [around]
    assert busy.blocked == []


def test_intervals_touching_the_window_edges_are_not_busy_time(app, tenant):
    before = make_booking(tenant, WINDOW.start - timedelta(minutes=40))  # 30 min + 10 buffer
    after = make_booking(tenant, WINDOW.end)
    assert occupied(before).end == WINDOW.start and occupied(after).start == WINDOW.end
    make_blocked_time(tenant, WINDOW.start - timedelta(hours=5), WINDOW.start)
    make_blocked_time(tenant, WINDOW.end, WINDOW.end + timedelta(days=300))
    busy = load_busy(tenant.sub_account_id, WINDOW)
    assert busy.bookings == busy.blocked == busy.external == []


def test_intervals_overlapping_the_window_edges_by_a_second_are_busy_time(app, tenant):
    second = timedelta(seconds=1)
    before = make_booking(tenant, WINDOW.start - timedelta(minutes=40) + second)
    after = make_booking(tenant, WINDOW.end - second)
    early = Interval(WINDOW.start - timedelta(days=90), WINDOW.start + second)
    late = Interval(WINDOW.end - second, WINDOW.end + timedelta(days=90))
    make_blocked_time(tenant, early.start, early.end)
    make_blocked_time(tenant, late.start, late.end)
    busy = load_busy(tenant.sub_account_id, WINDOW)
    assert busy.bookings == [occupied(before), occupied(after)]
    assert busy.blocked == [early, late]


def test_busy_bookings_are_the_active_ones_of_this_sub_account(app, tenants, tenant):
    start = WINDOW.start + timedelta(hours=1)
    pending = make_booking(tenant, start, status="pending")
    confirmed = make_booking(tenant, start + timedelta(hours=1), status="confirmed")
    for n, status in enumerate(("cancelled", "completed", "no_show")):
        make_booking(tenant, start + timedelta(hours=2 + n), status=status)
    other = tenants.create()
    make_booking(other, start + timedelta(hours=6), status="confirmed")
    make_blocked_time(other, WINDOW.start, WINDOW.end)

    busy = load_busy(tenant.sub_account_id, WINDOW)
    assert busy.bookings == [occupied(pending), occupied(confirmed)]
    assert busy.blocked == []
    busy = load_busy(tenant.sub_account_id, WINDOW, exclude_booking_id=pending.id)
    assert busy.bookings == [occupied(confirmed)]


def test_email_filter_ignores_case_and_other_sub_accounts(app, tenants, tenant):
    first = make_booking(tenant, utc(2031, 3, 3, 15), emails=("kim@example.test",))
    make_booking(tenant, utc(2031, 3, 3, 16), emails=("sam@example.test",))
    both = make_booking(
        tenant, utc(2031, 3, 3, 17), emails=("sam@example.test", "KIM@example.test")
    )
    make_booking(tenants.create(), utc(2031, 3, 3, 15), emails=("kim@example.test",))
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)

    for email in ("kim@example.test", " Kim@Example.TEST ", "KIM@EXAMPLE.TEST"):
        page, total = list_bookings(sub_account, BookingListQuery(email=email))
        assert ([b.id for b in page], total) == ([first.id, both.id], 2)
    page, total = list_bookings(sub_account, BookingListQuery(email="kim@example.test", limit=1))
    assert ([b.id for b in page], total) == ([first.id], 2)
    page, total = list_bookings(sub_account, BookingListQuery(email="nobody@example.test"))
    assert (list(page), total) == ([], 0)


def test_end_date_keeps_a_booking_ending_exactly_then_and_drops_one_ending_later(app, tenant):
    inside = make_booking(tenant, utc(2031, 3, 3, 15), minutes=60)  # ends 16:00
    # Starts before 16:00 and ends after; starts at 16:00 (inactive: they overlap the first).
    make_booking(tenant, utc(2031, 3, 3, 15, 30), minutes=60, status="cancelled")
    make_booking(tenant, utc(2031, 3, 3, 16), status="completed")
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    query = BookingListQuery(end_date=InstantInput(utc(2031, 3, 3, 16)))
    page, total = list_bookings(sub_account, query)
    assert ([b.id for b in page], total) == ([inside.id], 1)
