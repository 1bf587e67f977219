"""No test sleeps to prove that something did not happen, or to reach a state: on a loaded
machine such a sleep is too short, and the test passes without testing anything. A test waits
for an observable fact (a row, a lock in ``pg_locks``, a log line, a message, the worker idle:
``tests.celery_workers.wait_for``, ``worker_idle``, ``task_returned``), then asserts.

The check reads every module of ``tests/`` (with ``ast``; nothing is imported or run) and finds
each call of ``sleep`` (``time.sleep``, ``asyncio.sleep``, a name imported as ``sleep``). A
sleep is allowed only in a place listed in ``ALLOWED`` (``module.py::top-level name``), with
the reason: a polling loop that waits for a fact, a test server that is slow on purpose, or a
duration that is the scenario itself (a load's steady phase, an outage's length, a window that
must pass). Anything else fails, naming the place; an entry whose place no longer sleeps fails
until it is removed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

POLLS = "a polling loop: it sleeps between looks at an observable fact, bounded by a deadline"
SLOW_SERVER = (
    "a test server slow on purpose (a drip, a think time, a hang): the behaviour under test"
)
SCENARIO = "a duration that is the scenario itself (steady load, an outage, a freeze), not a wait"

ALLOWED: dict[str, str] = {
    "celery_workers.py::_celery": POLLS,
    "celery_workers.py::wait_for": POLLS,
    "mail_servers.py::Inbox": POLLS,
    "servers.py::wait_until_serving": POLLS,
    "postgres_servers.py::OwnPostgres": POLLS,
    "radicale_servers.py::OwnRadicale": POLLS,
    "redis_servers.py::OwnRedis": POLLS,
    "xandikos_servers.py::OwnXandikos": POLLS,
    "webhook_receivers.py::Receiver": POLLS,
    "test_embedded_default.py::make_run": POLLS,
    "test_make_run_stop.py::make_run": POLLS,
    "test_make_run_stop.py::test_one_ctrl_c_stops_web_worker_and_beat_cleanly_and_make_exits_0": (
        POLLS
    ),
    "test_rate_limit.py::polls": POLLS,
    "test_limiter_storage_faults.py::test_a_frozen_rate_limit_store_never_costs_a_booking": (
        "a polling loop for the log's recovery lines, and the freeze's length (" + SCENARIO + ")"
    ),
    "test_caldav_hostile_servers.py::test_the_connection_of_a_read_past_its_deadline_is_closed_at_once": (
        POLLS
    ),
    "test_pooled_connections.py::terminate": POLLS,
    "test_mcp_oauth.py::wait_until_inactive": POLLS,
    "test_mcp_oauth.py::test_an_exchange_waits_for_one_in_progress_and_is_then_its_replay": POLLS,
    "feed_servers.py::feed_server": SLOW_SERVER,
    "webhook_receivers.py::webhook_receiver": SLOW_SERVER,
    "test_caldav_hostile_servers.py::caldav_server": SLOW_SERVER,
    "test_client.py::test_a_429_is_waited_out_as_retry_after_says_and_then_succeeds": (
        "the client's own wait for Retry-After, recorded and then done: the behaviour under test"
    ),
    "test_key_cache.py::test_a_key_deactivated_elsewhere_is_refused_within_a_second_by_every_process": (
        "the second the promise allows must pass: the behaviour under test"
    ),
    "test_rate_limit.py::test_the_window_slides_in_redis": (
        "the window must slide past, as Retry-After says: the behaviour under test"
    ),
    "test_database_faults.py::SteadyLoad": SCENARIO,
    "test_database_faults.py::outage_under_load": SCENARIO,
    "test_broker_outages.py::BookingLoad": SCENARIO,
    "test_broker_outages.py::outage": SCENARIO,
    "test_broker_outages.py::test_every_worker_keeps_consuming_after_a_redis_outage_under_load": (
        "the load's steady phase before and after the outage (" + SCENARIO + ")"
    ),
    "test_frozen_backends.py::SteadyLoad": SCENARIO,
    "test_frozen_backends.py::frozen_for": SCENARIO,
    "test_frozen_backends.py::test_requests_never_wait_on_a_frozen_redis_or_postgres": SCENARIO,
    "test_frozen_backends.py::test_only_waiting_is_charged_to_the_time_to_wait": (
        "work done inside a request, timed: the behaviour under test"
    ),
}


def sleeps() -> Iterator[tuple[str, int]]:
    """Every call of ``sleep`` in ``tests/``, as (``module.py::top-level name``, line)."""
    for path in sorted(TESTS.rglob("*.py")):
        if "vendor" not in path.parts:
            yield from sleeps_in(path.read_text(), path.name)


def sleeps_in(source: str, module: str) -> Iterator[tuple[str, int]]:
    """Every call of ``sleep`` in one module's ``source``."""
    for top in ast.parse(source).body:
        place = f"{module}::{getattr(top, 'name', '<module>')}"
        for node in ast.walk(top):
            if isinstance(node, ast.Call) and _called_name(node.func) == "sleep":
                yield place, node.lineno


def _called_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def test_no_test_sleeps_outside_the_places_listed_with_a_reason() -> None:
    found = [f"{place} (line {line})" for place, line in sleeps() if place not in ALLOWED]
    assert found == [], (
        "sleeps that prove nothing on a loaded machine: wait for an observable fact instead"
        " (tests.celery_workers.wait_for), or list the place in ALLOWED with the reason"
    )


def test_every_allowed_place_still_sleeps() -> None:
    sleeping = {place for place, _ in sleeps()}
    assert sorted(set(ALLOWED) - sleeping) == []


def test_the_check_finds_a_sleep_to_prove_absence_however_it_is_imported() -> None:
    source = (
        "import time\nfrom asyncio import sleep\n"
        "def test_nothing_more_arrives():\n    time.sleep(3)\n"
        "class Later:\n    async def run(self):\n        await sleep(1)\n"
    )
    assert list(sleeps_in(source, "test_x.py")) == [
        ("test_x.py::test_nothing_more_arrives", 4),
        ("test_x.py::Later", 7),
    ]
