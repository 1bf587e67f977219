"""Benchmark of the live check's cost on CalDAV servers: how long a create, reschedule or hold
waits while the connected calendar is asked about its time (``live_check.ask``,
which the write calls before its lock), on Radicale (asking for a password, with its default
delay of every 401: ``[auth] delay = 1``, 0.5–1.5 s at random) and on Xandikos (which asks for
none over plain HTTP); sabre/dav needs PHP, which this bench does not install.

Run from the project root (about a minute; PostgreSQL at ``TEST_POSTGRES_URL``, as
``bench.availability``)::

    .venv/bin/python -m bench.live_check [--runs 40]

On a throw-away PostgreSQL database (``bench.availability.postgres_database``), one sub account per
server with one CalDAV connection to an empty calendar, synced once (so the server has asked for its
password: the sync learns the scheme), and one with no connection (the live check then asks nothing:
the write's own cost without it). Each run asks the live check about next week's 10:00–10:30, in a
shuffled order of the rows, after ``WARMUP`` untimed runs; the app's deadline is the default 1.5 s
(``CALENDAR_LIVE_CHECK_TIMEOUT_S``).

Rows, per server:

- **first request unauthenticated** (the code before issue 48): the process forgets what the
  server asked for before each run, so every live check sends its first request without
  credentials, is answered 401 (after Radicale's delay) and asks again with them;
- **credentials with the first request**: what the sync learnt is kept, so the live check's
  first request carries Basic credentials (``providers/caldav.py``, ``_ASKS_FOR_BASIC``).

The floor, measured beside each run: the same ``calendar-query`` REPORT the live check sends,
with the credentials, on a new connection, with ``http.client`` (no app, no caldav): what the
server itself takes. "Added" is a row's median less the median of the sub account with no
connection.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import os
import platform
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import Flask
from flask_migrate import upgrade

from app import create_app
from app.extensions import db
from app.models.types import utcnow
from app.scheduling.intervals import Interval
from app.services.integrations.calendars import live_check, sync_connection
from app.services.integrations.calendars.providers import caldav
from bench.availability import postgres_database, postgres_version
from tests.factories import TenantFactory, next_monday, ny
from tests.radicale_servers import PASSWORD, OwnRadicale, connection_doc
from tests.xandikos_servers import OwnXandikos

RUNS, WARMUP = 40, 3
USER = "dentist"
SEED = 20261128


@dataclass
class Row:
    label: str
    sub_account_id: int
    server: str | None  # the server's label (None: no connection)
    remembers: bool  # what the server asked for is kept between runs
    floor: Callable[[], None] | None
    seconds: list[float] = field(default_factory=list)
    floors: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)


def report_query(url: str, calendar_path: str, window: Interval, auth: str | None) -> None:
    """The live check's ``calendar-query`` REPORT on a new connection, with ``http.client``."""
    start = (window.start - timedelta(days=1)).strftime("%Y%m%dT%H%M%SZ")
    end = (window.end + timedelta(days=1)).strftime("%Y%m%dT%H%M%SZ")
    body = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<C:calendar-query xmlns:D="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">'
        "<D:prop><D:getetag/><C:calendar-data/></D:prop>"
        '<C:filter><C:comp-filter name="VCALENDAR"><C:comp-filter name="VEVENT">'
        f'<C:time-range start="{start}" end="{end}"/>'
        "</C:comp-filter></C:comp-filter></C:filter></C:calendar-query>"
    ).encode()
    parts = urlsplit(url)
    headers = {"Depth": "1", "Content-Type": "application/xml; charset=utf-8"}
    if auth:
        headers["Authorization"] = auth
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("REPORT", calendar_path, body, headers)
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 207, answer.status
    finally:
        connection.close()


def median_ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f} ms" if values else "–"


def p95_ms(values: list[float]) -> str:
    if not values:
        return "–"
    ordered = sorted(values)
    return f"{ordered[max(0, int(0.95 * len(ordered) + 0.999) - 1)] * 1000:.1f} ms"


@contextmanager
def servers(folder: Path) -> Iterator[dict[str, Any]]:
    with ExitStack() as stack:
        radicale = stack.enter_context(
            OwnRadicale(folder / "radicale", {USER: PASSWORD}, auth_delay=1.0)
        )
        xandikos = stack.enter_context(OwnXandikos(folder / "xandikos"))
        yield {"Radicale": radicale, "Xandikos": xandikos}


def prepare(app: Flask, found: dict[str, Any], window: Interval) -> list[Row]:
    rows = [
        Row(
            "no connection (the write alone)",
            TenantFactory().create().sub_account_id,
            None,
            True,
            None,
        )
    ]
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    for label, server in found.items():
        name = f"Bench {label}"
        calendar = server.make_calendar(USER, name)
        path = urlsplit(str(calendar.url)).path
        tenant = TenantFactory().create(
            calendarConnections=[connection_doc("Calendar", server, USER, calendar=name)]
        )
        result = sync_connection(tenant.connections["Calendar"], now=utcnow())
        db.session.commit()
        assert result.ok, result

        def floor(url: str = server.url, path: str = path) -> None:
            report_query(url, path, window, auth)

        rows.append(
            Row(
                f"{label}: first request unauthenticated",
                tenant.sub_account_id,
                label,
                False,
                floor,
            )
        )
        rows.append(
            Row(
                f"{label}: credentials with the first request",
                tenant.sub_account_id,
                label,
                True,
                floor,
            )
        )
    return rows


def run(rows: list[Row], window: Interval, runs: int, remembered: set[str]) -> None:
    rng = random.Random(SEED)
    for index in range(WARMUP + runs):
        order = list(rows)
        rng.shuffle(order)
        for row in order:
            caldav._ASKS_FOR_BASIC.clear()
            if row.remembers:
                caldav._ASKS_FOR_BASIC.update(remembered)
            started = time.perf_counter()
            question = live_check.plan_live_check(row.sub_account_id, window)
            assert question is not None
            db.session.commit()  # the plan's reads end, as an entry point ends them
            outcome = live_check.record_answers(live_check.ask(question))
            db.session.commit()
            took = time.perf_counter() - started
            floor_took = None
            if row.floor is not None:
                floor_started = time.perf_counter()
                row.floor()
                floor_took = time.perf_counter() - floor_started
            if index < WARMUP:
                continue
            row.seconds.append(took)
            row.outcomes[outcome.outcome] += 1
            if floor_took is not None:
                row.floors.append(floor_took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    options = parser.parse_args()
    print("Live check benchmark: a CalDAV calendar asked about a write's time")
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.platform()}"
    )
    print(f"         load average at start {os.getloadavg()[0]:.2f} (other work skews the figures)")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {options.runs} runs after {WARMUP}")
    pg_version = postgres_version()
    if pg_version is None:
        raise SystemExit("PostgreSQL is not reachable at TEST_POSTGRES_URL")
    print(f"         PostgreSQL {pg_version}")
    with tempfile.TemporaryDirectory() as folder, postgres_database() as url:
        app = create_app(
            {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "bench", "CALDAV_ALLOW_PRIVATE": True}
        )
        monday = next_monday()
        window = Interval(ny(monday, 10), ny(monday, 10, 30))
        with app.app_context(), servers(Path(folder)) as found:
            upgrade()
            rows = prepare(app, found, window)
            remembered = set(caldav._ASKS_FOR_BASIC)  # what the syncs learnt
            print(f"         servers that asked for Basic credentials: {sorted(remembered)}")
            run(rows, window, options.runs, remembered)
            db.session.remove()
            db.engine.dispose()
    alone = statistics.median(rows[0].seconds)
    print()
    print("| Row | Median | p95 | Added (median) | Floor: the REPORT alone (median) | Outcomes |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        added = (
            ""
            if row.server is None
            else f"+{(statistics.median(row.seconds) - alone) * 1000:.1f} ms"
        )
        outcomes = ", ".join(f"{n} {name}" for name, n in sorted(row.outcomes.items()))
        print(
            f"| {row.label} | {median_ms(row.seconds)} | {p95_ms(row.seconds)} | {added}"
            f" | {median_ms(row.floors)} | {outcomes} |"
        )


if __name__ == "__main__":
    main()
